#!/usr/bin/env bash
# `exguardian runtime` under podman --runtime (issue 46): the engine's volumes below a path the
# runtime mounts a tmpfs of its own on (an allowWrite path) stay. A volume at /workspace/data
# under an allowWrite /workspace is there, writable, and the write lands in the host directory;
# a read-only volume at /var/run/secrets/kubernetes.io/serviceaccount, where the image's /var/run
# links to /run (allowWrite /run), is there and read-only (kubelet's service-account token). Its
# host file is unchanged. The image is made here from a static busybox; nothing is pulled. On the
# default handler (crun) and a gVisor one (runsc).
# Root only: as an unprivileged user `exguardian runtime create` refuses to start (no network
# namespace of its own; test_runtime.sh checks that refusal).
. "$(dirname "$0")/lib.sh"

if [ "$EXG_AS" != root ]; then
    echo "skip: exguardian runtime starts containers as root only (test_runtime.sh checks the user's refusal)"; exit 77
fi
BB=$(command -v busybox || true)
if [ -z "$BB" ] || ldd "$BB" >/dev/null 2>&1 || ! command -v crun >/dev/null || ! command -v podman >/dev/null; then
    echo "skip: needs crun, podman and a static busybox (make deps: crun, podman, busybox-static)"; exit 77
fi

H=$T/handlers
mkdir -p "$H"
cat > "$H/default.json" <<JSON
{
  "network": {"allowedDomains": []},
  "filesystem": {"denyRead": [], "allowWrite": ["/workspace", "/run", "/tmp"], "denyWrite": []},
  "audit": {"log": "$T/audit.jsonl"}
}
JSON

# The image: busybox, /var/run a link to /run as in most images.
R=$T/rootfs
mkdir -p "$R/bin" "$R/etc" "$R/run" "$R/var" "$R/workspace"
cp "$BB" "$R/bin/busybox"
for a in sh cat touch echo ls grep; do ln -s busybox "$R/bin/$a"; done
ln -s ../run "$R/var/run"
mkdir -p "$T/data" "$T/token"
echo token-1 > "$T/token/token"
echo from-host > "$T/data/host-file"
chmod 777 "$T/data"

sed 's/^{/{"layer": "gvisor",/' "$H/default.json" > "$H/gvisor.json"

PM=(podman --root "$T/pm/storage" --runroot "$T/pm/run" --tmpdir "$T/pm/tmp" --cgroup-manager cgroupfs
    --events-backend file)
tar -C "$R" -cf "$T/rootfs.tar" . && expect_status 0 "${PM[@]}" import "$T/rootfs.tar" localhost/exg-vol
SA=/var/run/secrets/kubernetes.io/serviceaccount

# volumes HANDLER: a podman run through exguardian runtime with the handler's policy.
volumes() {
    local h=$1
    printf '#!/bin/sh\nexec env EXGUARDIAN_HANDLERS_DIR=%s %s runtime --handler %s --root %s "$@"\n' \
        "$H" "$EXG" "$h" "$T/rt-podman" > "$T/exg-runtime-$h"
    chmod 755 "$T/exg-runtime-$h"
    rm -f "$T/data/written"
    run timeout 120 "${PM[@]}" --runtime "$T/exg-runtime-$h" run --rm --network none \
        --ulimit nofile=1024:1024 --ulimit nproc=4096:4096 \
        -v "$T/data:/workspace/data" -v "$T/token:$SA:ro" localhost/exg-vol sh -c "
        echo --ran--
        echo from-inside > /workspace/data/written && echo data-write-ok
        cat /workspace/data/host-file 2>/dev/null || echo no-host-file
        cat $SA/token || echo token-missing
        echo forged > $SA/token && echo token-written
        touch /workspace/own && echo workspace-tmpfs-ok"
    note "$(printf '%s\n' "$OUT" "$ERR" | head -20)"
    check "$h: podman run through exguardian runtime: the container ran its command" grep -q '^--ran--$' <<<"$OUT"
    check "$h: /workspace/data (a volume under allowWrite /workspace): the host's file seen inside" grep -qx from-host <<<"$OUT"
    check "$h: /workspace/data: written from inside" grep -q data-write-ok <<<"$OUT"
    check "$h: /workspace/data: the write reached the host directory" \
        bash -c "[ \"\$(cat '$T/data/written' 2>/dev/null)\" = from-inside ]"
    check "$h: $SA (read-only volume, /var/run -> /run under allowWrite /run): the token is there" grep -qx token-1 <<<"$OUT"
    check "$h: $SA: a write refused (read-only), the host file unchanged" bash -c \
        "! grep -q token-written <<<\"\$1\" && grep -q 'Read-only file system' <<<\"\$2\" && [ \"\$(cat '$T/token/token')\" = token-1 ]" _ "$OUT" "$ERR"
    check "$h: /workspace itself: the runtime's tmpfs, writable" grep -q workspace-tmpfs-ok <<<"$OUT"
}
volumes default
if command -v runsc >/dev/null; then volumes gvisor
else skip "runsc is not installed: the gvisor handler not tested"; fi

"${PM[@]}" rmi -f localhost/exg-vol >/dev/null 2>&1
finish
