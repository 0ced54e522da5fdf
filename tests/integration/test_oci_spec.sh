#!/usr/bin/env bash
# `exguardian oci-spec` output run by the real runtimes (crun, runc, runsc as
# root; rootless crun as the user): the spec is accepted, the command runs as
# the sandbox uid with no privileges, the workspace is writable and the rest
# read-only, credentials unreadable, and the seccomp profile refuses what the
# process layer refuses (every `exguardian probe` on crun and runc). Plus
# `exguardian docker-args` with podman where it can run here.
. "$(dirname "$0")/lib.sh"

WS=$T/ws
mkdir -p "$WS" "$HOME"
echo secret-npm > "$HOME/.npmrc"
if [ "$EXG_AS" = root ]; then
    # As root, the sandbox runs as the workspace's owner: an unprivileged one.
    chown 1001:1001 "$WS"
    want_uid=1001
else
    want_uid=$(id -u)
fi
hybrid=0
mountpoint -q /sys/fs/cgroup/unified 2>/dev/null && hybrid=1

# in_runtime RT CMD...: oci-spec for CMD, run by RT; sets STATUS/OUT/ERR.
in_runtime() {
    local rt=$1; shift
    local b=$T/bundle-$rt st=$T/state-$rt id="exg-it-$rt-$$-$RANDOM"
    rm -rf "$b"; mkdir -p "$st"
    if ! "$EXG" oci-spec --no-policy-files --runtime "$rt" --workspace "$WS" --bundle "$b" -- "$@" 2>"$T/notes"; then
        STATUS=125 OUT="" ERR=$(cat "$T/notes"); return 0
    fi
    case "$rt/$EXG_AS" in
        crun/root)
            if [ $hybrid = 1 ]; then
                # crun refuses hybrid cgroups: hide the empty v2 mount in a private mount namespace.
                run timeout 60 unshare -m --propagation private sh -c \
                    "umount /sys/fs/cgroup/unified && exec crun --root '$st' run -b '$b' '$id'" </dev/null
            else
                run timeout 60 crun --root "$st" run -b "$b" "$id" </dev/null
            fi ;;
        runc/root) run timeout 60 runc --root "$st" run -b "$b" "$id" </dev/null ;;
        runsc/root)
            run timeout 120 runsc --root="$st" --network=none --platform=ptrace --oci-seccomp --ignore-cgroups \
                run --bundle "$b" "$id" </dev/null ;;
        crun/user)
            if [ $hybrid = 1 ]; then
                # Inside `unshare --map-root-user` the caller is uid 0: map the sandbox uid onto that.
                python3 - "$b/config.json" <<'PY'
import json, sys
p = sys.argv[1]; s = json.load(open(p))
for k in ("uidMappings", "gidMappings"):
    s["linux"][k][0]["hostID"] = 0
json.dump(s, open(p, "w"))
PY
                mkdir -p "$T/empty"
                run timeout 60 unshare --user --map-root-user --mount sh -c \
                    "mount --bind '$T/empty' /sys/fs/cgroup/unified && exec crun --root '$st' run -b '$b' '$id'" </dev/null
            else
                run timeout 60 crun --root "$st" run -b "$b" "$id" </dev/null
            fi ;;
    esac
}

# Schema-level sanity of the CLI itself.
run "$EXG" oci-spec --no-policy-files --workspace "$WS" -- true
check "oci-spec prints config.json (exit $STATUS)" test "$STATUS" -eq 0
check "it is JSON with ociVersion 1.0.2" python3 -c "import json,sys; sys.exit(0 if json.loads(sys.argv[1])['ociVersion']=='1.0.2' else 1)" "$OUT"
expect_status 125 "$EXG" oci-spec --no-policy-files --workspace "$WS" --runtime kata -- true
check "a bad runtime is one clear line" grep -q -- "--runtime kata: expected crun, runc, runsc" <<<"$ERR"
expect_status 125 "$EXG" oci-spec --no-policy-files --workspace "$WS"
expect_status 125 "$EXG" oci-spec --no-policy-files --workspace "$WS" --workspace-mode overlay -- true
check "the overlay mode is refused by name" grep -q "workspace" <<<"$ERR"
run "$EXG" docker-args --no-policy-files --workspace "$WS" --image debian:12 --seccomp-out "$T/seccomp.json" -- true
check "docker-args prints one docker command line (exit $STATUS)" grep -q "^docker run --rm -i --user $want_uid:$want_uid --cap-drop ALL" <<<"$OUT"
check "docker-args wrote the seccomp profile" python3 -c "import json; json.load(open('$T/seccomp.json'))['syscalls']"

