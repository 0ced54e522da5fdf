# Helpers for the integration tests; sourced by tests/integration/test_*.sh.
#
# run.sh provides: EXG (exguardian binary), T (temp dir owned by the runner, under /tmp),
# O (temp dir owned by the runner under /var/lib: outside the workspace and outside the
# sandbox's private /tmp and /var/tmp, so only the read-only host view stops writes there),
# EXG_AS (root|user), HOME (= $T/home, owned by the runner), EXG_LAYER (process|container|gvisor).
#
# Every sandbox of a script runs on EXG_LAYER: call `exguardian run` only as "${EXG_RUN[@]}" (or
# through sbx/sh_in), never as "$EXG" run. Where a layer cannot show one thing the process layer
# shows, the script says so with `skip` (layer_skip) and keeps the security assertion itself.
#
# Conventions:
#   run CMD...            runs CMD; sets STATUS, OUT (stdout), ERR (stderr)
#   sbx [OPTS] -- CMD...  runs `exguardian run OPTS -- CMD` with cwd = $WS (bounded by a timeout)
#   sh_in 'LINE' [OPTS]   runs LINE with bash -c inside the sandbox (cwd = $WS)
#   run_each [OPTS] -- LINE...   every LINE in one sandbox; each_line I: LINE I's OUT, ERR, STATUS
#   EXG_RUN               the array `exguardian run [--layer L]`
#   on_layer L...         true when EXG_LAYER is one of L...
# Escape and destructive attempts only run after require_sandbox has seen the sandbox in place.

set -u
: "${EXG:?EXG must point at the exguardian binary}"
: "${T:?T must be a temp dir}"
: "${EXG_AS:=user}"
: "${O:=}"
: "${EXG_LAYER:=process}"
EXG_RUN=("$EXG" run)
[ "$EXG_LAYER" = process ] || EXG_RUN+=(--layer "$EXG_LAYER")
on_layer() { local l; for l in "$@"; do [ "$EXG_LAYER" = "$l" ] && return 0; done; return 1; }

PASS=0
FAILED=0
SKIPPED=0
STATUS=0
OUT=""
ERR=""
SANDBOX_OK=0
CANARY=""
WS=""
# (a guest boot under TCG alone takes 3-15 s on a busy host)
if [ "$EXG_LAYER" = microvm ]; then EXG_CALL_TIMEOUT=${EXG_CALL_TIMEOUT:-180}; else EXG_CALL_TIMEOUT=${EXG_CALL_TIMEOUT:-60}; fi
_BG_PIDS=()
_CLEANUP_PATHS=()

export GIT_AUTHOR_NAME=exg-test GIT_AUTHOR_EMAIL=exg-test@example.invalid
export GIT_COMMITTER_NAME=exg-test GIT_COMMITTER_EMAIL=exg-test@example.invalid
export GIT_CONFIG_NOSYSTEM=1

ok()   { PASS=$((PASS + 1)); echo "ok   - $*"; }
fail() { FAILED=$((FAILED + 1)); echo "FAIL - $*"; }
skip() { SKIPPED=$((SKIPPED + 1)); echo "skip - $*"; }
note() { echo "#      $*"; }

# Prints the captured output of the last `run`, indented, for failure messages.
show_last() {
    note "status=$STATUS"
    [ -n "$OUT" ] && printf '%s\n' "$OUT" | head -n 20 | sed 's/^/#      out: /'
    [ -n "$ERR" ] && printf '%s\n' "$ERR" | head -n 20 | sed 's/^/#      err: /'
    return 0
}

# run CMD...: captures status, stdout and stderr (stdin is inherited from the caller).
run() {
    local o e
    o=$(mktemp "$T/.out.XXXXXX") e=$(mktemp "$T/.err.XXXXXX")
    "$@" >"$o" 2>"$e"
    STATUS=$?
    OUT=$(cat "$o") ERR=$(cat "$e")
    rm -f "$o" "$e"
    return 0
}

# Describes a command for messages.
_desc() { local IFS=' '; printf '%s' "$*" | head -c 160; }

# check DESC CMD...: ok when CMD succeeds (status only, output not captured).
check() {
    local desc=$1; shift
    if "$@"; then ok "$desc"; else fail "$desc"; fi
}

