#!/usr/bin/env bash
# Code that runs later, planted where a name list would not look (issue 12, part 1): git
# directories recognised by content (a bare repository in a subdirectory), config.worktree,
# linked worktrees' files, the core.hooksPath directory, a symlinked hook's target, trees made
# writable with --allow-write (one of them a git directory), names of hook managers, other
# VCSs and agent CLIs, a directory its owner made unreadable, a directory deeper than PATH_MAX.
# Each attack is made for real inside the sandbox; the host is checked afterwards: the file is
# refused or quarantined and reported (exit 123, a "planted" line in the audit log), and a host
# git command in the tree runs nothing.
source "$(dirname "$0")/lib.sh"

new_workspace
require_sandbox || finish
export XDG_STATE_HOME="$T/state"   # the quarantine goes under here
audit="$T/audit.jsonl"
pwned="$O/pwned"                   # what a planted command would create on the host
mkdir -p "$O" && chmod 755 "$O"

# planted REL DESC: the last run reported REL, it is gone from the workspace and it is in the
# quarantine; the audit log has its "planted" line.
planted() {
    local rel=$1 desc=$2
    check "$desc: reported as planted" grep -qF "planted: $rel" <<<"$ERR"
    check "$desc: no longer in the workspace" test ! -e "$WS/$rel" -a ! -L "$WS/$rel"
    check "$desc: audit line" grep -qF "\"path\":\"$WS/$rel\"" "$audit"
    check "$desc: in the quarantine" bash -c "find '$XDG_STATE_HOME/exguardian/quarantine' -path '*/$rel' | grep -q ."
}
attack() { rm -f "$audit"; run sbx --audit-log "$audit" -- bash -c "$1"; }

# ---- a git directory by content, not by name: bare repository in a subdirectory ------------
mkdir -p "$WS/src/sub"
attack "mkdir src/objects src/refs; echo 'ref: refs/heads/main' > src/HEAD
printf '[core]\n\tfsmonitor = touch $pwned; false\n' > src/config"
check "bare repo in src/: exit 123 (got $STATUS)" test "$STATUS" = 123
planted src/config "bare repo in src/: its config"
run bash -c "cd '$WS/src/sub' && git status"
check "host: git status in src/sub runs nothing" test ! -e "$pwned"
rm -rf "$WS/src" "$pwned"

# An existing bare repository in the tree: its config and hooks are read-only from the start.
git init -q --bare "$WS/vendor.git"
expect_refused_sh 'config: Read-only file system' '' "printf '[core]\n\tfsmonitor = touch $pwned\n' >> vendor.git/config"
expect_refused_sh 'pre-receive: Read-only file system' '' "echo 'touch $pwned' > vendor.git/hooks/pre-receive"
check "existing bare repo: config unchanged" bash -c "! grep -q fsmonitor '$WS/vendor.git/config'"
rm -rf "$WS/vendor.git"

# ---- config.worktree, linked worktrees' commondir and gitdir --------------------------------
attack "printf '[core]\n\tfsmonitor = touch $pwned\n' > .git/config.worktree"
planted .git/config.worktree ".git/config.worktree"
git -C "$WS" worktree add -q "$T/wt1" 2>/dev/null
expect_refused_sh 'commondir: Read-only file system' '' "echo /tmp/evil > .git/worktrees/wt1/commondir"
expect_refused_sh 'gitdir: Read-only file system' '' "echo /tmp/evil/.git > .git/worktrees/wt1/gitdir"
check "linked worktree's commondir unchanged" test "$(cat "$WS/.git/worktrees/wt1/commondir")" = ../..
attack "mkdir -p .git/worktrees/x && echo ref: refs/heads/main > .git/worktrees/x/HEAD && echo $O > .git/worktrees/x/commondir"
planted .git/worktrees/x/commondir "a new worktree's commondir"

