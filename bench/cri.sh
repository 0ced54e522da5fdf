#!/usr/bin/env bash
# Pod start through containerd's CRI to the container's first output (issue 46's target: <= 1.1x
# runc's): the same kubelet-shaped pod (pause, RuntimeDefault seccomp, CNI bridge) with
# runtime_handler exguardian against the node's default runtime (runc), interleaved round by
# round (bench/cri_podstart.py). Debian's containerd (1.6) with the CRI plugin is started here as
# in tests/integration/test_cri.sh: config, state and socket of its own, in a network and mount
# namespace of its own, exguardian's runtimes added by deploy/containerd/configure.sh; images
# built from busybox-static (tests/integration/oci_image.py); the handler: allowed.test the one
# domain allowed, /tmp writable.
# Then a pod's egress throughput (issue 46's target: >= 0.9x runc's): one pod per handler fetching
# the same file from a server of the egress test world (tests/integration/egress_world.sh, whose
# client namespace containerd runs in; busybox httpd in its server namespace), the exguardian pod
# through its egress holder's proxy, the runc pod straight through the pod network
# (bench/cri_egress.py).
# Writes bench/results/cri.json, cri-egress.json and cri.md.
# Usage (as root): EXG=build/exguardian RUNS=15 EGRESS_RUNS=7 SIZE_MIB=256 bash bench/cri.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
EXG=$(readlink -f "${EXG:-$root/build/exguardian}")
RUNS=${RUNS:-15}
EGRESS_RUNS=${EGRESS_RUNS:-7}
SIZE_MIB=${SIZE_MIB:-256}
results=$root/bench/results
mkdir -p "$results"
[ "$(id -u)" = 0 ] || { echo "bench: cri.sh runs as root" >&2; exit 1; }
BB=$(command -v busybox || true)
for tool in containerd ctr containerd-shim-runc-v2 crun runc nft python3; do
    command -v "$tool" >/dev/null || { echo "bench: $tool is missing (make deps)" >&2; exit 1; }
done
if [ -z "$BB" ] || ldd "$BB" >/dev/null 2>&1 || [ ! -x /usr/lib/cni/bridge ] || ! /usr/bin/python3 -c 'import grpc' 2>/dev/null; then
    echo "bench: needs busybox-static, containernetworking-plugins and python3-grpcio (make deps)" >&2; exit 1
