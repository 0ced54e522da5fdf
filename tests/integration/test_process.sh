#!/usr/bin/env bash
# Process-level isolation and the command's lifecycle: namespaces, uid, fds, environment,
# network, exit statuses, stdio, signals, timeout, dry-run.
source "$(dirname "$0")/lib.sh"

new_workspace
plant_canaries

require_sandbox || finish

# ---- pid namespace: host processes invisible and unkillable -----------------------------------
marker=exg-hostproc-$$-$RANDOM
bash -c "exec -a $marker sleep 1000" </dev/null >/dev/null 2>&1 &
hostpid=$!
disown "$hostpid"
track_bg "$hostpid"
sleep 0.2
# (listed without stat: gVisor's statx answers EINVAL on this host, so `ls /proc` fails there;
# a microVM's guest kernel shows its own kernel threads, which have no command line: not counted)
if [ "$EXG_LAYER" = microvm ]; then
    run sbx -- python3 -c 'import os; print(sum(1 for p in os.listdir("/proc") if p.isdigit() and open("/proc/" + p + "/cmdline", "rb").read()))'
else
    run sbx -- python3 -c 'import os; print(sum(p.isdigit() for p in os.listdir("/proc")))'
fi
check "only a few pids visible inside (got '$OUT')" test "$STATUS" = 0 -a -n "$OUT" -a "${OUT:-99}" -le 8
expect_no_output_contains "$marker" sbx -- ps -eo pid,args
expect_status 1 sh_in "test -e /proc/$hostpid"
expect_refused "kill: \\($hostpid\\): No such process" '' -- kill -9 "$hostpid"
check "host process survived the kill attempt" kill -0 "$hostpid"
kill -9 "$hostpid" 2>/dev/null

# ---- identity ---------------------------------------------------------------------------------
expect_output_contains exguardian sbx -- hostname
run sbx -- id -u
check "uid inside is not 0 (got '$OUT')" test "$STATUS" = 0 -a -n "$OUT" -a "$OUT" != 0

# ---- a boot id of its own (util/boot_id.hpp): one per start of a sandbox, never the host's -----
# (gVisor's kernel has no boot_id file; the landlock layer has no /proc of its own: the host's.)
if on_layer gvisor landlock; then
    skip "own boot id: none on $EXG_LAYER (docs/serve.md, \"A boot id per boot\")"
else
    host_boot=$(cat /proc/sys/kernel/random/boot_id)
    run sbx -- sh -c 'cat /proc/sys/kernel/random/boot_id; cat /proc/sys/kernel/random/boot_id; echo x > /proc/sys/kernel/random/boot_id && echo WRITTEN; cat /proc/sys/kernel/random/boot_id'
    b1=$(sed -n 1p <<<"$OUT") b1b=$(sed -n 2p <<<"$OUT") b1c=$(sed -n '$p' <<<"$OUT")
    run sbx -- cat /proc/sys/kernel/random/boot_id
    b2=$OUT
    if [[ $b1 =~ ^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$ ]] && [ "$b1" = "$b1b" ] && [ "$b1" = "$b1c" ] &&
       [ "$b1" != "$host_boot" ] && [ -n "$b2" ] && [ "$b2" != "$b1" ] && [ "$b2" != "$host_boot" ]; then
        ok "a boot id of its own: not the host's, the same within a run, another at the next start; a write refused"
    else
        fail "boot ids: host $host_boot, run 1 '$b1' '$b1b' after a write '$b1c', run 2 '$b2'"
    fi
fi

# ---- only fds 0-2 are passed (the host side deliberately holds extra fds open) -----------------
exec 7</etc/hostname 9>"$T/fd9"
run sbx -- python3 -c 'import os; print(sorted(int(x) for x in os.listdir("/proc/self/fd")))'
check "only fds 0-2 open (3 is listdir's own), got '$OUT'" test "$OUT" = "[0, 1, 2, 3]"
exec 7<&- 9>&-

# ---- environment -------------------------------------------------------------------------------
export EXG_NOT_ALLOWED=plain-value-$$
TERM=xterm-256color run sbx -- env
env_out=$OUT
if grep -qF -- "$CANARY" <<<"$env_out$ERR"; then fail "canary in the sandbox's environment"; show_last
else ok "no canary in the sandbox's environment"; fi
for v in PATH HOME; do
    check "env has $v" grep -q "^$v=" <<<"$env_out"
done
check "env has TERM from the host" grep -qx "TERM=xterm-256color" <<<"$env_out"
check "env has TMPDIR=/tmp" grep -qx "TMPDIR=/tmp" <<<"$env_out"
check "env lacks a non-allowlisted variable" bash -c "! grep -q '^EXG_NOT_ALLOWED=' <<<\"\$1\"" _ "$env_out"
check "env lacks *TOKEN*/*SECRET*/*KEY* variables" bash -c "! grep -iE '^[^=]*(token|secret|key)[^=]*=' <<<\"\$1\"" _ "$env_out"
expect_output_contains FOO=bar sbx --env FOO=bar -- env
expect_output_contains "EXG_NOT_ALLOWED=plain-value-$$" sbx --env EXG_NOT_ALLOWED -- env
expect_output_contains "GITHUB_TOKEN=$CANARY" sbx --env GITHUB_TOKEN -- env