# ---- core.hooksPath: the directory the config names; a symlinked hook's target --------------
git -C "$WS" config core.hooksPath tools/hooks
attack "mkdir -p tools/hooks && printf '#!/bin/sh\ntouch $pwned\n' > tools/hooks/pre-commit && chmod +x tools/hooks/pre-commit"
planted tools/hooks "core.hooksPath directory created during the run"
mkdir -p "$WS/tools/hooks" && printf '#!/bin/sh\nexit 0\n' > "$WS/tools/hooks/pre-commit" && chmod +x "$WS/tools/hooks/pre-commit"
expect_refused_sh 'pre-commit: Read-only file system' '' "echo 'touch $pwned' >> tools/hooks/pre-commit"
expect_refused_sh 'post-checkout: Read-only file system' '' "echo 'touch $pwned' > tools/hooks/post-checkout"
check "existing hooksPath hook unchanged" bash -c "! grep -q pwned '$WS/tools/hooks/pre-commit'"
git -C "$WS" config --unset core.hooksPath
rm -rf "$WS/tools"
mkdir -p "$WS/tools" && printf '#!/bin/sh\nexit 0\n' > "$WS/tools/pre-commit" && chmod +x "$WS/tools/pre-commit"
ln -s ../../tools/pre-commit "$WS/.git/hooks/pre-commit"
expect_refused_sh 'pre-commit: Read-only file system' '' "echo 'touch $pwned' >> tools/pre-commit"
# (the target is a mount point of its own: EBUSY)
expect_refused_sh "cannot remove 'tools/pre-commit': Device or resource busy" '' "rm -f tools/pre-commit && echo 'touch $pwned' > tools/pre-commit"
check "symlinked hook's target unchanged" bash -c "! grep -q pwned '$WS/tools/pre-commit'"
rm -f "$WS/tools/pre-commit"   # a dangling hook link: its target created during the run
attack "printf '#!/bin/sh\ntouch $pwned\n' > tools/pre-commit"
planted tools/pre-commit "a dangling symlinked hook's target"
rm -f "$WS/.git/hooks/pre-commit"
run git -C "$WS" -c user.name=t -c user.email=t@t commit -q --allow-empty -m probe
check "host: git commit ran no planted hook" test ! -e "$pwned"

# ---- names other tools run ---------------------------------------------------------------------
attack "echo 'pre-commit: {commands: {x: {run: touch $pwned}}}' > lefthook.yml
mkdir -p m/.hg && printf '[hooks]\nupdate = touch $pwned\n' > m/.hg/hgrc
mkdir -p .gemini && echo '{\"mcpServers\": {\"x\": {\"command\": \"touch\"}}}' > .gemini/settings.json
mkdir -p p/.cursor && echo '{}' > p/.cursor/mcp.json"
for p in lefthook.yml m/.hg/hgrc .gemini/settings.json p/.cursor/mcp.json; do planted "$p" "$p"; done
rm -rf "$WS/m" "$WS/p" "$WS/.gemini"

# ---- --allow-write trees are swept too; one that is a git directory --------------------------
extra="$O/extra"
mkdir -p "$extra" && chmod 777 "$extra"
rm -f "$audit"
run sbx --audit-log "$audit" --allow-write "$extra" -- bash -c "mkdir -p $extra/r/.git/hooks && echo ref: refs/heads/main > $extra/r/.git/HEAD &&
printf '#!/bin/sh\ntouch $pwned\n' > $extra/r/.git/hooks/pre-commit && echo 'touch $pwned' > $extra/.envrc"
check "allowWrite tree: exit 123 (got $STATUS)" test "$STATUS" = 123
for p in r/.git/hooks/pre-commit .envrc; do
    check "allowWrite tree: $p reported" grep -qF "planted: $extra/$p" <<<"$ERR"
    check "allowWrite tree: $p gone" test ! -e "$extra/$p"
    check "allowWrite tree: $p audit line" grep -qF "\"path\":\"$extra/$p\"" "$audit"
done
rm -rf "$extra"
# An agent CLI's own config directory made writable (allowWrite ~/.claude, issue 45): its
# sessions and history are written; its settings (existing: read-only; new: quarantined) and
# hooks are code that runs later, though the tree's root is .claude itself.
acfg="$O/agenthome/.claude"
mkdir -p "$acfg" && echo '{}' > "$acfg/settings.json" && chmod -R 777 "$O/agenthome" && chmod 666 "$acfg/settings.json"
rm -f "$audit"
run sbx --audit-log "$audit" --allow-write "$acfg" -- bash -c "echo line >> $acfg/history.jsonl; \
echo '{\"hooks\": {\"Stop\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"touch $pwned\"}]}]}}' > $acfg/settings.json \
  || echo settings-refused; \
mkdir -p $acfg/hooks && printf '#!/bin/sh\ntouch $pwned\n' > $acfg/hooks/stop.sh; \
echo '{\"hooks\": {}}' > $acfg/settings.local.json"
check "agent config dir: the settings file it had is read-only inside ($OUT)" grep -q settings-refused <<<"$OUT"
check "agent config dir: its settings are unchanged on the host" test "$(cat "$acfg/settings.json")" = '{}'
check "agent config dir: exit 123 (got $STATUS)" test "$STATUS" = 123
for p in hooks settings.local.json; do
    check "agent config dir: $p reported" grep -qF "planted: $acfg/$p" <<<"$ERR"
    check "agent config dir: $p gone" test ! -e "$acfg/$p"
