#!/usr/bin/env bash
# The microVM layer against a bare qemu microvm boot of the same kernel, side by side in one
# hyperfine run, with the steps between them measured on their own:
#   bare qemu            qemu-system-x86_64 -M microvm (same machine, accelerator, RAM, kernel
#                        command line essentials) with a minimal initramfs whose /init reboots at
#                        once: the cost of the guest kernel's boot itself
#   + our initramfs      the same qemu with our guest image, its init powering off at once
#                        (exg.probe=boot): unpacking our initramfs (the static agent and modules)
#   + modules            ... powering off after loading its modules (exg.probe=modules)
#   exguardian cold      `EXG_MICROVM_SNAPSHOT=off exguardian run --layer microvm -- true`: qemu
#                        jailed in the process layer, the view built and exported over 9p, the
#                        modules, the agent's round trip
#   exguardian restored  the same run restored from a saved template (snapshot.hpp), the
#                        template saved by one run before the measurement
# Ratios: exguardian cold / bare (target <= 1.3), restored / cold. TCG here (software emulation):
# the figures are seconds, not Firecracker's 125 ms under KVM. Writes bench/results/microvm.json
# and microvm.md.
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
# The bare boots: the same machine and kernel command line essentials as the layer's (qemu_command.cpp).
bare() {  # INITRAMFS EXTRA-APPEND
    cat <<EOF2
exec qemu-system-x86_64 -M microvm,acpi=on -nodefaults -no-user-config -display none -no-reboot \\
  -m 1024M -smp 1 -accel tcg,tb-size=64 -serial none -kernel $image/vmlinux -initrd $1 \\
  -append "console=ttyS0 reboot=t panic=-1 quiet loglevel=0 tsc_early_khz=$khz $2"
EOF2
}
bare "$work/initramfs.cpio" "" > "$work/bare.sh"
bare "$image/initramfs.cpio" "exg.probe=boot" > "$work/bare-ours.sh"
bare "$image/initramfs.cpio" "exg.probe=modules" > "$work/bare-modules.sh"
mkdir -p "$work/ws" "$work/snap"
chmod 755 "$work/snap"
cat > "$work/exg-cold.sh" <<EOF2
cd $work/ws && EXG_MICROVM_SNAPSHOT=off exec $EXG run --layer microvm -- true
EOF2
cat > "$work/exg-restored.sh" <<EOF2
cd $work/ws && EXG_MICROVM_SNAPSHOT_DIR=$work/snap exec $EXG run --layer microvm -- true
EOF2
# The template, saved once (a cold boot that saves it), then every measured run restores.
bash "$work/exg-restored.sh"
ls "$work/snap"/*.state >/dev/null
hyperfine -N --warmup 1 --runs "$runs" --export-json "$results/microvm.json" \
    -n "bare qemu microvm boot (minimal initramfs)" "bash $work/bare.sh" \
    -n "bare qemu, our initramfs, init ends at once" "bash $work/bare-ours.sh" \
    -n "bare qemu, our initramfs, init ends after its modules" "bash $work/bare-modules.sh" \
    -n "exguardian run --layer microvm -- true (cold boot)" "bash $work/exg-cold.sh" \
    -n "exguardian run --layer microvm -- true (restored from the template)" "bash $work/exg-restored.sh" >&2
python3 - "$results" <<'EOF2'
import json, sys
r = json.load(open(sys.argv[1] + "/microvm.json"))["results"]
bare, ours, mods, cold, restored = r
# CPU time (user + system, mean) beside the wall clock: on a loaded 2-core host TCG's wall time
# follows the load, its CPU time much less.
cpu = lambda x: x["user"] + x["system"]
lines = ["| what | median s | mean s | stddev | / bare | CPU s | CPU / bare |", "|---|---|---|---|---|---|---|"]
for x in r:
    lines.append(f"| {x['command']} | {x['median']:.3f} | {x['mean']:.3f} | {x['stddev']:.3f} | "
                 f"{x['median'] / bare['median']:.2f} | {cpu(x):.2f} | {cpu(x) / cpu(bare):.2f} |")
lines.append("")
lines.append(f"exguardian cold / bare: {cold['median'] / bare['median']:.2f} wall (medians), {cpu(cold) / cpu(bare):.2f} CPU "
             "(target <= 1.3; TCG)")
lines.append(f"exguardian restored / cold: {restored['median'] / cold['median']:.2f} wall, {cpu(restored) / cpu(cold):.2f} CPU; "
             f"restored / bare: {restored['median'] / bare['median']:.2f} wall, {cpu(restored) / cpu(bare):.2f} CPU")
lines.append(f"where the cold run's extra CPU time goes: our initramfs {cpu(ours) - cpu(bare):+.2f} s, "
             f"modules {cpu(mods) - cpu(ours):+.2f} s, jail + view + 9p + agent + command {cpu(cold) - cpu(mods):+.2f} s")
text = "\n".join(lines)
open(sys.argv[1] + "/microvm.md", "w").write(text + "\n")
print(text)
EOF2