# expect_status N CMD...
expect_status() {
    local want=$1; shift
    run "$@"
    if [ "$STATUS" -eq "$want" ]; then ok "exit $want: $(_desc "$@")"
    else fail "exit $want expected, got $STATUS: $(_desc "$@")"; show_last; fi
}

# expect_fail CMD...: CMD ran and failed (non-zero). A sandbox that could not start (125) or
# was killed by its timeout (124) proves nothing. For a refusal use expect_refused, which also
# checks that it is the refusal expected.
expect_fail() {
    run "$@"
    if [ "$STATUS" -eq 125 ] || [ "$STATUS" -eq 124 ]; then fail "did not run (exit $STATUS): $(_desc "$@")"; show_last
    elif [ "$STATUS" -ne 0 ]; then ok "fails ($STATUS): $(_desc "$@")"
    else fail "should fail but succeeded: $(_desc "$@")"; show_last; fi
}

# expect_output_contains STR CMD...: stdout contains STR (fixed string); status not checked.
expect_output_contains() {
    local want=$1; shift
    run "$@"
    if grep -qF -- "$want" <<<"$OUT"; then ok "stdout has '$want': $(_desc "$@")"
    else fail "stdout lacks '$want': $(_desc "$@")"; show_last; fi
}

# expect_no_output_contains STR CMD...: the command ran (a sandbox that could not start, 125,
# or was killed by its timeout, 124, proves nothing) and neither stdout nor stderr contains STR.
expect_no_output_contains() {
    local bad=$1; shift
    run "$@"
    if [ "$STATUS" -eq 125 ] || [ "$STATUS" -eq 124 ]; then fail "did not run (exit $STATUS): $(_desc "$@")"; show_last
    elif grep -qF -- "$bad" <<<"$OUT$ERR"; then fail "output contains '$bad': $(_desc "$@")"; show_last
    else ok "output free of '$bad': $(_desc "$@")"; fi
}

# Refusals. The one way to assert that the sandbox refused something: the command prints
# RAN_MARK on a line of its own before it attempts the refused thing, so its output proves that
# the sandbox started and ran it (exguardian's own errors, e.g. a "Permission denied" of its
# set-up, come with no such line), and the caller names the refusal expected.
RAN_MARK=exg-sandbox-ran

# last_refused WHY STR DESC: judges the last `run` (or a script's own runner that sets STATUS,
# OUT and ERR) of a command that printed $RAN_MARK first: it ran (the mark; not 125 = the
# sandbox was not set up, 124 = killed by the timeout, 127 = not found), it failed (non-zero),
# the refusal is WHY (an extended regex on stdout and stderr, e.g. 'Read-only file system'), and
# STR (what must not leak; may be empty) appears nowhere in the output.
last_refused() {
    local why=$1 bad=$2 desc=$3 all=$OUT$'\n'$ERR
    case "$STATUS" in ''|*[!0-9]*) fail "no exit status ('$STATUS'): $desc"; show_last; return ;; esac
    if [ "$STATUS" -eq 125 ] || [ "$STATUS" -eq 124 ]; then fail "did not run (exit $STATUS): $desc"; show_last
    elif ! grep -qxF -- "$RAN_MARK" <<<"$OUT"; then fail "the sandbox did not run it (no '$RAN_MARK' line): $desc"; show_last
    elif [ "$STATUS" -eq 127 ]; then fail "not found (exit 127): $desc"; show_last
    elif [ "$STATUS" -eq 0 ]; then fail "not refused (exit 0): $desc"; show_last
    elif ! grep -qE -- "$why" <<<"$all"; then fail "refused, but not with /$why/: $desc"; show_last
    elif [ -n "$bad" ] && grep -qF -- "$bad" <<<"$all"; then fail "output contains '$bad': $desc"; show_last
    else ok "refused (/$why/, exit $STATUS): $desc"; fi
}

