#!/usr/bin/env bash
# `exguardian session --layer microvm`: the guest's agent (the same code and protocol as on
# every layer, docs/agent-protocol.md) on its virtio-serial port, driven by session-client.
# One guest (TCG: 5-20 s to boot): processes with their status and output, the plan's
# environment and working directory, state across commands, file requests done by the
# agent inside the guest (the workspace writable, /etc read-only, /etc/shadow unreadable),
# a signal to a process, a pty allocated in the guest, then shutdown: the guest, qemu and
# every file of the run are gone. Skipped (77) without qemu-system-x86_64 or the guest image.
EXG_LAYER=microvm
source "$(dirname "$0")/lib.sh"

image=${EXG_BUILD_DIR:-}/microvm
if ! command -v qemu-system-x86_64 >/dev/null || [ ! -s "$image/vmlinux" ]; then
    echo "skip: the microvm layer needs qemu-system-x86_64 and the guest image in $image"; exit 77
fi
export EXG_MICROVM_IMAGE_DIR=$image
# CI's time budget: as root only in `make test` (qemu as an ordinary user is test_microvm.sh's
# and the egress script's; the session code is the same); EXG_IT_MICROVM_FULL=1 runs it as user.
if [ "$EXG_AS" = user ] && [ "${EXG_IT_MICROVM_FULL:-0}" != 1 ]; then
    echo "skip: as user only with EXG_IT_MICROVM_FULL=1 (CI time budget)"; exit 77
fi

new_workspace || finish
SOCK=$T/vm.sock
sc() { timeout -k 2 120 "$EXG" session-client --control "unix:$SOCK" "$@" </dev/null; }
field() { jq -r ".$1" <<<"$OUT"; }
_answers() { timeout 5 "$EXG" session-client --control "unix:$SOCK" call '{"op":"list"}' >/dev/null 2>&1; }
_gone() { ! kill -0 "$1" 2>/dev/null; }
tmp_before=$(host_tmp_listing)

(cd "$WS" && exec timeout -k 5 300 "$EXG" session --layer microvm --control "unix:$SOCK") > "$T/s.log" 2>&1 &
SPID=$!
track_bg "$SPID"
if ! wait_for 120 _answers; then fail "the microvm session did not come up"; sed 's/^/#      /' "$T/s.log"; finish; fi
ok "the microvm session is up"

# Processes: status, stdout/stderr, the plan's environment and cwd, another kernel.
run sc exec -- sh -c 'echo out; echo err >&2; pwd; echo "$HTTP_PROXY"; uname -r; id -u; echo state > made-here; exit 3'
if [ "$STATUS" -eq 3 ] && [ "$(sed -n 1p <<<"$OUT")" = out ] && grep -qx err <<<"$ERR"; then
    ok "exec: exit status 3, stdout and stderr of the guest's process"
else fail "exec status/output"; show_last; fi
check "the process starts in the workspace ($(sed -n 2p <<<"$OUT"))" test "$(sed -n 2p <<<"$OUT")" = "$WS"
check "the plan's environment (HTTP_PROXY=$(sed -n 3p <<<"$OUT"))" test "$(sed -n 3p <<<"$OUT")" = http://127.0.0.1:3128
check "it runs on the guest kernel ($(sed -n 4p <<<"$OUT"))" test "$(sed -n 4p <<<"$OUT")" = "$(cat "$image/kernel-version")"
check "not as root inside the guest (uid $(sed -n 5p <<<"$OUT"))" test "$(sed -n 5p <<<"$OUT")" != 0
run sc exec -- cat made-here
check "state carries across commands" test "$OUT" = state

# Files, as the agent inside the guest reaches them (relative paths from the workspace).
run sc call '{"op":"write","path":"from-client"}' --payload-in <(printf 'via-agent')
check "write into the workspace" test "$(field ok)" = true
check "the write is on the host" test "$(cat "$WS/from-client" 2>/dev/null)" = via-agent
run sc call '{"op":"read","path":"made-here"}' --payload-out -
check "read a file the guest's process made" grep -q '^state$' <<<"$OUT"
run sc call '{"op":"write","path":"/etc/exg-vm-probe"}' --payload-in <(printf x)
check "write outside the workspace refused ($(field error))" test "$(field ok)" = false
check "and nothing was written on the host" test ! -e /etc/exg-vm-probe
run sc call '{"op":"read","path":"/etc/shadow"}'
check "/etc/shadow unreadable to the agent ($(field error))" test "$(field error)" = EACCES

# A signal, over the protocol, to a process of the guest.
pid=$(sc start -- sleep 300)
run sc call "{\"op\":\"signal\",\"pid\":$pid,\"signal\":\"TERM\"}"
run timeout 60 "$EXG" session-client --control "unix:$SOCK" attach "$pid"
check "signal TERM ends the process: status 143 (got $STATUS)" test "$STATUS" -eq 143

# A pty in the guest (the guest's own devpts).
run sc exec --pty --rows 33 --cols 99 -- sh -c 'tty; test -t 0 && stty size'
check "a pty of the guest's devpts ($(head -1 <<<"$OUT" | tr -d '\r'))" grep -q '^/dev/pts/' <<<"$OUT"
check "with the asked size" grep -q "33 99" <<<"$OUT"

# Shutdown ends the guest, qemu and the session; nothing of it is left.
run sc call '{"op":"shutdown"}'
if wait_for 60 _gone "$SPID"; then ok "shutdown ends the session"; else fail "the session is still running after shutdown"; fi
wait "$SPID"; st=$?
check "the session's exit status is 0 (got $st)" test "$st" -eq 0
id=$(sed -n 's/^exguardian: session \([0-9a-f]*\) ready.*/\1/p' "$T/s.log")
_no_qemu() { [ -n "$id" ] && ! pgrep -f -- "qemu-system-x86_64 .*guest=exguardian-$id" >/dev/null; }
check "no qemu of this session ($id) is left" _no_qemu
left=$(host_tmp_left "$tmp_before")
check "nothing left in /tmp (${left:-none})" test -z "$left"
check "the control socket is gone" test ! -e "$SOCK"
finish
