#!/usr/bin/env bash
# A file handed over as stdio keeps exactly the rights it was given (issue 39): the command
# cannot open its stdin, stdout or stderr file again through /proc/self/fd/N, /dev/stdin,
# /dev/fd/N or /proc/PID/fd/N of another of its processes to write, truncate or read it back.
# The files live outside the workspace, mode 0666 and under --deny-read, so that nothing but the
# descriptors handed over can reach them; each attack is made for real and the host files are
# compared afterwards. Ordinary redirection still works: content, exit status, EOF, order of
# `>log 2>&1`, pipes, a directory as stdin.
source "$(dirname "$0")/lib.sh"

new_workspace
require_sandbox || finish

D="$O/stdio"
mkdir -p "$D"
chmod 777 "$D"
SECRET="EXGSTDIO-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
printf '#!/bin/sh\necho setup %s\n' "$SECRET" > "$D/setup.sh"
chmod 666 "$D/setup.sh"
setup_sum=$(sha256sum < "$D/setup.sh")

# fresh_logs: the stdout and stderr files, each starting with a line no command was given.
fresh_logs() {
    printf 'LOG-%s\n' "$SECRET" > "$D/out.log"
    printf 'ERR-%s\n' "$SECRET" > "$D/err.log"
    chmod 666 "$D/out.log" "$D/err.log"
}
# in_sbx LINE: LINE under sh inside the sandbox, stdin setup.sh, stdout and stderr appended to
# the logs; nothing under $D is readable or writable by its path inside.
in_sbx() {
    (cd "$WS" && exec timeout -k 5 "$EXG_CALL_TIMEOUT" "${EXG_RUN[@]}" --deny-read "$D" -- sh -c "$1") \
        < "$D/setup.sh" >> "$D/out.log" 2>> "$D/err.log"
    STATUS=$?
    OUT=$(cat "$D/out.log") ERR=$(cat "$D/err.log")
}
# logs_intact DESC: each log still starts with its own first line, and neither holds the
# secret more often than that line does (nothing read back into them).
logs_intact() {
    local o e
    o=$(head -1 "$D/out.log") e=$(head -1 "$D/err.log")
    check "$1: stdout file's first line kept (not truncated or overwritten)" test "$o" = "LOG-$SECRET"
    check "$1: stderr file's first line kept" test "$e" = "ERR-$SECRET"
    check "$1: nothing read back from the files handed over" \
        test "$(cat "$D/out.log" "$D/err.log" | grep -c -- "$SECRET")" -eq 2
}
setup_intact() {
    check "$1: the stdin file on the host is unchanged" test "$(sha256sum < "$D/setup.sh")" = "$setup_sum"
}

# ---- the path itself is out of reach (so the descriptors are the only way in) -----------------
fresh_logs
in_sbx "echo $RAN_MARK; cat '$D/setup.sh' '$D/out.log'; echo pwned > '$D/setup.sh'"
check "by path: the command ran" grep -qx "$RAN_MARK" "$D/out.log"
logs_intact "by path"
setup_intact "by path"

# ---- stdin reopened for writing and truncating --------------------------------------------------
for how in '/proc/self/fd/0' '/dev/stdin' '/dev/fd/0'; do
    fresh_logs
        # (`true`, not `:`: a failed redirection of a special builtin would end sh)
    in_sbx "echo $RAN_MARK; echo pwned > $how; echo pwned >> $how; true > $how; echo pwned 1<> $how; exit 3"
    check "stdin $how: the command ran and its status came back (got $STATUS)" test "$STATUS" -eq 3
    setup_intact "stdin $how"
    logs_intact "stdin $how"
done
# Through another process of the sandbox that holds the same stdin.
fresh_logs
in_sbx "echo $RAN_MARK; sleep 30 0<&0 & p=\$!; echo pwned > /proc/\$p/fd/0; true > /proc/\$p/fd/0; kill \$p; true"
check "stdin /proc/PID/fd/0 of another process: ran (got $STATUS)" test "$STATUS" -eq 0
setup_intact "stdin /proc/PID/fd/0"
logs_intact "stdin /proc/PID/fd/0"
# What the command holds as stdin is no longer the host's file at all.
fresh_logs
in_sbx 'stat -L -c %F /proc/self/fd/0; readlink /proc/self/fd/0'
# (gVisor's stat of the pipe fails with EINVAL: no type at all is not the file either)
check "stdin reaches the command as no regular file" bash -c '! grep -q "regular" "$1"' _ "$D/out.log"
check "no host path behind the command's stdin" bash -c '! grep -q "setup.sh" "$1"' _ "$D/out.log"