# The refusal of a write to the read-only host view, as a WHY for the helpers below: RO_REFUSAL
# on the script's layer, `ro_refusal LAYER` on another. gVisor checks a directory's permissions
# before the mount's read-only flag: where the sandbox's uid could not write anyway (a root-owned
# /etc or /usr) its answer is "Permission denied". In a microVM the guest kernel's Landlock
# refuses the write (EACCES) before it reaches the read-only view on the host.
ro_refusal() {  # [LAYER]
    case "${1:-$EXG_LAYER}" in
        gvisor | microvm) echo 'Read-only file system|Permission denied' ;;
        *) echo 'Read-only file system' ;;
    esac
}
RO_REFUSAL=$(ro_refusal)
# The same where the sandbox's uid could write but for the read-only view (a world-writable file
# or directory outside the writable trees): EROFS on every layer but the microVM's (Landlock).
if [ "$EXG_LAYER" = microvm ]; then RO_WRITABLE_REFUSAL='Read-only file system|Permission denied'
else RO_WRITABLE_REFUSAL='Read-only file system'; fi

# expect_refused WHY STR [exguardian run options] -- CMD...: runs CMD in the sandbox (as sbx does,
# cwd = $WS) after the mark, and judges it with last_refused.
expect_refused() {
    local why=$1 bad=$2 opts=()
    shift 2
    while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
    if [ $# -lt 2 ]; then fail "expect_refused: no '-- CMD' given (${opts[*]})"; return; fi
    shift
    run sbx "${opts[@]}" -- sh -c 'echo "$0" && exec "$@"' "$RAN_MARK" "$@"
    last_refused "$why" "$bad" "$(_desc ${opts[@]+"${opts[@]}" --} "$@")"
}

# expect_refused_sh WHY STR LINE [exguardian run options...]: LINE under bash -c in the sandbox
# (as sh_in runs it) after the mark, judged with last_refused.
expect_refused_sh() {
    local why=$1 bad=$2 line=$3
    shift 3
    run sbx "$@" -- bash -c "echo $RAN_MARK"$'\n'"$line"
    last_refused "$why" "$bad" "$(_desc "$line" "$@")"
}

# run_each [exguardian run options] -- LINE...: every LINE in one sandbox (one start instead of
# one a line: a gVisor start takes seconds on a loaded host), each under a bash -c of its own (cwd
# = $WS), its stdout, stderr and exit status between markers. `each_line I` then sets OUT, ERR and
# STATUS to LINE I's (0-based), for the checks written for a `run` of that line alone; STATUS is
# empty when the sandbox did not get to that line's end (124 or 125 when it was killed by its
# timeout or never set up), and ERR is then exguardian's own. `each_all` sets them to the
# sandbox's whole run. The lines share the sandbox's /tmp, processes, mounts, proxy and audit log.
run_each() {
    local opts=() sep="@@exg-line-$RANDOM$RANDOM" i
    while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    # shellcheck disable=SC2016  # (expanded inside the sandbox)
    run sbx ${opts[@]+"${opts[@]}"} -- bash -c 'sep=$1 i=0; shift; e=$(mktemp)
        for line in "$@"; do
            printf "\n%s begin %d\n" "$sep" "$i"
            bash -c "$line" 2>"$e"
            st=$?
            printf "\n%s stderr %d\n" "$sep" "$i"
            cat "$e"
            printf "\n%s end %d %d\n" "$sep" "$i" "$st"
            i=$((i + 1))
        done
        rm -f "$e"' bash "$sep" "$@"
    _EACH_OUT=() _EACH_ERR=() _EACH_STATUS=() _EACH_ALL=("$STATUS" "$OUT" "$ERR")
    for ((i = 0; i < $#; i++)); do
        _EACH_OUT[i]=$(awk -v b="$sep begin $i" -v s="$sep stderr $i" -v e="$sep end $i " \
            '$0 == s || index($0, e) == 1 { exit } on { print } $0 == b { on = 1 }' <<<"$OUT")
        _EACH_ERR[i]=$(awk -v s="$sep stderr $i" -v e="$sep end $i " 'index($0, e) == 1 { exit } on { print } $0 == s { on = 1 }' <<<"$OUT")
        _EACH_STATUS[i]=$(sed -n "s/^$sep end $i //p" <<<"$OUT")
    done
}
each_line() {  # I
    OUT=${_EACH_OUT[$1]-} ERR=${_EACH_ERR[$1]-} STATUS=${_EACH_STATUS[$1]-}
    if [ -z "$STATUS" ]; then
        ERR=${_EACH_ALL[2]}
        case "${_EACH_ALL[0]}" in 124|125) STATUS=${_EACH_ALL[0]} ;; esac
    fi
}
each_all() { STATUS=${_EACH_ALL[0]} OUT=${_EACH_ALL[1]} ERR=${_EACH_ALL[2]}; }

# expect_refused_each STR [exguardian run options] -- WHY LINE [WHY LINE]...: every LINE in one
# sandbox (run_each), each after the mark, each judged with last_refused as expect_refused_sh
# judges its one LINE; STR must not be in exguardian's own output either. For refusals: a line
# that gets through fails, whatever it did to the next.
expect_refused_each() {
    local bad=$1 opts=() whys=() lines=() i
    shift
    while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    while [ $# -ge 2 ]; do whys+=("$1"); lines+=("$2"); shift 2; done
    if [ $# -ne 0 ] || [ ${#lines[@]} -eq 0 ]; then
        fail "expect_refused_each: WHY LINE pairs expected after '--' (${opts[*]} -- $*)"; return
    fi
    local marked=()
    for i in "${!lines[@]}"; do marked+=("echo $RAN_MARK"$'\n'"${lines[$i]}"); done
    run_each ${opts[@]+"${opts[@]}"} -- "${marked[@]}"
    for i in "${!lines[@]}"; do
        each_line "$i"
        last_refused "${whys[$i]}" "$bad" "$(_desc "${lines[$i]}" ${opts[@]+"${opts[@]}"}) (one sandbox, line $((i + 1)) of ${#lines[@]})"
    done
    if [ -n "$bad" ] && grep -qF -- "$bad" <<<"${_EACH_ALL[2]}"; then
        fail "exguardian's output contains '$bad' (one sandbox for ${#lines[@]} lines)"
    fi
}

# check_refusal_helpers: the refusal helpers can fail. Each case must fail for its own reason
# (its counters stay in a subshell): the sandbox was not set up (125), the refusal is another
# one, the command was not found, nothing was refused, no mark, a leak, no status. And a real
# refusal must pass.
check_refusal_helpers() {
    local r
    _must_fail() {  # DESC REASON-REGEX HELPER ARGS...
        local desc=$1 reason=$2; shift 2
        r=$("$@" 2>&1)
        if grep -qE -- "^FAIL - $reason" <<<"$r" && ! grep -q '^ok   - ' <<<"$r"; then ok "refusal helper fails: $desc"
        else fail "refusal helper does not fail with /$reason/: $desc"; printf '%s\n' "$r" | sed 's/^/#      /'; fi
    }
    _judged() { STATUS=$1 OUT=$2 ERR=""; last_refused "$3" "$4" "judged by hand"; }  # STATUS OUT WHY STR
    _must_fail "the sandbox not set up (125)" 'did not run \(exit 125\)' \
        expect_refused 'unknown option' '' --exg-no-such-flag -- touch /usr/x
    _must_fail "another refusal than the one expected" 'refused, but not with' \
        expect_refused 'Read-only file system' '' -- cat /exg-no-such-file
    _must_fail "a command not found (127)" 'not found \(exit 127\)' expect_refused 'not found' '' -- exg-no-such-command
    _must_fail "nothing refused (exit 0)" 'not refused \(exit 0\)' expect_refused_sh '.' '' 'true'
    _must_fail "a shell that never ran (no mark)" 'the sandbox did not run it' \
        _judged 1 "touch: /usr/x: Read-only file system" 'Read-only' ''
    _must_fail "a leak beside the refusal" "output contains 'EXGLEAK'" \
        _judged 1 "$RAN_MARK"$'\n'"cat: Permission denied EXGLEAK" 'Permission denied' EXGLEAK
    _must_fail "no exit status" 'no exit status' _judged '' "$RAN_MARK"$'\n'"Permission denied" 'Permission denied' ''
    r=$(expect_refused "$RO_REFUSAL" '' -- touch /usr/exg-refusal-check 2>&1)
    if grep -q '^ok   - ' <<<"$r" && ! grep -q '^FAIL - ' <<<"$r"; then ok "refusal helper passes a real refusal (touch /usr)"
    else fail "refusal helper on touch /usr"; printf '%s\n' "$r" | sed 's/^/#      /'; fi
    # Several lines in one sandbox: each judged on its own slice. The second line's refusal is
    # not the one named, though the first line's output (in the same sandbox) has it.
    _must_fail "one sandbox for several lines, not set up (125)" 'did not run \(exit 125\)' \
        expect_refused_each '' --exg-no-such-flag -- 'Read-only file system' 'touch /usr/x'
    r=$(expect_refused_each '' -- "$RO_REFUSAL" 'touch /usr/exg-refusal-check' \
        "$RO_REFUSAL" 'cat /exg-no-such-file' '.' 'true' 2>&1)
    if [ "$(grep -c '^ok   - ' <<<"$r")" = 1 ] && grep -q '^ok   - .*line 1 of 3' <<<"$r" &&
       grep -q '^FAIL - refused, but not with .*line 2 of 3' <<<"$r" && grep -q '^FAIL - not refused (exit 0).*line 3 of 3' <<<"$r"
    then ok "refusal helper, several lines in one sandbox: each judged on its own output and status"
    else fail "refusal helper, several lines in one sandbox"; printf '%s\n' "$r" | sed 's/^/#      /'; fi
}

# audit_has FILE [--answers-in PREFIX] SPEC...: each SPEC (a JSON object) matches at least one
# line of the audit log FILE (every key of it equal); with --answers-in, every dns line's answers
# start with PREFIX (transparent egress: 198.18.). Says what it missed.
audit_has() {
    python3 - "$@" <<'PY'
import json, sys
path, args = sys.argv[1], sys.argv[2:]
lines = [json.loads(l) for l in open(path) if l.strip()]
prefix = None
if args[:1] == ["--answers-in"]:
    prefix, args = args[1], args[2:]
ok = True
for spec in map(json.loads, args):
    if not any(all(l.get(k) == v for k, v in spec.items()) for l in lines):
        print("#  no audit line has", json.dumps(spec))
        ok = False
if prefix is not None:
    bad = [a for l in lines if l.get("event") == "dns" for a in l.get("answers", []) if not a.startswith(prefix)]
    if bad:
        print("#  resolver answers outside", prefix, bad)
        ok = False
sys.exit(0 if ok else 1)
PY
}

# no_dns_for FILE NAME...: no resolver (dns) line of the audit log FILE is for any NAME.
no_dns_for() {
    python3 - "$@" <<'PY'
import json, sys
path, names = sys.argv[1], set(sys.argv[2:])
hit = [l["host"] for l in map(json.loads, filter(str.strip, open(path))) if l.get("event") == "dns" and l.get("host") in names]
if hit:
    print("#  the resolver was asked for", sorted(set(hit)))
sys.exit(1 if hit else 0)
PY
}

# Seconds on the monotonic clock (/proc/uptime), for the few bounds a check puts on how long
# something took: bash's SECONDS follows the wall clock, which this VM's host steps at times.
mono_seconds() { local u; read -r u _ </proc/uptime; echo "${u%%.*}"; }

# A fresh random hex string (16 digits): a secret's real value or a token no one else can guess.
rnd() { od -An -N8 -tx1 /dev/urandom | tr -d ' \n'; }
# issued REFRESH-TOKEN PREFIX KIND: the token the world's OAuth token endpoint
# (egress_world_secrets.sh) issues for REFRESH-TOKEN: PREFIX and the first 32 hex digits of
# sha256(REFRESH-TOKEN KIND), KIND "a" for the access token, "r" for the refresh token.
issued() { python3 -c "import hashlib,sys; print(sys.argv[2] + hashlib.sha256((sys.argv[1] + sys.argv[3]).encode()).hexdigest()[:32])" "$@"; }

# Checks on the output of the last `run`.
last_output_lacks() {  # STR DESC
    if grep -qF -- "$1" <<<"$OUT$ERR"; then fail "$2: output contains '$1'"; show_last
    else ok "$2"; fi
}

# sbx [exguardian run options] -- CMD...: cwd = $WS, bounded by a host-side timeout.
sbx() {
    (cd "${WS:-$T}" && exec timeout -k 5 "$EXG_CALL_TIMEOUT" "${EXG_RUN[@]}" "$@")
}

# sh_in LINE [exguardian run options...]: LINE runs under bash -c inside the sandbox.
sh_in() {
    local line=$1; shift
    sbx "$@" -- bash -c "$line"
}

# hold_sandbox [exguardian run options]: a sandbox in the background (cwd = $WS) whose command
# prints "up", then waits for its stdin to close; returns once it is up (non-zero, with what it
# said, when it is not within 30 s). HELD_PID is exguardian's pid (its cgroup is exg-<pid>-*).
# For checks made from the host while a sandbox runs, without guessing with a sleep how long its
# start takes (seconds on gVisor on a loaded host). release_sandbox closes its stdin and waits
# for it: its exit status. (Killed at the script's end if never released.)
hold_sandbox() {
    local fifo
    fifo=$(mktemp -u "$T/.hold.XXXXXX") && mkfifo "$fifo" || return 1
    (cd "${WS:-$T}" && exec "${EXG_RUN[@]}" "$@" -- sh -c 'echo up; read -r _ || true') \
        <"$fifo" >"$fifo.out" 2>&1 &
    HELD_PID=$!
    track_bg "$HELD_PID"
    exec {_HELD_FD}>"$fifo"  # (opens once the sandbox's side has: both sides at once)
    rm -f "$fifo"
    if ! wait_for 30 grep -qx up "$fifo.out"; then
        note "the held sandbox did not come up: $(head -3 "$fifo.out" | tr '\n' ' ')"
        return 1
    fi
}
release_sandbox() {
    exec {_HELD_FD}>&-
    wait "$HELD_PID"
}

# require_sandbox: the sandbox must be in place (hostname exguardian, uid not 0) before any
# destructive or escape attempt. Returns non-zero (and records a failure) when it is not.
require_sandbox() {
    run sbx -- bash -c 'hostname; id -u'
    local host uid
    host=$(sed -n 1p <<<"$OUT") uid=$(sed -n 2p <<<"$OUT")
    if [ "$STATUS" -eq 0 ] && [ "$host" = exguardian ] && [ -n "$uid" ] && [ "$uid" != 0 ]; then
        SANDBOX_OK=1
        ok "sandbox in place (hostname=$host uid=$uid)"
        return 0
    fi
    SANDBOX_OK=0
    fail "sandbox not in place (hostname='$host' uid='$uid'); skipping destructive checks"
    show_last
    return 1
}

# new_workspace [NAME]: sets WS to a fresh git repo (one commit) under $T.
new_workspace() {
    local name=${1:-ws}
    WS=$T/$name
    rm -rf "$WS"
    mkdir -p "$WS"
    chmod 755 "$WS"
    (
        cd "$WS" || exit 1
        git -c init.defaultBranch=main init -q .
        echo "# test workspace" > README.md
        git add README.md
        git -c user.name=exg-test -c user.email=exg-test@example.invalid commit -q -m initial
    ) || { fail "new_workspace: git setup failed"; return 1; }
}

# plant_canaries: credential files in $HOME that contain a unique canary, plus canary env vars.
# Files are world-readable (dirs 755, files 644) so only the sandbox's masking keeps them
# unreadable, not file permissions. Also a readable control file ~/notes.txt (EXGHOMEOK).
plant_canaries() {
    CANARY="EXGCANARY-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
    export CANARY
    local h=$HOME
    mkdir -p "$h/.ssh" "$h/.aws" "$h/.config/gcloud" "$h/.kube" "$h/.docker" "$h/.gnupg"
    printf -- '-----BEGIN OPENSSH PRIVATE KEY-----\n%s\n-----END OPENSSH PRIVATE KEY-----\n' "$CANARY" > "$h/.ssh/id_ed25519"
    printf '[default]\naws_access_key_id = AKIA%s\naws_secret_access_key = %s\n' "$CANARY" "$CANARY" > "$h/.aws/credentials"
    printf 'machine example.com login exg password %s\n' "$CANARY" > "$h/.netrc"
    printf 'https://exg:%s@github.com\n' "$CANARY" > "$h/.git-credentials"
    printf '{"refresh_token": "%s"}\n' "$CANARY" > "$h/.config/gcloud/application_default_credentials.json"
    printf 'users:\n- name: x\n  user:\n    token: %s\n' "$CANARY" > "$h/.kube/config"
    printf '{"auths": {"x": {"auth": "%s"}}}\n' "$CANARY" > "$h/.docker/config.json"
    printf '//registry.npmjs.org/:_authToken=%s\n' "$CANARY" > "$h/.npmrc"
    printf '[pypi]\npassword = %s\n' "$CANARY" > "$h/.pypirc"
    printf '%s\n' "$CANARY" > "$h/.gnupg/private-key"
    echo "EXGHOMEOK" > "$h/notes.txt"
    find "$h" -type d -exec chmod 755 {} +
    find "$h" -type f -exec chmod 644 {} +
    (cd "$h" && find . -type f ! -name notes.txt -print0 | sort -z | xargs -0 sha256sum) > "$T/.canaries.sha256"
    export GITHUB_TOKEN=$CANARY AWS_SECRET_ACCESS_KEY=$CANARY OPENAI_API_KEY=$CANARY
    export ANTHROPIC_API_KEY=$CANARY MY_SERVICE_SECRET=$CANARY EXG_PLAIN_VAR=$CANARY
}

# canaries_unchanged: every canary file still on the host with its original content.
canaries_unchanged() {
    (cd "$HOME" && sha256sum --quiet -c "$T/.canaries.sha256") >/dev/null 2>&1
}

# need_source_tree FILE TOOL...: sets SRC, the source tree (from the build's CMakeCache.txt), for
# the client scripts a test copies from it; FILE (relative to it) must be readable and every
# TOOL installed, else one failure and the end of the script.
need_source_tree() {
    local file=$1 tool; shift
    SRC=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$EXG_BUILD_DIR/CMakeCache.txt" 2>/dev/null)
    if [ -z "$SRC" ] || [ ! -r "$SRC/$file" ]; then
        fail "the source tree ($file) is not readable from $EXG_BUILD_DIR"
        finish
    fi
    for tool in "$@"; do
        command -v "$tool" >/dev/null || { fail "$tool is not installed (make deps)"; finish; }
    done
}

# npm_pinned DIR SPEC...: DIR/node_modules holds the npm packages SPEC (name@version, pinned) for
# the client scripts copied into DIR. Installed from npm once per set of SPECs into
# $EXG_TEST_NPM_CACHE (run.sh gives each runner one under /var/cache/exguardian-tests/npm), which
# outlives the run and the clone (CI has npm but each fresh install of the SDKs cost 10-15 s, several times a suite), then
# linked; an install is built aside and renamed into place, so a cut-short one is never used.
# Its log is DIR/npm.log; non-zero when the install failed.
npm_pinned() {
    local dir=$1; shift
    local root=${EXG_TEST_NPM_CACHE:-$T/npm-cache}
    local key; key=$(printf '%s\n' "$@" | sort | tr '\n' ' ' | sed 's/ $//; s|[/ ]|+|g')
    local cached=$root/$key
    mkdir -p "$dir" "$root" || return 1
    if [ ! -d "$cached/node_modules" ]; then
        local tmp; tmp=$(mktemp -d "$root/.install.XXXXXX") || return 1
        if ! (cd "$tmp" && npm install --no-save --no-audit --no-fund --loglevel=error "$@") > "$dir/npm.log" 2>&1; then
            rm -rf "$tmp"
            return 1
        fi
        chmod 755 "$tmp"
        mv -T "$tmp" "$cached" 2>/dev/null || rm -rf "$tmp"  # another run got there first: theirs
    fi
    ln -sfn "$cached/node_modules" "$dir/node_modules"
}

# track_bg PID: killed (by pid) when the script exits.
track_bg() { _BG_PIDS+=("$1"); }
# cleanup_path PATH: removed when the script exits (things a broken sandbox may leave).
cleanup_path() { _CLEANUP_PATHS+=("$1"); }

_lib_exit() {
    local p
    for p in "${_BG_PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    for p in "${_CLEANUP_PATHS[@]}"; do rm -rf -- "$p" 2>/dev/null; done
}
trap _lib_exit EXIT

# wait_for DESC SECONDS CMD...: polls CMD every 0.1 s until it succeeds; non-zero on timeout.
wait_for() {
    local secs=$1; shift
    local end=$((SECONDS + secs))
    while ! "$@"; do
        [ "$SECONDS" -ge "$end" ] && return 1
        sleep 0.1
    done
}

# host_procs_matching MARKER: pids of host processes whose command line contains MARKER.
host_procs_matching() { pgrep -f -- "$1" || true; }

# host_tmp_listing: the entries of the host's /tmp, /var/tmp and /dev/shm, for before/after
# checks. Left out: what other test runs on this host make meanwhile, never a sandbox or
# exguardian itself (integration runs' exg-it.*, the unit tests' exg_<name>_XXXXXX).
host_tmp_listing() {
    { ls -A /tmp; ls -A /var/tmp; ls -A /dev/shm 2>/dev/null; } | grep -v -e '^exg-it\.' -e '^exg_[a-z_]*_[A-Za-z0-9]\{6\}$' | sort
}
# host_tmp_left BEFORE: the entries new since BEFORE (a host_tmp_listing) that a sandbox may have
# left, space-separated. Other programs on the host may create entries meanwhile: as the test
# user, every new entry owned by it counts; as root, new entries whose name looks like ours
# count, others are shown.
host_tmp_left() {
    local e dir ours=""
    for e in $(comm -13 <(echo "$1") <(host_tmp_listing)); do
        for dir in /tmp /var/tmp /dev/shm; do
            [ -e "$dir/$e" ] || continue
            if [ "$EXG_AS" = user ] && [ "$(stat -c %U "$dir/$e")" = "$(id -un)" ]; then ours+="$dir/$e "
            elif grep -qiE 'exg|guard|sandbox|sbx' <<<"$e"; then ours+="$dir/$e "
            else note "new entry (not counted): $dir/$e" >&2; fi
        done
    done
    printf '%s' "$ours"
}

# A host that refuses user namespaces, made for real (DESIGN.md section 9): a child user namespace
# with user.max_user_namespaces set to 0 inside it, as a container engine or an administrator does.
# userns_refused_as_root CMD...: CMD (run's STATUS/OUT/ERR) as root of a new user namespace mapping
# this runner to 0 (setgroups denied), the limit 0 set in it.
userns_refused_as_root() {
    run timeout 60 unshare --user --map-root-user -- bash -c \
        'echo 0 >/proc/sys/user/max_user_namespaces || { echo "world: cannot set the limit" >&2; exit 99; }; exec "$@"' _ "$@"
}
# userns_refused_as_user CMD...: CMD as uid 1000 of a user namespace made inside the one above (by
# its root, before the limit 0 was set there), after the limit is set: the namespace above refuses.
userns_refused_as_user() {
    local go=$T/.userns-go
    rm -f "$go"; mkfifo "$go"
    run timeout 60 unshare --user --map-root-user -- bash -c '
        go=$1; shift
        unshare --user --map-user=1000 --map-group=1000 -- bash -c "read -r _ <\"\$0\"; exec \"\$@\"" "$go" "$@" &
        child=$!
        # (the namespace below is made before the limit is set above it)
        mine=$(readlink /proc/self/ns/user)
        while [ "$(readlink /proc/$child/ns/user 2>/dev/null)" = "$mine" ] && kill -0 $child 2>/dev/null; do sleep 0.01; done
        echo 0 >/proc/sys/user/max_user_namespaces || { echo "world: cannot set the limit" >&2; kill $child; exit 99; }
        echo go >"$go"
        wait $child' _ "$go" "$@"
    rm -f "$go"
}

finish() {
    echo "# as=$EXG_AS layer=$EXG_LAYER: $PASS passed, $FAILED failed, $SKIPPED skipped"
    echo "$PASS passed, $FAILED failed"
    if [ "$FAILED" -ne 0 ] || [ "$PASS" -eq 0 ]; then exit 1; fi
    exit 0
}
