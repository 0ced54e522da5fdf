#!/usr/bin/env bash
# Under a terminal the sandbox gets its own pty and session: an interactive shell with job
# control works, and the outer terminal is left as it was.
source "$(dirname "$0")/lib.sh"

new_workspace

if ! command -v expect >/dev/null || ! command -v script >/dev/null; then
    fail "expect and script are needed (make deps installs them)"
    finish
fi

require_sandbox || finish

# ---- isatty under script(1) -------------------------------------------------------------------
run bash -c 'cd "$1" && script -qec "$0 -- bash -c '\''test -t 0 && test -t 1 && test -t 2 && echo isatty'\''" /dev/null' "${EXG_RUN[*]}" "$WS"
check "stdin/stdout/stderr are ttys under a terminal" grep -q isatty <<<"$OUT"

# ---- the outer terminal's size, and the command's exit status -----------------------------------
run bash -c 'cd "$1" && script -qec "stty rows 33 cols 101; $0 -- sh -c '\''stty size; exit 7'\''" /dev/null' "${EXG_RUN[*]}" "$WS"
check "the command sees the outer terminal's size (33 101)" grep -q '33 101' <<<"$(tr -d '\r' <<<"$OUT")"
check "the exit status is the command's under a terminal (status $STATUS)" test "$STATUS" -eq 7

# The command's terminal takes no injected input (TIOCSTI is refused on every layer, so nothing
# typed by the command reaches a shell that reads the terminal after it).
cat > "$WS/sti.py" <<'EOF'
import fcntl, termios
try:
    fcntl.ioctl(0, termios.TIOCSTI, b"x")
    print("INJECTED")
except OSError as e:
    print("REFUSED", e.errno)
EOF
run bash -c 'cd "$1" && script -qec "$0 -- python3 $1/sti.py" /dev/null' "${EXG_RUN[*]}" "$WS"
check "TIOCSTI on the command's terminal is refused ($(tr -d '\r\0' <<<"$OUT" | tail -n 1))" \
    bash -c 'grep -q REFUSED <<<"$0" && ! grep -q INJECTED <<<"$0"' "$OUT"