# ---- stdout and stderr reopened for reading, truncating, overwriting ---------------------------
for fd in 1 2; do
    for how in "/proc/self/fd/$fd" "/dev/fd/$fd" "/dev/std$([ "$fd" = 1 ] && echo out || echo err)"; do
        fresh_logs
        # What dd reads it writes to its stdout, the stdout file (dd's own fds are the ones
        # handed over: no redirection of its own). iflag=nonblock: a pipe reopened for reading
        # may have nothing to give, and must not be waited on.
        in_sbx "echo $RAN_MARK; dd if=$how iflag=nonblock bs=4096 count=1; true > $how; echo overwrite 1<> $how; true"
        check "fd $fd $how: ran (got $STATUS)" test "$STATUS" -eq 0
        logs_intact "fd $fd $how"
        setup_intact "fd $fd $how"
    done
done
fresh_logs
in_sbx "echo $RAN_MARK; sleep 30 0<&0 & p=\$!; dd if=/proc/\$p/fd/1 iflag=nonblock bs=4096 count=1; dd if=/proc/\$p/fd/2 iflag=nonblock bs=4096 count=1; true > /proc/\$p/fd/2; kill \$p; true"
check "stdout /proc/PID/fd/1 of another process: ran (got $STATUS)" test "$STATUS" -eq 0
logs_intact "stdout /proc/PID/fd/N"

# ---- a directory as stdin hands out nothing under it ------------------------------------------
echo "$SECRET" > "$D/inside"
chmod 666 "$D/inside"
fresh_logs
(cd "$WS" && exec timeout -k 5 "$EXG_CALL_TIMEOUT" "${EXG_RUN[@]}" --deny-read "$D" -- \
    sh -c "echo $RAN_MARK; ls /proc/self/fd/0/; cat /proc/self/fd/0/inside; echo pwned > /proc/self/fd/0/new") \
    < "$D" >> "$D/out.log" 2>> "$D/err.log"
check "directory as stdin: ran" grep -qx "$RAN_MARK" "$D/out.log"
check "directory as stdin: nothing under it listed or read" \
    test "$(cat "$D/out.log" "$D/err.log" | grep -c -e "$SECRET" -e '^inside$')" -eq 2
check "directory as stdin: nothing created under it" test ! -e "$D/new"
rm -f "$D/inside"

# ---- ordinary redirection still works ----------------------------------------------------------
RUNT=(timeout -k 5 "$EXG_CALL_TIMEOUT" "${EXG_RUN[@]}")
head -c 300000 /dev/urandom > "$T/big"
run bash -c 'cd "$1" && shift && "$@" -- sh -c "cat; exit 5" < "$0" > "$0.copy"' "$T/big" "$WS" "${RUNT[@]}"
check "stdin file -> stdout file: byte-identical copy of 300 kB" cmp -s "$T/big" "$T/big.copy"
check "stdin file -> stdout file: the command's status (5) (got $STATUS)" test "$STATUS" -eq 5
printf 'first\n' > "$T/app"
run bash -c 'cd "$1" && shift && "$@" -- sh -c "echo second; echo third >&2" >> "$0" 2>&1' "$T/app" "$WS" "${RUNT[@]}"
check "append to a file, stdout and stderr in order" test "$(cat "$T/app")" = $'first\nsecond\nthird'
run bash -c 'cd "$1" && shift && "$@" -- sh -c "for i in 1 2 3 4 5 6 7 8 9; do echo o\$i; echo e\$i >&2; done" > "$0" 2>&1' \
    "$T/mix" "$WS" "${RUNT[@]}"
check "one file for stdout and stderr (>f 2>&1): lines keep their order" \
    test "$(tr '\n' ' ' < "$T/mix")" = "o1 e1 o2 e2 o3 e3 o4 e4 o5 e5 o6 e6 o7 e7 o8 e8 o9 e9 "
run bash -c 'cd "$1" && shift && printf "a\nb\n" | "$@" -- wc -l' _ "$WS" "${RUNT[@]}"
check "a pipe as stdin: the command reads it to its end (got '$OUT')" test "$(echo $OUT)" = 2
run bash -c 'cd "$1" && shift && "$@" -- cat < /dev/null' _ "$WS" "${RUNT[@]}"
check "/dev/null as stdin: EOF at once (status $STATUS)" test "$STATUS" -eq 0 -a -z "$OUT"
run bash -c 'cd "$1" && shift && "$@" -- sh -c "yes | head -c 2000000" | head -c 5' _ "$WS" "${RUNT[@]}"
check "a reader that goes away ends the run (got '$OUT', status $STATUS)" test "$OUT" = "$(printf 'y\ny\ny')"
finish