fi
N=$(mktemp -d /tmp/exg-bench-cri.XXXXXX)
SOCK=$N/containerd.sock
PARENT=/exg-bench-cri-$$
CTD_PID=""
. "$root/tests/integration/egress_world.sh"
cleanup() {
    set +e
    [ -n "$CTD_PID" ] && kill "$CTD_PID" 2>/dev/null && wait "$CTD_PID" 2>/dev/null
    world_down
    local d
    for d in /sys/fs/cgroup/*$PARENT /sys/fs/cgroup$PARENT; do
        [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
    done
    rm -rf "$N"
}
trap cleanup EXIT

mkdir -p "$N/etc/containerd" "$N/etc/cni/net.d" "$N/bin" "$N/handlers" "$N/pods"
. "$root/tests/integration/cri_node.sh"
cri_node_config "$N" "$SOCK"
sh "$root/deploy/containerd/configure.sh" --root "$N" --cgroup-driver cgroupfs >/dev/null
cat > "$N/etc/cni/net.d/10-exg-bench.conflist" <<JSON
{"cniVersion": "0.4.0", "name": "exg-bench", "plugins": [
  {"type": "bridge", "bridge": "exgbench0", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.90.0.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}],
            "dataDir": "$N/cni-ipam"}}]}
JSON
echo '{"network": {"allowedDomains": ["allowed.test"]}, "filesystem": {"allowWrite": ["/tmp"]}, "audit": {"log": "'"$N"'/audit.jsonl"}}' \
    > "$N/handlers/default.json"
ln -s "$EXG" "$N/bin/exguardian-runtime-default"
for img in pause test; do
    r=$N/img/$img
    mkdir -p "$r/bin" "$r/etc" "$r/run" "$r/tmp" "$r/proc" "$r/sys" "$r/dev"
    cp "$BB" "$r/bin/busybox"
    for a in sh sleep echo wget cut; do ln -s busybox "$r/bin/$a"; done
done
/usr/bin/python3 "$root/tests/integration/oci_image.py" "$N/img/pause" localhost/exg-pause:1 "$N/pause.tar" /bin/sleep 2147483647
/usr/bin/python3 "$root/tests/integration/oci_image.py" "$N/img/test" localhost/exg-test:1 "$N/test.tar" /bin/sh
# containerd in the world's client namespace (as test_cri.sh): the servers are reached through it,
# the pod network routed back to it from the servers' side.
world_up
ip -n "$EGW_NS_S" route add 10.90.0.0/24 via 198.51.100.1
mkdir -p "$N/www"
head -c $((SIZE_MIB * 1024 * 1024)) /dev/urandom > "$N/www/big"
ip netns exec "$EGW_NS_S" "$BB" httpd -f -p 203.0.113.10:8080 -h "$N/www" </dev/null >/dev/null 2>&1 &
_EGW_PIDS+=($!)
disown $!  # no "Killed" notice at world_down
in_client_bg bash -c '
    n=$1
    mkdir -p /run/containerd && mount -t tmpfs -o mode=0711 tmpfs /run/containerd && mount -t tmpfs -o mode=0755 tmpfs /usr/local/bin &&
    cp -P "$n"/bin/* /usr/local/bin/ &&
    EXGUARDIAN_HANDLERS_DIR=$n/handlers exec containerd --config "$n/etc/containerd/config.toml"' _ "$N" \
    </dev/null >"$N/containerd.log" 2>&1
CTD_PID=$EGW_BG_PID
for _ in $(seq 300); do [ -S "$SOCK" ] && break; sleep 0.1; done
CTR="ctr -a $SOCK -n k8s.io"
$CTR images import "$N/pause.tar" >/dev/null
$CTR images import "$N/test.tar" >/dev/null
/usr/bin/python3 "$root/bench/cri_podstart.py" "$SOCK" "$N" "$PARENT" "$RUNS" "$results/cri.json" \
    runc= exguardian=exguardian
/usr/bin/python3 "$root/bench/cri_egress.py" "$SOCK" "$N" "$PARENT" "$EGRESS_RUNS" $((SIZE_MIB * 1024 * 1024)) \
    "$results/cri-egress.json" runc==http://203.0.113.10:8080/big exguardian=exguardian=http://allowed.test:8080/big
/usr/bin/python3 - "$results/cri.json" "$results/cri.md" "$results/cri-egress.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
e = json.load(open(sys.argv[3]))
r = d["results"]
lines = ["| runtime | pod start to first output, median ms | p90 ms | StartContainer median ms | p90 ms |",
         "| --- | ---: | ---: | ---: | ---: |"]
for name, v in r.items():
    lines.append("| %s | %.0f | %.0f | %.0f | %.0f |" % (name, v["start"]["median"] * 1e3, v["start"]["p90"] * 1e3,
                                                       v["start_container"]["median"] * 1e3, v["start_container"]["p90"] * 1e3))
ratio = r["exguardian"]["start"]["median"] / r["runc"]["start"]["median"]
text = "\n".join(lines) + "\n\nexguardian / runc, pod start: %.2fx (target <= 1.1); %d interleaved rounds\n" % (ratio, d["runs"])
er = e["results"]
text += "\n| runtime | egress MiB/s, median | min | max |\n| --- | ---: | ---: | ---: |\n"
for name, v in er.items():
    text += "| %s | %.0f | %.0f | %.0f |\n" % (name, v["median_mib_s"], v["min_mib_s"], v["max_mib_s"])
text += "\nexguardian (through its holder's proxy) / runc (direct), egress throughput: %.2fx (target >= 0.9); %d MiB, %d interleaved rounds\n" % (
    er["exguardian"]["median_mib_s"] / er["runc"]["median_mib_s"], e["size_bytes"] >> 20, e["runs"])
open(sys.argv[2], "w").write(text)
print(text)
PY
