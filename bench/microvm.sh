#!/usr/bin/env bash
# The microVM layer against a bare qemu microvm boot of the same kernel, side by side in one
# hyperfine run:
#   bare qemu     qemu-system-x86_64 -M microvm (same machine, accelerator, RAM, kernel command
#                 line essentials) with a minimal initramfs whose /init reboots at once: the cost
#                 of the guest kernel's boot itself
#   exguardian    `exguardian run --layer microvm -- true`: qemu jailed in the process layer, the
#                 view built and exported over 9p, modules loaded, the agent's round trip
# Ratio: exguardian / bare (target <= 1.3 cold). TCG here (software emulation): the figures are
# seconds, not Firecracker's 125 ms under KVM. Writes bench/results/microvm.json and microvm.md.
# Usage: EXG=build/exguardian bash bench/microvm.sh   (RUNS=N, default 5)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
EXG=$(readlink -f "${EXG:-$root/build/exguardian}")
image=${EXG_MICROVM_IMAGE_DIR:-$(dirname "$EXG")/microvm}
runs=${RUNS:-5}
results=$root/bench/results
mkdir -p "$results"
for tool in hyperfine gcc python3 qemu-system-x86_64; do
    command -v "$tool" >/dev/null || { echo "bench: $tool is missing (make deps installs it)" >&2; exit 1; }
done
[ -s "$image/vmlinux" ] || { echo "bench: no guest image in $image (run make)" >&2; exit 1; }

work=$(mktemp -d /tmp/exg-bench-microvm.XXXXXX)
trap 'rm -rf "$work"' EXIT
# The minimal initramfs: one static /init that reboots (reboot=t + -no-reboot end qemu).
cat > "$work/init.c" <<'EOF'
#include <sys/reboot.h>
#include <unistd.h>
int main(void) { reboot(RB_AUTOBOOT); for (;;) pause(); }
EOF
gcc -O2 -static -o "$work/init" "$work/init.c"
python3 - "$work" <<'EOF'
import sys, os
w = sys.argv[1]
data = open(os.path.join(w, "init"), "rb").read()
out = bytearray()
def entry(ino, name, mode, body):
    nb = name.encode() + b"\0"
    f = [ino, mode, 0, 0, 1, 0, len(body), 0, 0, 0, 0, len(nb), 0]
    out.extend(b"070701" + b"".join(b"%08X" % v for v in f) + nb)
    out.extend(b"\0" * ((4 - (110 + len(nb)) % 4) % 4))
    out.extend(body)
    out.extend(b"\0" * ((4 - len(body) % 4) % 4))
entry(1, "init", 0o100755, data)
entry(2, "TRAILER!!!", 0, b"")
open(os.path.join(w, "initramfs.cpio"), "wb").write(out)
EOF
khz=$(awk -F: '/cpu MHz/{printf "%d", $2*1000; exit}' /proc/cpuinfo)
cat > "$work/bare.sh" <<EOF
exec qemu-system-x86_64 -M microvm,acpi=on -nodefaults -no-user-config -display none -no-reboot \\
  -m 1024M -smp 1 -accel tcg,tb-size=64 -serial none -kernel $image/vmlinux -initrd $work/initramfs.cpio \\
  -append "console=ttyS0 reboot=t panic=-1 quiet loglevel=0 tsc_early_khz=$khz"
EOF
mkdir -p "$work/ws"
cat > "$work/exg.sh" <<EOF
cd $work/ws && exec $EXG run --layer microvm -- true
EOF
hyperfine -N --warmup 1 --runs "$runs" --export-json "$results/microvm.json" \
    -n "bare qemu microvm boot" "bash $work/bare.sh" \
    -n "exguardian run --layer microvm -- true" "bash $work/exg.sh" >&2
python3 - "$results" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1] + "/microvm.json"))["results"]
bare, exg = r[0], r[1]
lines = ["| what | median s | mean s | stddev |", "|---|---|---|---|"]
for x in r:
    lines.append(f"| {x['command']} | {x['median']:.3f} | {x['mean']:.3f} | {x['stddev']:.3f} |")
lines.append(f"\nratio exguardian / bare (medians): {exg['median'] / bare['median']:.2f} (target <= 1.3; TCG)")
text = "\n".join(lines)
open(sys.argv[1] + "/microvm.md", "w").write(text + "\n")
print(text)
EOF
