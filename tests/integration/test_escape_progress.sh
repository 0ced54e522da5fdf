#!/usr/bin/env bash
# `exguardian escape-test` shows progress on a terminal and none when piped (issue 40, 5): on a
# pty (stdout and stderr both the terminal) a live line redrawn in place with the layer and a
# count of the probes, and an escape on a line of its own as it comes (before the final report);
# with stdout and stderr piped, not one carriage return or live line, only the report.
# A few probes (--only) keep it short; the weakened run (seccomp off) makes the escape to show.
source "$(dirname "$0")/lib.sh"

# Runs escape-test ARGS on a fresh pty; its whole output (as the terminal got it) goes to FILE.
on_pty() {
    local file=$1; shift
    python3 - "$file" "$EXG" escape-test "$@" <<'PY'
import os, pty, sys
out, argv = sys.argv[1], sys.argv[2:]
pid, fd = pty.fork()
if pid == 0:
    os.execv(argv[0], argv)
data = b""
while True:
    try:
        chunk = os.read(fd, 65536)
    except OSError:  # EIO: the child closed the terminal
        break
    if not chunk:
        break
    data += chunk
_, st = os.waitpid(pid, 0)
open(out, "wb").write(data)
sys.exit(os.waitstatus_to_exitcode(st))
PY
}

on_pty "$T/tty.out" --only fd-leak --only kernel-bpf --json "$T/tty.json"
st=$?
check "on a pty: escape-test exits 0 (exit $st)" test "$st" -eq 0
check "on a pty: a live line redrawn in place (carriage return, erase to end of line)" \
    grep -qaF $'\r\033[Kescape-test: process layer: ' "$T/tty.out"
check "on a pty: the live line counts the probes (N/3 probes, held)" \
    grep -qaE $'escape-test: process layer: [0-9]+/3 probes, [0-9]+ held' "$T/tty.out"
check "on a pty: the live line names the probe running" grep -qaE 'probes, [0-9]+ held \([0-9]+ s\): (fd-leak|kernel-bpf)' "$T/tty.out"
check "on a pty: the layer's last line stays (3/3 probes)" grep -qaE 'process layer: 3/3 probes, 3 held \([0-9]+ s\)'$'\r?$' "$T/tty.out"
check "on a pty: the report follows" grep -qa 'RESULT: the sandbox held' "$T/tty.out"

# Piped: the same run, stdout and stderr to files.
"$EXG" escape-test --only fd-leak --only kernel-bpf --json "$T/pipe.json" >"$T/pipe.out" 2>"$T/pipe.err"
st=$?
check "piped: escape-test exits 0 (exit $st)" test "$st" -eq 0
check "piped: no carriage return on stdout or stderr" bash -c "! grep -qa $'\r' '$T/pipe.out' '$T/pipe.err'"
check "piped: no live line" bash -c "! grep -qaE 'process layer: [0-9]+/[0-9]+ probes' '$T/pipe.out' '$T/pipe.err'"
check "piped: the report is there" grep -q 'RESULT: the sandbox held' "$T/pipe.out"
# Only stdout a terminal (stderr piped) is not a terminal session either: no progress.
python3 - "$EXG" "$T/half.err" <<'PY'
import os, pty, sys
exe, err = sys.argv[1], sys.argv[2]
pid, fd = pty.fork()
if pid == 0:
    e = os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(e, 2)
    os.execv(exe, [exe, "escape-test", "--only", "kernel-bpf"])
while True:
    try:
        if not os.read(fd, 65536): break
    except OSError: break
os.waitpid(pid, 0)
PY
check "stdout a terminal, stderr a file: no live line on stderr" bash -c "! grep -qaE $'\r|probes, [0-9]+ held' '$T/half.err'"

# An escape shows up as it comes: its own line, before the final report's table.
if "$EXG" run --help 2>&1 | grep -q -- --unsafe-no-seccomp; then
    on_pty "$T/weak.out" --run-arg=--unsafe-no-seccomp --only kernel-ptrace-attach
    st=$?
    check "weakened, on a pty: a non-zero exit (exit $st)" test "$st" -ne 0
    check "weakened, on a pty: the escape has its own line" \
        grep -qaE $'\r\033\\[Kescape-test: ESCAPED process kernel-ptrace-attach: ' "$T/weak.out"
    check "weakened, on a pty: the live line counts it" grep -qaE 'probes, [0-9]+ held, 1 ESCAPED' "$T/weak.out"
    check "weakened, on a pty: the escape's line comes before the report" python3 -c "
d = open('$T/weak.out', 'rb').read()
a = d.find(b'escape-test: ESCAPED process kernel-ptrace-attach'); b = d.find(b'exguardian escape-test  layer=')
assert 0 <= a < b, (a, b)"
else
    fail "run has no --unsafe-no-seccomp: the weakened run cannot be made"
fi

finish
