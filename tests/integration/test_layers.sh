#!/usr/bin/env bash
# The container (crun/runc) and gVisor (runsc) layers end to end: exit statuses, stdio, identity,
# network, and that nothing is left behind (processes, runtime state, bundles, cgroups) after a
# normal exit, a timeout and a SIGKILL of exguardian itself. A layer is skipped only when its
# runtime binary is absent. The layer-independent topics (filesystem, egress, limits, ...) run on
# every layer through the parametrised scripts.
source "$(dirname "$0")/lib.sh"

new_workspace
cd "$WS" || exit 1

layers=()
if command -v crun >/dev/null || command -v runc >/dev/null; then layers+=(container); else skip "container: neither crun nor runc installed"; fi
if command -v runsc >/dev/null; then layers+=(gvisor); else skip "gvisor: runsc not installed"; fi

# What a run could leave on the host: processes of the sandbox, runtime state, our cgroups.
leftovers() {  # MARKER
    local m=$1 found=""
    pgrep -f -- "$m" >/dev/null && found+=" processes($(pgrep -f -- "$m" | tr '\n' ' '))"
    pgrep -f -- "runsc.*exg-" >/dev/null && found+=" runsc"
    pgrep -f -- "crun.*exg-|runc.*exg-" >/dev/null && found+=" crun/runc"
    for d in /run/crun /run/runc /run/runsc /run/user/"$(id -u)"/crun; do
        [ -d "$d" ] && ls "$d" 2>/dev/null | grep -q '^exg-' && found+=" state:$d"
    done
    ls -d /run/exguardian-oci /tmp/exguardian-oci* 2>/dev/null | grep -q . && found+=" bundle"
    printf '%s' "$found"
}

for L in "${layers[@]}"; do
    R=("$EXG" run --layer "$L")
    # ---- exit statuses -------------------------------------------------------------------------
    run timeout 60 "${R[@]}" -- true
    check "$L: true -> 0" test "$STATUS" = 0
    [ "$STATUS" = 0 ] || { show_last; continue; }
    run timeout 60 "${R[@]}" -- sh -c 'exit 3'
    check "$L: exit 3 -> 3" test "$STATUS" = 3
    run timeout 60 "${R[@]}" -- exg-no-such-command
    check "$L: missing command -> 127" test "$STATUS" = 127
    run timeout 60 "${R[@]}" -- sh -c 'kill -TERM $$'
    check "$L: death by SIGTERM -> 143" test "$STATUS" = 143
    run timeout 60 "${R[@]}" --timeout 1s -- sleep 30
    check "$L: timeout -> 124" test "$STATUS" = 124
    # A signal to exguardian reaches the command (through the runtime and oci-init).
    timeout 60 "${R[@]}" -- sleep 30 </dev/null >/dev/null 2>&1 &
    p=$!
    sleep 2
    kill -TERM "$p"
    wait "$p"
    check "$L: SIGTERM to exguardian reaches the command (got $?)" test "$?" = 143

    # ---- stdio -------------------------------------------------------------------------------------
    run bash -c "echo in-$L | timeout 60 ${R[*]} -- cat"
    check "$L: stdin/stdout pass through" test "$OUT" = "in-$L"
    run timeout 60 "${R[@]}" -- sh -c 'echo to-err >&2'
    check "$L: stderr passes through" test "$ERR" = "to-err"
    log=$T/log-$L
    { echo before; timeout 60 "${R[@]}" -- echo inside; echo after; } >"$log" 2>&1
    check "$L: a file as stdout is appended to, not overwritten ($(tr '\n' ' ' <"$log"))" \
        test "$(tr '\n' ' ' <"$log")" = "before inside after "

    # ---- identity and walls ----------------------------------------------------------------------
    run timeout 60 "${R[@]}" -- sh -c 'id -u; grep CapEff /proc/self/status'
    uid=$(printf '%s\n' "$OUT" | head -1)
    check "$L: runs as a non-root uid (got '$uid')" test -n "$uid" -a "$uid" != 0
    expect_output_contains "0000000000000000" timeout 60 "${R[@]}" -- grep CapEff /proc/self/status
    marker=exg-layer-host-$$-$RANDOM
    bash -c "exec -a $marker sleep 300" </dev/null >/dev/null 2>&1 &
    hp=$!
    track_bg "$hp"
    expect_no_output_contains "$marker" timeout 60 "${R[@]}" -- ps -eo args
    kill "$hp" 2>/dev/null
    run timeout 60 "${R[@]}" -- sh -c "echo x > '$WS/landed-$L'"
    check "$L: a workspace write lands on the host" test -f "$WS/landed-$L"
    [ -f "$WS/landed-$L" ] || show_last
    run timeout 60 "${R[@]}" -- sh -c "echo x > /usr/exg-$L-escape"
    check "$L: a write outside the workspace is refused" test "$STATUS" != 0 -a ! -e "/usr/exg-$L-escape"
    # Only loopback: a direct connection to an outside address fails, the proxy answers.
    run timeout 60 "${R[@]}" -- python3 -c 'import socket
s=socket.socket(); s.settimeout(3)
print("direct", s.connect_ex(("192.0.2.1", 80)))
p=socket.create_connection(("127.0.0.1", 3128), 3); print("proxy ok")'
    expect_output_contains "proxy ok" echo "$OUT"
    check "$L: no direct route out (got '$OUT')" test "$(printf '%s\n' "$OUT" | grep -c 'direct 0$')" = 0

    # ---- nothing left behind -------------------------------------------------------------------
    m=exg-layer-left-$$-$RANDOM
    run timeout 60 "${R[@]}" -- sh -c "exec -a $m sleep 0.1"
    check "$L: nothing left after a normal exit:$(leftovers "$m")" test -z "$(leftovers "$m")"
    run timeout 60 "${R[@]}" --timeout 1s -- bash -c "exec -a $m sleep 60"
    sleep 0.5
    check "$L: nothing left after a timeout:$(leftovers "$m")" test -z "$(leftovers "$m")"
    "${R[@]}" -- bash -c "(exec -a $m sleep 120) & exec -a $m sleep 120" </dev/null >/dev/null 2>&1 &
    p=$!
    wait_for 20 pgrep -f -- "$m" >/dev/null || note "$L: sandbox process not seen"
    check "$L: the sandbox runs before the kill" pgrep -f -- "$m"
    kill -9 "$p"
    wait "$p" 2>/dev/null
    for _ in $(seq 50); do [ -z "$(leftovers "$m")" ] && break; sleep 0.1; done
    check "$L: nothing left after kill -9 of exguardian:$(leftovers "$m")" test -z "$(leftovers "$m")"
    # Its empty cgroup goes with the next run's sweep.
    run timeout 60 "${R[@]}" -- true
    stale=$(find /sys/fs/cgroup -path "*exguardian/exg-$p-*" -maxdepth 4 -type d 2>/dev/null | head -3)
    check "$L: the killed run's cgroups are swept by the next run ($stale)" test -z "$stale"
    pkill -9 -f -- "$m" 2>/dev/null  # whatever a failure above left, so the next layer starts clean
done
finish