# ---- network: only loopback, host loopback services unreachable --------------------------------
run sbx -- python3 -c 'import socket; print(" ".join(n for _, n in socket.if_nameindex()))'
check "only lo inside (got '$OUT')" test "$OUT" = lo
if command -v ip >/dev/null; then
    run sbx -- ip -o link show
    check "ip link shows only lo" test "$STATUS" = 0 -a "$(grep -c . <<<"$OUT")" = 1 -a -n "$(grep ': lo:' <<<"$OUT")"
fi

port=$((20000 + RANDOM % 40000))
python3 -m http.server --bind 127.0.0.1 "$port" >/dev/null 2>&1 &
srvpid=$!
track_bg "$srvpid"
connect_py='import socket,sys
s=socket.socket(); s.settimeout(3)
try:
    s.connect(("127.0.0.1", int(sys.argv[1]))); print("connected")
except OSError as e:
    print("refused:", e); sys.exit(1)'
if wait_for 10 python3 -c "$connect_py" "$port" >/dev/null 2>&1; then
    ok "host listener on 127.0.0.1:$port reachable from the host (control)"
    expect_refused '^refused: .*Connection refused' '' -- python3 -c "$connect_py" "$port"   # (the sandbox's own loopback)
else
    fail "could not start a host listener on 127.0.0.1:$port"
fi
kill "$srvpid" 2>/dev/null

abstract=exg-abstract-$$-$RANDOM
python3 -c 'import socket,sys,time
s=socket.socket(socket.AF_UNIX); s.bind("\0"+sys.argv[1]); s.listen(1); time.sleep(60)' "$abstract" &
abspid=$!
track_bg "$abspid"
sleep 0.3
abs_py='import socket,sys
s=socket.socket(socket.AF_UNIX)
try:
    s.connect("\0"+sys.argv[1]); print("connected")
except OSError as e:
    print("refused:", e); sys.exit(1)'
if python3 -c "$abs_py" "$abstract" >/dev/null 2>&1; then
    expect_refused '^refused: .*Connection refused' '' -- python3 -c "$abs_py" "$abstract"   # (another network namespace's)
else
    fail "could not reach the host's abstract socket from the host (control)"
fi
kill "$abspid" 2>/dev/null

# ---- exit statuses -----------------------------------------------------------------------------
expect_status 0 sbx -- true
expect_status 3 sh_in 'exit 3'
expect_status 143 sh_in 'kill -TERM $$'
expect_status 137 sh_in 'kill -KILL $$'
expect_status 127 sbx -- exg-no-such-command-xyz
expect_status 127 sbx -- /nonexistent/dir/cmd
printf '#!/bin/sh\necho should-not-run\n' > "$WS/noexec.sh"
chmod 644 "$WS/noexec.sh"
expect_status 126 sbx -- ./noexec.sh
rm -f "$WS/noexec.sh"

# Setup failures: 125, one line on stderr, nothing runs.
marker_file=$WS/ran-marker
check_125() {  # DESC PATTERN exguardian-run-args...
    local desc=$1 pattern=$2; shift 2
    rm -f "$marker_file"
    run sbx "$@" -- touch "$marker_file"
    local lines
    lines=$(grep -c . <<<"$ERR")
    if [ "$STATUS" -eq 125 ] && [ "$lines" -eq 1 ] && grep -qE -- "$pattern" <<<"$ERR" && [ ! -e "$marker_file" ]; then
        ok "125 with one stderr line: $desc ($ERR)"
    else
        fail "125 with one stderr line matching /$pattern/ and nothing run: $desc"; show_last
        [ -e "$marker_file" ] && note "the command ran"
    fi
}
# Each file is a complete srt settings file except for its one defect (line numbers matter).
cat > "$T/bad-key.json" <<'EOF'
{
  "network": { "allowedDomains": [], "deniedDomains": [] },
  "filesystem": {
    "bogusKey": 1,
    "denyRead": [], "allowWrite": [], "denyWrite": []
  }
}
EOF
check_125 "unknown policy key" "^exguardian: .*bad-key\.json:4:[0-9]+" --policy "$T/bad-key.json"
cat > "$T/bad-syntax.json" <<'EOF'
{
  "network": { "allowedDomains": [], "deniedDomains": [] },
  "filesystem": {
    "denyRead": [,], "allowWrite": [], "denyWrite": []
  }
}
EOF
check_125 "policy syntax error" "^exguardian: .*bad-syntax\.json:4:[0-9]+" --policy "$T/bad-syntax.json"
cat > "$T/bad-type.json" <<'EOF'
{
  "network": { "allowedDomains": [], "deniedDomains": [] },
  "filesystem": {
    "denyRead": 5, "allowWrite": [], "denyWrite": []
  }
}
EOF
check_125 "policy wrong type" "^exguardian: .*bad-type\.json:4:[0-9]+" --policy "$T/bad-type.json"
check_125 "missing policy file" "^exguardian: .*no-such-policy\.json" --policy "$T/no-such-policy.json"
check_125 "unknown flag" "^exguardian: " --no-such-flag-xyz