if [ "$EXG_AS" = root ]; then runtimes="crun runc runsc"; else runtimes="crun"; note "runc and runsc rootless: not tried (runc maps only root; runsc rootless needs more than a spec)"; fi
for rt in $runtimes; do
    if ! command -v "$rt" >/dev/null; then skip "$rt is not installed"; continue; fi
    in_runtime "$rt" true
    check "$rt runs \`true\` from the spec (exit $STATUS)" test "$STATUS" -eq 0
    [ "$STATUS" -eq 0 ] || { show_last; continue; }

    in_runtime "$rt" sh -c 'id -u; grep -E "^(CapEff|CapBnd)" /proc/self/status; echo w > "$PWD/written" && echo ws-ok;
        echo x > /etc/exg-oci-it 2>/dev/null && echo etc-WRITTEN; echo x > "'"$O"'/exg-oci-it" 2>/dev/null && echo O-WRITTEN;
        cat "$HOME/.npmrc" 2>/dev/null; hostname'
    check "$rt: runs as the sandbox uid $want_uid" grep -qx "$want_uid" <<<"$OUT"
    check "$rt: no capabilities" grep -q "CapEff:.0000000000000000" <<<"$OUT"
    check "$rt: bounding set empty" grep -q "CapBnd:.0000000000000000" <<<"$OUT"
    check "$rt: the workspace is writable" grep -qx ws-ok <<<"$OUT"
    check "$rt: the write landed in the host's workspace" test -f "$WS/written"
    last_output_lacks "etc-WRITTEN" "$rt: /etc is read-only"
    last_output_lacks "O-WRITTEN" "$rt: a host directory outside the workspace is read-only"
    check "$rt: nothing appeared in /etc or \$O" test ! -e /etc/exg-oci-it -a ! -e "$O/exg-oci-it"
    last_output_lacks "secret-npm" "$rt: ~/.npmrc is unreadable"
    check "$rt: hostname is the plan's" grep -qx exguardian <<<"$OUT"
    rm -f "$WS/written"

    # The seccomp profile: every probe (attacks refused as on the process
    # layer, ordinary work allowed). runsc answers some differently (below).
    in_runtime "$rt" sh -c 'X=/run/exguardian/exguardian; n=0; for p in $($X probe --list | cut -d" " -f1); do
        n=$((n+1)); $X probe "$p" >/dev/null 2>&1 || echo "BAD $p"; done; echo "probes=$n"'
    n=$(sed -n 's/^probes=//p' <<<"$OUT")
    check "$rt: $n probes ran" test "${n:-0}" -gt 50
    bad=$(sed -n 's/^BAD //p' <<<"$OUT" | tr '\n' ' ')
    if [ "$rt" = runsc ]; then
        # gVisor: runsc ignores errnoRet (EPERM for every refusal), has no i386/x32
        # entry points (ENOSYS/EBADF, not a kill), no pidfd_getfd/mount_setattr (ENOSYS)
        # and answers personality() changes with EINVAL itself; this gVisor has no fchmodat2
        # (ENOSYS: no mode is set either way). Still refused, all of them.
        unexpected=""
        for p in $bad; do
            case $p in
                pidfd-getfd|mount-setattr|fchmodat2-*|socket-*|socketpair-*|x32-*|i386-*|personality-*-allowed) ;;
                *) unexpected="$unexpected $p" ;;
            esac
        done
        check "runsc: every probe refused or allowed as expected, modulo gVisor's own answers${unexpected:+ (unexpected:$unexpected)}" test -z "$unexpected"
        in_runtime runsc sh -c '/run/exguardian/exguardian probe clone3; /run/exguardian/exguardian probe thread-allowed'
        check "runsc: clone3 is ENOSYS (gVisor's own; threads still work)" grep -q "clone3: as expected" <<<"$OUT"
        check "runsc: threads work" grep -q "thread-allowed: as expected" <<<"$OUT"
    else
        check "$rt: every probe as on the process layer${bad:+ (not: $bad)}" test -z "$bad"
    fi
done

# docker-args run by podman (root; runc) on a busybox root directory: the
# flags and the seccomp profile are accepted and hold.
if [ "$EXG_AS" = root ] && command -v podman >/dev/null && command -v runc >/dev/null && [ -x /bin/busybox ] && [ -n "$O" ]; then
    R=$O/bbroot PW=$O/pws
    mkdir -p "$R/bin" "$R/etc" "$PW"
    chown 1001:1001 "$PW"
    cp /bin/busybox "$R/bin/"
    for a in sh id cat touch grep unshare hostname; do ln -sf busybox "$R/bin/$a"; done
    run sh -c "cd '$PW' && '$EXG' docker-args --no-policy-files --engine podman --image '$R' --seccomp-out '$O/seccomp.json' --lines -- \
        sh -c 'id -u; echo ok > $PW/f && echo ws-ok; touch /bin/x 2>/dev/null && echo ROOT-WRITTEN; cat \$HOME/.npmrc 2>/dev/null; grep CapEff /proc/self/status; unshare -U true 2>/dev/null && echo UNSHARE-ALLOWED; echo done'"
    check "docker-args --engine podman --image DIR (exit $STATUS)" test "$STATUS" -eq 0
    mapfile -t pargs < <(tail -n +2 <<<"$OUT")
    run timeout 120 podman --root "$O/pod/r" --runroot "$O/pod/rr" --tmpdir "$O/pod/t" --cgroup-manager cgroupfs \
        --events-backend file --runtime runc "${pargs[@]}" </dev/null
    check "podman runs it (exit $STATUS)" grep -qx done <<<"$OUT"
    grep -qx done <<<"$OUT" || show_last
    check "podman: the sandbox uid" grep -qx 1001 <<<"$OUT"
    check "podman: the workspace is writable" grep -qx ws-ok <<<"$OUT"
    last_output_lacks ROOT-WRITTEN "podman: the root is read-only"
    last_output_lacks secret-npm "podman: ~/.npmrc is unreadable"
    check "podman: no capabilities" grep -q "CapEff:.0000000000000000" <<<"$OUT"
    last_output_lacks UNSHARE-ALLOWED "podman: the seccomp profile refuses a user namespace"
    # podman with cgroupfs leaves libpod_parent behind: remove the cgroups no
    # process is in any more (rmdir refuses busy ones).
    find /sys/fs/cgroup/*/libpod_parent -depth -type d -exec rmdir {} \; 2>/dev/null
else
    skip "podman with docker-args: needs root, podman, runc and busybox-static"
fi

finish
