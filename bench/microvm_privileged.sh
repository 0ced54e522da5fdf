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
# As root, a second hyperfine run measures a 10 MiB image pull (busybox and 10 MiB of random
# bytes, one layer) from a TLS registry: the egress test world's (tests/integration/
# egress_world.sh: network namespaces of its own, Debian's docker-registry, the world's CA),
# every pull into an empty store:
#   host, direct         `podman pull` on the host (the world's client namespace), no proxy
#   guest root, proxy    `exguardian run --layer microvm --microvm-root --allow-domain
#                        tp.wild.test -- podman pull ...`, restored: through the guest's
#                        capture, the virtio-serial port and the proxy
#   guest root, true     the same restored guest running `true`: its start, subtracted
# Ratio (target >= 0.8): host pull / (guest pull - guest true), i.e. the pull's throughput
# through the proxy against the host's own; under TCG podman's own work in the guest (TLS,
# sha256, gunzip, the layer's unpacking) is emulated too, so the figure bounds the proxy's
# share from below.
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
rm -f "$results/microvm_pull.json"
report() {  # the tables of both runs (the pull's when it was measured) in microvm_privileged.md
python3 - "$results" "${layer_mib:-}" <<'EOF2'
import json, os, sys
cpu = lambda x: x["user"] + x["system"]
def table(r, base):
    lines = ["| what | median s | mean s | stddev | / first | CPU s |", "|---|---|---|---|---|---|"]
    for x in r:
        lines.append(f"| {x['command']} | {x['median']:.3f} | {x['mean']:.3f} | {x['stddev']:.3f} | "
                     f"{x['median'] / base['median']:.2f} | {cpu(x):.2f} |")
    return lines + [""]
r = json.load(open(sys.argv[1] + "/microvm_privileged.json"))["results"]
base, podman = r
lines = table(r, base)
lines.append(f"podman run in the restored guest / the restored guest's true: {podman['median'] / base['median']:.2f} wall "
             f"(medians), {cpu(podman) / cpu(base):.2f} CPU; TCG")
if os.path.exists(sys.argv[1] + "/microvm_pull.json"):
    p = json.load(open(sys.argv[1] + "/microvm_pull.json"))["results"]
    host, guest, true = p
    pull = guest["median"] - true["median"]
    lines += [""] + table(p, host)
    lines.append(f"a {sys.argv[2]} MiB layer: host pull / (guest pull - guest true) = {host['median']:.3f} / {pull:.3f} = "
                 f"{host['median'] / pull:.2f}x (medians; target >= 0.8); TCG")
text = "\n".join(lines)
open(sys.argv[1] + "/microvm_privileged.md", "w").write(text + "\n")
print(text)
EOF2
}

# ---- The 10 MiB pull (root only: the test world is network namespaces).
if [ "$(id -u)" -ne 0 ]; then
    echo "bench: the pull's ratio needs root (the egress test world); skipped" >&2
    report
    exit 0
fi
here=$root/tests/integration
# shellcheck source=../tests/integration/egress_world.sh
. "$here/egress_world.sh"
# shellcheck source=../tests/integration/egress_world_secrets.sh
. "$here/egress_world_secrets.sh"
trap '_egw_exit; rm -rf "$work"' EXIT
debs=/var/cache/exguardian-tests/debs   # (run.sh's cache of unpacked packages)
if [ ! -x "$debs/docker-registry/usr/bin/docker-registry" ]; then
    debs=$work/debs
    mkdir -p "$debs/dl" && (cd "$debs/dl" && apt-get download -q docker-registry >/dev/null) \
        && dpkg-deb -x "$debs"/dl/docker-registry_*.deb "$debs/docker-registry" \
        || { echo "bench: apt-get download docker-registry failed" >&2; exit 1; }
fi
world_up && world_secrets_up && world_registry_up "$here" "$debs" || { echo "bench: the test world did not come up" >&2; exit 1; }
big=$work/big
mkdir -p "$big/bin" && cp "$(command -v busybox)" "$big/bin/" && ln -s busybox "$big/bin/sh"
head -c 10485760 /dev/urandom > "$big/ten-mib"
python3 "$here/oci_image.py" "$big" localhost/exg-big:1 "$work/big.tar" /bin/sh
in_server python3 "$here/registry_push.py" "$work/big.tar" 203.0.113.10:5000 "$EGW_DIR/secrets/ca.pem" >&2
layer_mib=$(python3 -c 'import json,sys,tarfile; t=tarfile.open(sys.argv[1]); i=json.load(t.extractfile("index.json")); m=json.load(t.extractfile("blobs/sha256/"+i["manifests"][0]["digest"][7:])); print("%.1f" % (sum(l["size"] for l in m["layers"])/1048576))' "$work/big.tar")
ref=tp.wild.test:5000/exg-big:1
mkdir -p "$work/psnap" && chmod 755 "$work/psnap"
printf 'rm -rf %q/hs && exec podman --root %q/hs/root --runroot %q/hs/run pull -q %s >/dev/null\n' "$work" "$work" "$work" "$ref" > "$work/host-pull.sh"
guest_run() {  # NAME COMMAND...
    local name=$1; shift
    printf 'cd %q && EXG_MICROVM_SNAPSHOT_DIR=%q exec %q run --layer microvm --microvm-root --allow-domain tp.wild.test -- %s\n' \
        "$work/ws" "$work/psnap" "$EXG" "$*" > "$work/$name.sh"
}
guest_run guest-pull podman pull -q "$ref"
guest_run guest-true true
# The template (a cold boot that saves it), then each command checked once.
in_client bash "$work/guest-true.sh"
in_client bash "$work/guest-pull.sh" >/dev/null || { echo "bench: the pull in the guest failed" >&2; exit 1; }
in_client bash "$work/host-pull.sh" || { echo "bench: the pull on the host failed" >&2; exit 1; }
in_client hyperfine -N --warmup 1 --runs "$runs" --export-json "$results/microvm_pull.json" \
    -n "host: podman pull (direct)" "bash $work/host-pull.sh" \
    -n "guest root: podman pull through the proxy (restored)" "bash $work/guest-pull.sh" \
    -n "guest root: true (restored)" "bash $work/guest-true.sh" >&2
report