# A resize while the command runs reaches it (SIGWINCH and the new size); the loop sleeps in short
# steps (gVisor does not wake a long sleep for a handled SIGWINCH: the signal waits for the next call).
cat > "$WS/winch.sh" <<'EOF'
trap 'echo "WINCH-$(stty size | tr " " x)"' WINCH
echo armed
i=0; while [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
EOF

# ---- interactive bash with job control, driven by expect --------------------------------------
cat > "$T/tty.exp" <<'EOF'
set timeout 20
log_user 1
proc die {msg} { puts "\nEXPECT-FAIL: $msg"; flush stdout; exit 1 }
# NB: `expect PATTERN ACTION timeout ACTION` on one line (a one-line braced list would be
# taken as a single pattern).

# The outer shell: its terminal settings are compared before and after.
spawn -noecho env PS1=OUTER\$\  TERM=xterm bash --norc --noprofile -i
expect "OUTER\$ " {} timeout { die "outer prompt" }
send "cd $env(WS) && stty -g > $env(T)/stty.before && echo before-saved\r"
expect "before-saved\r" {} timeout { die "stty before" }
expect "OUTER\$ " {} timeout { die "outer prompt 2" }

# The sandboxed shell. PS1 is split with '' so the echoed command line never matches it.
send "$env(EXG_RUN) -- env PS1='IN''NER\$ ' bash --norc --noprofile -i\r"
expect "INNER\$ " {} timeout { die "inner prompt" }

send "tty\r"
# (no ttyname is its own failure below; the job-control checks still run)
expect -re {(/dev/[^\r\n]+)\r} { puts "\nINNER-TTY=$expect_out(1,string)" } "not a tty" { puts "\nINNER-TTY=none" } timeout { die "tty" }
expect "INNER\$ " {} timeout { die "prompt after tty" }

send "sleep 100 &\r"
expect -re {\[1\] [0-9]+} { puts "\nJOB-STARTED" } timeout { die "background job" }
expect "INNER\$ " {} timeout { die "prompt after job" }

send "jobs\r"
expect -re {\[1\]\+ +Running +sleep 100} { puts "\nJOBS-LISTED" } timeout { die "jobs" }
expect "INNER\$ " {} timeout { die "prompt after jobs" }

# Ctrl-Z stops a foreground job (the pty delivers SIGTSTP); kill of the stopped job works.
send "sleep 200\r"
sleep 0.5
send "\x1a"
expect -re {Stopped +sleep 200} { puts "\nJOB-STOPPED" } timeout { die "ctrl-z" }
expect "INNER\$ " {} timeout { die "prompt after ctrl-z" }
send "kill %2; wait %2 2>/dev/null; echo after-kill\r"
expect "after-kill\r" {} timeout { die "kill %2" }
expect "INNER\$ " {} timeout { die "prompt after kill" }

# Ctrl-C interrupts a foreground command and the shell survives.
send "sleep 300\r"
sleep 0.5
send "\x03"
expect "INNER\$ " { puts "\nCTRL-C-OK" } timeout { die "ctrl-c" }

# A resize of the outer terminal reaches a running command (expect's stty on the spawned pty).
send "sh $env(WS)/winch.sh\r"
expect "armed\r" {} timeout { die "winch.sh armed" }
stty rows 50 columns 130 < $spawn_out(slave,name)
expect "WINCH-50x130" { puts "\nRESIZE-OK" } timeout { die "resize" }
send "\x03"
expect "INNER\$ " {} timeout { die "prompt after the resize" }

send "exit 7\r"
expect "OUTER\$ " {} timeout { die "back to the outer shell" }
send "echo status=\$?\r"
expect "status=7\r" { puts "\nEXIT-STATUS-OK" } timeout { die "exit status" }
expect "OUTER\$ " {} timeout { die "outer prompt after the status" }
send "stty -g > $env(T)/stty.after && echo after-saved\r"
expect "after-saved\r" {} timeout { die "stty after" }
expect "OUTER\$ " {} timeout { die "outer prompt at the end" }
send "exit\r"
expect eof
puts "\nEXPECT-DONE"
exit 0
EOF

# (EXG_RUN as one string: the binary's path has no spaces, run.sh made it)
# (microvm: the resize goes to the guest's own pty over the agent's channel)
run env WS="$WS" T="$T" EXG_RUN="${EXG_RUN[*]}" timeout 90 expect -f "$T/tty.exp"
tty_out=$OUT
check "expect script completed (status $STATUS)" grep -q EXPECT-DONE <<<"$tty_out"
if on_layer container || on_layer gvisor; then
    # Known gap (docs/security-model.md, Limitations): the pty comes from the host's devpts, the container mounts
    # its own; gVisor shows it as a host file (/proc/self/fd/0 -> host:[N]).
    skip "$EXG_LAYER layer: ttyname inside says \"not a tty\" (the pty is the host devpts's): known gap"
else
    check "inner tty is a /dev/pts path ($(grep -o 'INNER-TTY=[^[:space:]]*' <<<"$tty_out" | tr -d '\r'))" grep -qE 'INNER-TTY=/dev/pts/[0-9]+' <<<"$tty_out"
fi
check "background job gets a job number [1]" grep -q JOB-STARTED <<<"$tty_out"
check "jobs lists the running job" grep -q JOBS-LISTED <<<"$tty_out"
check "Ctrl-Z stops the foreground job" grep -q JOB-STOPPED <<<"$tty_out"
check "Ctrl-C interrupts the foreground job" grep -q CTRL-C-OK <<<"$tty_out"
check "a resize reaches the running command (SIGWINCH and the new size, 50x130)" grep -q RESIZE-OK <<<"$tty_out"
check "the interactive shell's exit status is the run's" grep -q EXIT-STATUS-OK <<<"$tty_out"
check "no job control warning from bash" bash -c '! grep -qiE "no job control|cannot set terminal process group" <<<"$1"' _ "$tty_out"
if [ -s "$T/stty.before" ] && [ -s "$T/stty.after" ]; then
    check "outer terminal settings unchanged" cmp -s "$T/stty.before" "$T/stty.after"
else
    fail "outer terminal settings not recorded"
fi
if [ "$FAILED" -ne 0 ]; then
    note "expect transcript:"
    printf '%s\n' "$tty_out" | tr -d '\r' | tail -n 60 | sed 's/^/#      /'
fi

finish