done
check "agent config dir: its history was written" grep -qx line "$acfg/history.jsonl"
rm -rf "$O/agenthome"
# An agent in a linked worktree given the main repository's git directory.
git -C "$WS" worktree add -q "$T/wt2" 2>/dev/null
printf '#!/bin/sh\nexit 0\n' > "$WS/.git/hooks/post-checkout" && chmod +x "$WS/.git/hooks/post-checkout"
cat > "$T/wt2/attack.sh" <<EOF
echo 'touch $pwned' >> '$WS/.git/hooks/post-checkout'
echo 'touch $pwned' > '$WS/.git/hooks/pre-push'
printf '[core]\n\tfsmonitor = touch $pwned\n' > '$WS/.git/worktrees/wt2/config.worktree'
git -c user.name=t -c user.email=t@t commit -q --allow-empty -m from-wt2 && echo committed
EOF
rm -f "$audit"
run bash -c 'cd "$1" && shift && exec timeout 60 "$@"' _ "$T/wt2" "${EXG_RUN[@]}" --audit-log "$audit" \
    --allow-write "$WS/.git" -- bash attack.sh
check "allowWrite MAIN/.git: the agent can still commit (got: $OUT)" grep -q committed <<<"$OUT"
check "allowWrite MAIN/.git: existing hook unchanged" bash -c "! grep -q pwned '$WS/.git/hooks/post-checkout'"
check "allowWrite MAIN/.git: no new hook" test ! -e "$WS/.git/hooks/pre-push"
check "allowWrite MAIN/.git: config.worktree quarantined" test ! -e "$WS/.git/worktrees/wt2/config.worktree"
check "allowWrite MAIN/.git: reported" grep -qF "planted: $WS/.git/worktrees/wt2/config.worktree" <<<"$ERR"
git -C "$WS" worktree remove --force "$T/wt2"; git -C "$WS" worktree remove --force "$T/wt1"

# ---- a directory its owner made unreadable ---------------------------------------------------
attack "mkdir -p hide/r/.git/hooks && echo ref: refs/heads/main > hide/r/.git/HEAD && printf '#!/bin/sh\ntouch $pwned\n' > hide/r/.git/hooks/pre-commit && chmod 000 hide"
check "unreadable dir: exit 123 (got $STATUS)" test "$STATUS" = 123
check "unreadable dir: its mode was put back (000)" test "$(stat -c %a "$WS/hide")" = 0
chmod 755 "$WS/hide"
planted hide/r/.git/hooks/pre-commit "hook under a chmod 000 directory"
rm -rf "$WS/hide"
# the mode itself: the sweep gives u+rx for the walk and restores it
attack "mkdir -p hide2 && chmod 000 hide2"
check "unreadable dir without anything planted: exit 0 (got $STATUS)" test "$STATUS" = 0
check "unreadable dir: mode 000 restored" test "$(stat -c %a "$WS/hide2")" = 0
chmod 755 "$WS/hide2"; rm -rf "$WS/hide2"

# ---- deeper than PATH_MAX; deeper than the sweep walks (fails closed) --------------------------
# (made with python: bash's cd re-reads the whole path, and on gVisor its getcwd aborts there)
attack "python3 -c '
import os
for i in range(30):
    os.mkdir(\"x\" * 200); os.chdir(\"x\" * 200)
os.makedirs(\"r/.git/hooks\")
open(\"r/.git/hooks/pre-commit\", \"w\").write(\"#!/bin/sh\\ntouch $pwned\\n\")
'"
check "deep dir (> PATH_MAX): exit 123 (got $STATUS)" test "$STATUS" = 123
check "deep dir: reported" grep -q "planted: .*r/.git/hooks/pre-commit" <<<"$ERR"
check "deep dir: hook gone" bash -c "! find '$WS/xxxxx'* -name pre-commit 2>/dev/null | grep -q ."
run sbx -- true
check "deep dir left in place: the next run starts and ends cleanly (got $STATUS)" test "$STATUS" = 0
[ "$STATUS" = 0 ] || show_last
rm -rf "$WS"/x*
attack 'python3 -c "
import os
for i in range(2100):
    os.mkdir(\"d\"); os.chdir(\"d\")
open(\".envrc\", \"w\").write(\"x\")
"'
check "deeper than the walk: exit 123 (got $STATUS)" test "$STATUS" = 123
check "deeper than the walk: 'not checked' reported" grep -q "not checked: " <<<"$ERR"
check "deeper than the walk: summary does not call it quarantined" bash -c "! grep -q 'planted file(s) quarantined' <<<\"\$1\"" _ "$ERR"
check "deeper than the walk: audit line" grep -q '"event":"sweep_unchecked"' "$audit"
run sbx --allow-planted -- true
check "--allow-planted does not accept an unchecked tree (got $STATUS)" test "$STATUS" = 123
rm -rf "$WS/d"

finish