# ---- stdio --------------------------------------------------------------------------------------
run bash -c 'cd "$1" && shift && echo hi | "$@" -- cat' _ "$WS" "${EXG_RUN[@]}"
check "pipe: echo hi | exguardian run -- cat prints hi (got '$OUT')" test "$STATUS" = 0 -a "$OUT" = hi
run bash -c 'cd "$1" && shift && printf "a\nb\nc\n" | "$@" -- wc -l' _ "$WS" "${EXG_RUN[@]}"
check "stdin passes through (got '$OUT')" test "$OUT" = 3
head -c 3000000 /dev/urandom > "$T/big.bin"
want=$(sha256sum < "$T/big.bin")
run bash -c 'cd "$1" && shift && "$@" -- sha256sum' _ "$WS" "${EXG_RUN[@]}" < "$T/big.bin"
check "3 MB through stdin intact" test "$OUT" = "$want"
run sh_in 'echo to-stdout; echo to-stderr >&2'
check "stdout and stderr kept apart" test "$OUT" = to-stdout -a "$ERR" = to-stderr
run sh_in 'test -t 0 || echo no-tty'
check "no tty when not under a terminal" test "$OUT" = no-tty

# ---- signals reach the command ------------------------------------------------------------------
: > "$T/sig.out"
(cd "$WS" && exec "${EXG_RUN[@]}" -- bash -c 'trap "echo got-term; exit 7" TERM; echo ready; sleep 100 & wait') > "$T/sig.out" 2>&1 &
exgpid=$!
track_bg "$exgpid"
if wait_for 10 grep -q ready "$T/sig.out"; then
    kill -TERM "$exgpid"
    wait "$exgpid"
    st=$?
    check "SIGTERM forwarded: exit 7 (got $st)" test "$st" = 7
    check "SIGTERM forwarded: trap ran" grep -q got-term "$T/sig.out"
else
    fail "signal test: the command never started"; sed 's/^/#      /' "$T/sig.out"
fi

# ---- signals the caller ignores are not ignored inside ------------------------------------------
# An ignored disposition survives exec: started by a caller that ignores them, the command still
# gets every signal at its default (pid 1 resets them, or the layer's kernel starts it fresh).
run bash -c 'trap "" USR1 HUP INT TERM QUIT PIPE; cd "$1" && shift && exec "$@" -- sh -c "kill -USR1 \$\$; echo survived"' \
    _ "${WS:-$T}" timeout -k 5 "$EXG_CALL_TIMEOUT" "${EXG_RUN[@]}"
check "a signal the caller ignores still kills the command (status $STATUS, 138 = SIGUSR1; '$OUT')" \
    test "$STATUS" = 138 -a "$OUT" != survived

# ---- timeout --------------------------------------------------------------------------------------
start=$(mono_seconds)
expect_status 124 sbx --timeout 2s -- sleep 100
check "timeout took $(($(mono_seconds) - start)) s (<= 10)" test $(($(mono_seconds) - start)) -le 10

# ---- dry-run ----------------------------------------------------------------------------------
rm -f "$WS/dry-marker"
run sbx --dry-run -- touch "$WS/dry-marker"
check "--dry-run exits 0 (got $STATUS)" test "$STATUS" = 0
check "--dry-run plan mentions the workspace" grep -qF -- "$WS" <<<"$OUT"
check "--dry-run runs nothing" test ! -e "$WS/dry-marker"

# ---- -v: where the start-up time goes, one timing line at the end (issue 13 part 3) ----------------
run sbx -v -- true
timing=$(grep -E '^exguardian: timing: ' <<<"$ERR$OUT" | tail -1)
check "-v: exit 0 and one timing line (got $STATUS)" test "$STATUS" = 0 -a -n "$timing"
# The plan, the launch's steps (the clone into the sandbox), the command and the end, each with its ms.
for step in plan clone handover sweep total; do
    check "-v timing names the step '$step' with its duration" grep -qE "[:,] $step [0-9]+\.[0-9]+ ms" <<<"$timing"
done
check "-v timing: the command's own time (process) or the runtime's and the command's (OCI layers)" \
    grep -qE ", (command|runtime\+command) [0-9]+\.[0-9]+ ms" <<<"$timing"

finish
