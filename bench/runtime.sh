#!/usr/bin/env bash
# Container start through engines with exguardian runtime against the same with crun (and
# runc), side by side in interleaved rounds (bench/interleave.py): `podman run --rm IMG true`
# and `ctr run --rm IMG ID true` (containerd's runc v2 shim, the path of a RuntimeClass), the
# image a busybox root imported here (nothing pulled). On hybrid cgroup hosts crun runs through
# a two-line wrapper hiding the empty v2 mount, as exguardian runtime does inside itself.
# Ratio: exguardian runtime / crun per engine (issue 17's target: <= 1.2).
# Writes bench/results/runtime.json and bench/results/runtime.md.
# Usage (as root): EXG=build/exguardian RUNS=20 bash bench/runtime.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
EXG=$(readlink -f "${EXG:-$root/build/exguardian}")
RUNS=${RUNS:-20}
results=$root/bench/results
mkdir -p "$results"
[ "$(id -u)" = 0 ] || { echo "bench: runtime.sh runs as root" >&2; exit 1; }
for tool in podman crun runc busybox python3; do
    command -v "$tool" >/dev/null || { echo "bench: $tool is missing (make deps)" >&2; exit 1; }
done
W=$(mktemp -d /tmp/exg-bench-runtime.XXXXXX)
CTD_PID=""
cleanup() {
    [ -n "$CTD_PID" ] && kill "$CTD_PID" 2>/dev/null && wait "$CTD_PID" 2>/dev/null
    podman --root "$W/pm" --runroot "$W/pmrun" rm -fa >/dev/null 2>&1 || true
    rm -rf "/run/containerd/runc/exg-bench-$$" "$W"
}
trap cleanup EXIT

mkdir -p "$W/rootfs/bin" "$W/handlers"
cp "$(command -v busybox)" "$W/rootfs/bin/busybox"
ln -s busybox "$W/rootfs/bin/true"
echo '{"filesystem": {"allowWrite": ["/tmp"]}, "audit": {"log": "'"$W"'/audit.jsonl"}}' > "$W/handlers/default.json"
printf '#!/bin/sh\nexec env EXGUARDIAN_HANDLERS_DIR=%s %s runtime "$@"\n' "$W/handlers" "$EXG" > "$W/exg-runtime"
if mountpoint -q /sys/fs/cgroup/unified 2>/dev/null; then
    printf '#!/bin/sh\nexec unshare -m --propagation slave sh -c %s crun "$@"\n' \
        "'umount /sys/fs/cgroup/unified && exec crun \"\$@\"'" > "$W/crun"
else
    printf '#!/bin/sh\nexec crun "$@"\n' > "$W/crun"
fi
chmod 755 "$W/exg-runtime" "$W/crun"

PM="podman --root $W/pm --runroot $W/pmrun --tmpdir $W/pmtmp --cgroup-manager cgroupfs --events-backend file"
RUN="run --rm --network none --ulimit nofile=1024:1024 --ulimit nproc=4096:4096 localhost/exg-bench true"
tar -C "$W/rootfs" -cf "$W/rootfs.tar" .
$PM import "$W/rootfs.tar" localhost/exg-bench >/dev/null
pairs=("podman+runc" "$PM --runtime $(command -v runc) $RUN"
       "podman+crun" "$PM --runtime $W/crun $RUN"
       "podman+exguardian-runtime" "$PM --runtime $W/exg-runtime $RUN")
if command -v containerd >/dev/null && command -v ctr >/dev/null; then
    cat > "$W/containerd.toml" <<TOML
version = 2
root = "$W/ctd/root"
state = "$W/ctd/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$W/ctd.sock"
TOML
    containerd --config "$W/containerd.toml" >"$W/containerd.log" 2>&1 &
    CTD_PID=$!
    for _ in $(seq 100); do [ -S "$W/ctd.sock" ] && break; sleep 0.1; done
    $PM save --format oci-archive -o "$W/img.tar" localhost/exg-bench >/dev/null 2>&1
    CTR="ctr -a $W/ctd.sock -n exg-bench-$$"
    $CTR images import "$W/img.tar" >/dev/null
    # A fresh id per run: ctr run needs one; interleave.py runs the same argv, so a tiny script.
    for rt in runc crun exg-runtime; do
        bin=$([ $rt = runc ] && command -v runc || echo "$W/$rt")
        printf '#!/bin/sh\nexec %s run --rm --runc-binary %s localhost/exg-bench:latest b-$$-$(od -An -N4 -tx4 /dev/urandom | tr -d " ") true\n' \
            "$CTR" "$bin" > "$W/ctr-$rt"
        chmod 755 "$W/ctr-$rt"
    done
    pairs+=("ctr+runc" "$W/ctr-runc" "ctr+crun" "$W/ctr-crun" "ctr+exguardian-runtime" "$W/ctr-exg-runtime")
fi
python3 "$root/bench/interleave.py" --runs "$RUNS" --warmup 2 --export-json "$results/runtime.json" "${pairs[@]}"
python3 - "$results/runtime.json" "$results/runtime.md" "$RUNS" <<'PY'
import json, sys
res = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
lines = ["| engine + runtime | median ms | p90 ms | vs crun |", "| --- | ---: | ---: | ---: |"]
for name, r in res.items():
    engine = name.split("+")[0]
    base = res.get(engine + "+crun")
    ratio = f"{r['median'] / base['median']:.2f}x" if base else ""
    lines.append(f"| {name} | {r['median']*1e3:.0f} | {r['p90']*1e3:.0f} | {ratio} |")
text = "\n".join(lines) + f"\n\n({sys.argv[3]} interleaved rounds; `true` in a busybox image)\n"
open(sys.argv[2], "w").write(text)
print(text)
PY
