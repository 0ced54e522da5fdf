#!/usr/bin/env bash
# Privileged tools on the microVM layer (issue 43), as ratios in one hyperfine run, every run
# restored from the guest-root template (saved by one run before the measurement):
#   guest root, true        `exguardian run --layer microvm --microvm-root -- true`: the restored
#                           guest with its scratch disk (the reference)
#   guest root, podman      the same guest running `podman run --rm --network none --rootfs /:O
#                           true` (a nested container of the root the guest sees, with podman's
#                           overlay on it: what `recommend --situation privileged-tools` prints;
#                           nothing loaded or pulled, so the ratio is the nested container's own
#                           start under TCG)
# Ratio: podman / true. TCG here (software emulation): seconds, not what KVM gives. Writes
# bench/results/microvm_privileged.json and .md. Needs podman (and crun or runc) on the host.
# Usage: EXG=build/exguardian bash bench/microvm_privileged.sh   (RUNS=N, default 5)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
EXG=$(readlink -f "${EXG:-$root/build/exguardian}")
image=${EXG_MICROVM_IMAGE_DIR:-$(dirname "$EXG")/microvm}
runs=${RUNS:-5}
results=$root/bench/results
mkdir -p "$results"
for tool in hyperfine python3 qemu-system-x86_64 podman; do
    command -v "$tool" >/dev/null || { echo "bench: $tool is missing (make deps installs it)" >&2; exit 1; }
done
[ -s "$image/vmlinux" ] || { echo "bench: no guest image in $image (run make)" >&2; exit 1; }

work=$(mktemp -d /tmp/exg-bench-microvm-priv.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/ws" "$work/snap"
chmod 755 "$work/snap"
run() {  # NAME COMMAND...: a script that runs COMMAND as guest root, restored from the template
    local name=$1; shift
    printf 'cd %q && EXG_MICROVM_SNAPSHOT_DIR=%q exec %q run --layer microvm --microvm-root -- %s\n' \
        "$work/ws" "$work/snap" "$EXG" "$*" > "$work/$name.sh"
}
run true true
run podman podman run --rm --network none --rootfs /:O true
# The template, saved once (a cold boot that saves it); podman checked once to work.
bash "$work/true.sh"
ls "$work/snap"/*.state >/dev/null
bash "$work/podman.sh" || { echo "bench: podman in the guest failed" >&2; exit 1; }
hyperfine -N --warmup 1 --runs "$runs" --export-json "$results/microvm_privileged.json" \
    -n "guest root: true (restored)" "bash $work/true.sh" \
    -n "guest root: podman run --rm --rootfs /:O true (restored)" "bash $work/podman.sh" >&2
python3 - "$results" <<'EOF2'
import json, sys
r = json.load(open(sys.argv[1] + "/microvm_privileged.json"))["results"]
base, podman = r
cpu = lambda x: x["user"] + x["system"]
lines = ["| what | median s | mean s | stddev | / true | CPU s |", "|---|---|---|---|---|---|"]
for x in r:
    lines.append(f"| {x['command']} | {x['median']:.3f} | {x['mean']:.3f} | {x['stddev']:.3f} | "
                 f"{x['median'] / base['median']:.2f} | {cpu(x):.2f} |")
lines.append("")
lines.append(f"podman run in the restored guest / the restored guest's true: {podman['median'] / base['median']:.2f} wall "
             f"(medians), {cpu(podman) / cpu(base):.2f} CPU; TCG")
text = "\n".join(lines)
open(sys.argv[1] + "/microvm_privileged.md", "w").write(text + "\n")
print(text)
EOF2
