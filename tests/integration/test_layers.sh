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
    # A runtime process (its state is under /run/exguardian-oci) with no exguardian above it is an
    # orphan (other runs may be going on).
    local orphans
    orphans=$(ps -eo pid=,ppid=,comm=,args= | awk '
        {pp[$1]=$2; c[$1]=$3; x=$0; sub(/^ *[0-9]+ +[0-9]+ +[^ ]+ +/, "", x); a[$1]=x}
        END {for (p in pp) if (c[p] ~ /^(runsc|crun|runc|exe)$/ && a[p] ~ /exguardian-oci/) {q=pp[p]; own=0
               while (q in pp && q > 1) {if (c[q] == "exguardian") {own=1; break}; q=pp[q]}
               if (!own) print p ":" c[p]}}' | tr '\n' ' ')
    [ -n "$orphans" ] && found+=" runtime processes($orphans)"
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
    # More than a pipe's worth into a file (gVisor's file relay once stalled at 64 KiB).
    timeout 60 "${R[@]}" -- head -c 300000 /dev/zero >"$T/big-$L" 2>/dev/null
    check "$L: 300 kB to a file as stdout arrive whole (status $?, $(stat -c %s "$T/big-$L") bytes)" \
        test "$(stat -c %s "$T/big-$L")" = 300000

    # ---- identity and walls ----------------------------------------------------------------------
    run timeout 60 "${R[@]}" -- sh -c 'id -u; grep CapEff /proc/self/status'
    uid=$(printf '%s\n' "$OUT" | head -1)
    if [ "$L" = gvisor ] && [ "$(id -u)" != 0 ] &&
        ! { grep -qE "^($(id -un)|$(id -u)):" /etc/subuid 2>/dev/null && command -v newuidmap >/dev/null; }; then
        # No subordinate uid range: the documented fallback is gVisor's uid 0 without capabilities.
        note "$L: no /etc/subuid range for $(id -un): the command runs as gVisor's uid 0"
        check "$L: gVisor's uid 0 in the fallback (got '$uid')" test "$uid" = 0
    else
        check "$L: runs as a non-root uid (got '$uid')" test -n "$uid" -a "$uid" != 0
    fi
    if [ "$L" = gvisor ]; then
        # runsc, its sentry and its gofer run as an unprivileged host uid too.
        gm=exg-layer-gv-$$-$RANDOM
        timeout 60 "${R[@]}" -- sh -c "exec -a $gm sleep 5" </dev/null >/dev/null 2>&1 &
        gp=$!
        # uids of runsc processes below this run's exguardian (other runs may be going on).
        runsc_uids() {
            ps -eo pid=,ppid=,uid=,args= | awk -v top="$gp" '{pp[$1]=$2; uid[$1]=$3; a[$1]=$4}
                END {for (p in pp) {q=p; while (q in pp && q!=top && q>1) q=pp[q];
                     if (q==top && a[p] ~ /runsc/) print uid[p]}}' | sort -u | tr '\n' ' '
        }
        for _ in $(seq 100); do hostuids=$(runsc_uids); [ -n "$hostuids" ] && break; sleep 0.1; done
        check "$L: runsc, sentry and gofer run as a non-root host uid (got '$hostuids')" \
            test -n "$hostuids" -a -z "$(printf '%s\n' $hostuids | grep -x 0)"
        wait "$gp" 2>/dev/null
    fi
    # HOME elsewhere than the caller's home directory (root's /root stays 0700 in the view).
    mkdir -p "$T/home-$L"
    run env HOME="$T/home-$L" timeout 60 "${R[@]}" -- sh -c 'echo ok'
    check "$L: HOME outside the caller's home directory (status $STATUS: $ERR)" test "$STATUS" = 0 -a "$OUT" = ok
    # A refused syscall: its errno inside; reported to the supervisor (audit log) where the runtime
    # supports seccomp notify (crun, runc), not by runsc.
    alog=$T/audit-$L.jsonl
    run timeout 60 "${R[@]}" --audit-log "$alog" -- python3 -c 'import ctypes; l=ctypes.CDLL(None, use_errno=True); print(l.ptrace(0, 0, 0, 0), ctypes.get_errno())'
    check "$L: ptrace refused with EPERM (got '$OUT')" test "$OUT" = "-1 1"
    if [ "$L" = container ]; then
        check "$L: the refusal is in the audit log" grep -q '"syscall":"ptrace"' "$alog"
    fi
    run timeout 60 "${R[@]}" -- sh -c 'echo "$0" && exec cat /etc/shadow' "$RAN_MARK"
    last_refused 'cat: /etc/shadow: Permission denied' '' "$L: a root-only host file stays unreadable"
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
    check "$L: ... owned on disk by the workspace's owner ($(stat -c %u:%g "$WS/landed-$L" 2>/dev/null) vs $(stat -c %u:%g "$WS"))" \
        test "$(stat -c %u "$WS/landed-$L" 2>/dev/null)" = "$(stat -c %u "$WS")"
    run timeout 60 "${R[@]}" -- sh -c "mkdir '$WS/d-$L' && echo y > '$WS/d-$L/f' && rm '$WS/landed-$L'"
    check "$L: mkdir, write, rm in the workspace" test "$STATUS" = 0 -a -f "$WS/d-$L/f" -a ! -e "$WS/landed-$L"
    run timeout 60 "${R[@]}" -- sh -c "echo $RAN_MARK && echo x > /usr/exg-$L-escape"
    last_refused "$(ro_refusal "$L")" '' "$L: a write outside the workspace"
    check "$L: ... /usr/exg-$L-escape not created on the host" test ! -e "/usr/exg-$L-escape"
    # Only loopback: a direct connection to an outside address is captured by the proxy
    # (transparent egress), which judges the literal (no CIDR rule allows it) and closes
    # without a byte; the proxy answers.
    run timeout 60 "${R[@]}" -- python3 -c 'import socket
s=socket.socket(); s.settimeout(5)
try:
    s.connect(("192.0.2.1", 80)); s.sendall(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n"); r=s.recv(100)
    print("direct got", r) if r else print("direct closed")
except OSError as e: print("direct refused", e.errno)
p=socket.create_connection(("127.0.0.1", 3128), 3); print("proxy ok")'
    expect_output_contains "proxy ok" echo "$OUT"
    check "$L: no direct route out (got '$(printf '%s' "$OUT" | tr '\n' ' ')')" grep -qE '^direct (closed|refused)' <<<"$OUT"

    if [ "$L" = container ]; then
        run timeout 60 "${R[@]}" -- ls /sys/class/net
        check "$L: /sys shows the sandbox's interfaces, not the host's (got '$(printf '%s' "$OUT" | tr '\n' ' ')')" test "$OUT" = lo
    fi

    # ---- nothing left behind -------------------------------------------------------------------
    m=exg-layer-left-$$-$RANDOM
    run timeout 60 "${R[@]}" -- sh -c "exec -a $m sleep 0.1"
    check "$L: nothing left after a normal exit:$(leftovers "$m")" test -z "$(leftovers "$m")"
    run timeout 60 "${R[@]}" --timeout 1s -- bash -c "exec -a $m sleep 60"
    for _ in $(seq 50); do [ -z "$(leftovers "$m")" ] && break; sleep 0.1; done
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

# ---- runc (root only: rootless runc would run the command as root of its user namespace) --------
if [ "$(id -u)" = 0 ] && command -v runc >/dev/null; then
    RC=("$EXG" run --layer container --runtime runc)
    run timeout 60 "${RC[@]}" -v -- sh -c 'id -u; exit 3'
    check "runc: exit 3 -> 3" test "$STATUS" = 3
    uid=$(printf '%s\n' "$OUT" | grep -xE '[0-9]+' | head -1)
    check "runc: runs as a non-root uid (got '$uid')" test -n "$uid" -a "$uid" != 0
    expect_output_contains "via runc" echo "$ERR"
    run timeout 60 "${RC[@]}" -- sh -c "echo x > '$WS/landed-runc' && ! echo y > /usr/exg-runc-escape"
    check "runc: workspace write lands, owned like the workspace; /usr refused" \
        test "$STATUS" = 0 -a -f "$WS/landed-runc" -a ! -e /usr/exg-runc-escape -a "$(stat -c %u "$WS/landed-runc" 2>/dev/null)" = "$(stat -c %u "$WS")"
    timeout 60 "${RC[@]}" -- sleep 30 </dev/null >/dev/null 2>&1 &
    p=$!
    sleep 2
    kill -TERM "$p"
    wait "$p"
    check "runc: SIGTERM to exguardian reaches the command (got $?)" test "$?" = 143
    run timeout 60 "${RC[@]}" -v --timeout 1s -- sleep 30
    check "runc: timeout -> 124" test "$STATUS" = 124
    sid=$(printf '%s\n' "$ERR" | sed -n 's/^exguardian: sandbox \([0-9a-f]*\)$/\1/p' | head -1)
    left=$(find /sys/fs/cgroup -maxdepth 5 -type d -name "exg-$sid" 2>/dev/null | head -3)
    check "runc: killed by the timeout, its cgroups are gone (sandbox '$sid': $left)" test -n "$sid" -a -z "$left"
elif [ "$(id -u)" != 0 ]; then
    run timeout 60 "$EXG" run --layer container --runtime runc -- true
    check "runc refused for a non-root caller (status $STATUS)" test "$STATUS" = 125
    expect_output_contains "use crun" echo "$ERR"
fi

# ---- crun gets the seccomp program in run.oci.seccomp_bpf_data; the config's own profile only kills -----
# A crun that ignored the annotation (stripped here by a wrapper named crun) must run nothing, not run
# the command unfiltered.
if command -v crun >/dev/null; then
    FC=$T/ignores-annotation
    mkdir -p "$FC"
    {
        echo '#!/bin/sh'
        echo 'b=""; prev=""'
        echo 'for a in "$@"; do [ "$prev" = --bundle ] && b=$a; prev=$a; done'
        echo '[ -n "$b" ] && python3 -c '\''import json, sys; p = sys.argv[1] + "/config.json"; c = json.load(open(p)); c.pop("annotations", None); json.dump(c, open(p, "w"))'\'' "$b"'
        echo "exec $(command -v crun) \"\$@\""
    } > "$FC/crun"
    chmod 755 "$FC" "$FC/crun"
    rm -f "$WS/ran-unfiltered" "$WS/ran-filtered"
    run timeout 60 "$EXG" run --layer container --runtime "$FC/crun" -- sh -c "echo x > '$WS/ran-unfiltered'"
    check "crun ignoring run.oci.seccomp_bpf_data: nothing runs (status $STATUS)" test "$STATUS" != 0 -a ! -e "$WS/ran-unfiltered"
    # crun dies of the profile before it hands the listener over (125, said why), or after, and then the
    # command's first exec is killed (159): which one is a race inside crun.
    if [ "$STATUS" = 125 ]; then
        expect_output_contains "older than 0.18 ignores run.oci.seccomp_bpf_data" echo "$ERR"
    else
        check "... or killed at its first exec (status $STATUS)" test "$STATUS" = 159
    fi
    run timeout 60 "$EXG" run --layer container --runtime "$(command -v crun)" -- sh -c "echo x > '$WS/ran-filtered'"
    check "the same command with crun itself runs" test "$STATUS" = 0 -a -e "$WS/ran-filtered"
    rm -f "$WS/ran-unfiltered" "$WS/ran-filtered"
fi

# ---- --rootfs DIR: a busybox root (plus the libraries exguardian's init needs), never written to --
if command -v busybox >/dev/null; then
    RF=$T/rootfs
    mkdir -p "$RF"/{bin,etc,proc,sys,dev,tmp,run,root,home}
    cp "$(command -v busybox)" "$RF/bin/busybox"
    for a in sh cat id ls echo touch; do ln -s busybox "$RF/bin/$a"; done
    echo "exg-rootfs-marker" > "$RF/etc/marker"
    for lib in $(ldd "$EXG" | grep -oE '/[^ ]+'); do mkdir -p "$RF$(dirname "$lib")"; cp -L "$lib" "$RF$lib"; done
    chmod -R go-w "$RF"
    before=$(cd "$RF" && find . | sort | md5sum)
    for L in "${layers[@]}"; do
        run timeout 60 "$EXG" run --layer "$L" --rootfs "$RF" -- sh -c "cat /etc/marker; echo x > '$WS/rootfs-$L'; touch /etc/escape 2>/dev/null || echo refused"
        check "$L --rootfs: its own root, the workspace writable, the root read-only ($STATUS: $(printf '%s' "$OUT" | tr '\n' ' '))" \
            test "$STATUS" = 0 -a "$(printf '%s\n' "$OUT" | head -1)" = exg-rootfs-marker -a -f "$WS/rootfs-$L" \
            -a "$(printf '%s\n' "$OUT" | tail -1)" = refused
        run timeout 60 "$EXG" run --layer "$L" --rootfs "$RF" -- sh -c 'test -e /usr/bin/python3 && echo host-root-visible; exit 0'
        check "$L --rootfs: the host's root is not there" test "$STATUS" = 0 -a -z "$OUT"
    done
    check "--rootfs DIR is not written to by any runtime" test "$(cd "$RF" && find . | sort | md5sum)" = "$before"
else
    skip "--rootfs: busybox not installed (busybox-static)"
fi

# ---- submounts of read-only binds (docker/podman storage under /var, ...) stay read-only, even below a
# 0700 directory the runtime cannot enter; in a private mount namespace of this test (root only) ------
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null; then
    SUB=/var/lib/exg-it-sub.$$
    cleanup_path "$SUB"
    mkdir -p "$SUB/closed/m" "$SUB/open"
    chmod 700 "$SUB/closed"
    cat >"$T/submounts.sh" <<EOS
mount -t tmpfs exg-it "$SUB/closed/m" && mount -t tmpfs -o mode=1777 exg-it "$SUB/open" || exit 99
for L in ${layers[*]}; do
    o=\$(timeout 60 "$EXG" run --layer \$L -- sh -c "echo started; touch $SUB/open/root-\$L" 2>/dev/null); echo "\$L root \$? \$o"
    if id exgtest >/dev/null 2>&1; then
        o=\$(cd /tmp && timeout 60 runuser -u exgtest -- "$EXG" run --layer \$L -- sh -c "echo started; touch $SUB/open/user-\$L" 2>/dev/null)
        echo "\$L user \$? \$o"
    fi
done
ls "$SUB/open"
EOS
    out=$(unshare -m --propagation private bash "$T/submounts.sh" 2>&1)
    for L in "${layers[@]}"; do
        for who in root user; do
            st=$(printf '%s\n' "$out" | awk -v l="$L" -v w="$who" '$1==l && $2==w {print $3, $4}')
            [ -z "$st" ] && continue
            check "$L as $who: the layer runs, a writable submount of a read-only bind refused ($st)" \
                test "$st" = "1 started" -a -z "$(printf '%s\n' "$out" | grep -x "$who-$L")"
        done
    done
fi
finish
