#!/usr/bin/env bash
# A CRI test bed (issue 46): pods driven through containerd's CRI plugin the way kubelet drives
# them, with runtime_handler `exguardian`. Debian's containerd (1.6) is started here with the CRI
# plugin on a socket, root and state directories of this test's, inside the egress world's client
# network namespace (egress_world.sh) and a mount namespace of its own (the machine's containerd,
# if any, is never touched); exguardian's runtimes are added to its config.toml by
# deploy/containerd/configure.sh as on a node, and the handler link and file are where the
# drop-in names them (/usr/local/bin, a tmpfs in containerd's mount namespace). CNI: Debian's
# bridge and host-local plugins, in the world's namespace. Images: a pause image and a test image
# built here from busybox-static and imported with `ctr images import`. The client
# (cri_client.py) speaks CRI's gRPC API with messages encoded from the API's field numbers.
# Through it: RunPodSandbox as kubelet makes it (pause, RuntimeDefault seccomp, kubelet's masked
# and read-only paths, a read-only service-account volume, an emptyDir), CreateContainer and
# StartContainer, ExecSync, ContainerStatus (exit code), the CRI log file, StopContainer with a
# grace period, two containers sharing the pod's network, egress judged by the handler's policy
# (the pod network's own route out closed), planted files quarantined, and nothing left after
# RemovePodSandbox. Root only: containerd's CRI plugin, CNI and the runtime need root.
. "$(dirname "$0")/lib.sh"

if [ "$EXG_AS" != root ]; then
    echo "skip: containerd's CRI plugin, CNI and exguardian runtime run as root only (test_runtime.sh checks the user's refusal)"; exit 77
fi
need_source_tree deploy/containerd/configure.sh
BB=$(command -v busybox || true)
PY=/usr/bin/python3
for c in containerd ctr containerd-shim-runc-v2 crun nft; do
    command -v "$c" >/dev/null || { echo "skip: $c is not installed (make deps: containerd, crun, nftables)"; exit 77; }
done
if [ -z "$BB" ] || ldd "$BB" >/dev/null 2>&1 || [ ! -x /usr/lib/cni/bridge ] || [ ! -x /usr/lib/cni/host-local ] ||
    ! "$PY" -c 'import grpc' 2>/dev/null; then
    echo "skip: needs busybox-static, containernetworking-plugins and python3-grpcio (make deps)"; exit 77
fi
. "$SRC/tests/integration/egress_world.sh"
world_up || { fail "the egress world did not come up"; finish; }
HERE=$SRC/tests/integration
N=$T/node                       # the node's files
SOCK=$N/run/containerd/containerd.sock
POD_NET=10.89.0.0/24
cri() { "$PY" "$HERE/cri_client.py" "$SOCK" "$@"; }
# jget JSON EXPR: a value of a reply (python expression on r).
jget() { "$PY" -c 'import json,sys; r=json.loads(sys.argv[1]); print(eval(sys.argv[2]))' "$1" "$2"; }

# ----- the node: config.toml (paths under $N), configure.sh adds exguardian's runtimes
mkdir -p "$N/etc/containerd" "$N/etc/cni/net.d" "$N/bin" "$N/handlers" "$N/pods" "$N/kubelet"
cat > "$N/etc/containerd/config.toml" <<TOML
version = 2
root = "$N/var/lib/containerd"
state = "$N/run/containerd"

[grpc]
  address = "$SOCK"

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "$N/opt/containerd"
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "localhost/exg-pause:1"
    netns_mounts_under_state_dir = true
    disable_apparmor = true
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "$N/etc/cni/net.d"
TOML
expect_output_contains "changed:" sh "$SRC/deploy/containerd/configure.sh" --root "$N" --cgroup-driver cgroupfs
cat > "$N/etc/cni/net.d/10-exg-pod.conflist" <<JSON
{"cniVersion": "0.4.0", "name": "exg-pod", "plugins": [
  {"type": "bridge", "bridge": "exgcni0", "isGateway": true, "ipMasq": false,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_NET"}]], "routes": [{"dst": "0.0.0.0/0"}],
            "dataDir": "$N/cni-ipam"}}]}
JSON
# The pod network's own route out works in this world (the servers route $POD_NET back through
# the client side): only the runtime's wall keeps a pod from going direct.
ip -n "$EGW_NS_S" route add "$POD_NET" via 198.51.100.1
# The handler: the policy a cluster operator installs as /etc/exguardian/handlers/default.json.
cat > "$N/handlers/default.json" <<JSON
{
  "network": {"allowedDomains": ["allowed.test", "meta.test"]},
  "filesystem": {"denyRead": [], "allowWrite": ["/workspace", "/run", "/tmp"], "denyWrite": []},
  "audit": {"log": "$T/audit.jsonl"}
}
JSON
ln -s "$EXG" "$N/bin/exguardian-runtime-default"

# ----- images from local files
img_root() {  # DIR: a busybox root, /var/run a link to /run as in most images
    mkdir -p "$1/bin" "$1/etc" "$1/run" "$1/var" "$1/tmp" "$1/workspace" "$1/proc" "$1/sys" "$1/dev"
    cp "$BB" "$1/bin/busybox"
    local a
    for a in sh sleep cat echo grep ls touch mkdir id wget nc printf head kill unshare true ip; do ln -s busybox "$1/bin/$a"; done
    ln -s ../run "$1/var/run"
}
img_root "$T/img/pause"
img_root "$T/img/test"
"$PY" "$HERE/oci_image.py" "$T/img/pause" localhost/exg-pause:1 "$T/pause.tar" /bin/sleep 2147483647
"$PY" "$HERE/oci_image.py" "$T/img/test" localhost/exg-test:1 "$T/test.tar" /bin/sh

# ----- containerd: the world's client network namespace, a mount namespace of its own where
# /run/containerd (shim sockets, the runc shim's root) and /usr/local/bin (the handler's link) are
# tmpfs of its own.
in_client_bg bash -c '
    n=$1
    mount -t tmpfs -o mode=0711 tmpfs /run/containerd && mount -t tmpfs -o mode=0755 tmpfs /usr/local/bin &&
    cp -P "$n"/bin/* /usr/local/bin/ &&
    EXGUARDIAN_HANDLERS_DIR=$n/handlers exec containerd --config "$n/etc/containerd/config.toml"' _ "$N" \
    </dev/null >"$N/containerd.log" 2>&1
CTD=$EGW_BG_PID
# in_ctd CMD...: CMD in containerd's mount and network namespaces.
in_ctd() { nsenter -t "$CTD" -m -n "$@"; }
CTR=(timeout 60 ctr -a "$SOCK" -n k8s.io)
if ! wait_for 30 test -S "$SOCK"; then
    fail "containerd did not start"; note "$(tail -n 5 "$N/containerd.log")"; finish
fi
check "containerd's CRI plugin loaded with exguardian's runtime (configure.sh's tables)" bash -c \
    "${CTR[*]} plugins ls | grep -Eq '^io\.containerd\.grpc\.v1 +cri .* ok'"
expect_status 0 "${CTR[@]}" images import "$T/pause.tar"
expect_status 0 "${CTR[@]}" images import "$T/test.tar"
run cri Version '{"version": "v1"}'
check "CRI Version answers runtime.v1 (containerd)" bash -c "grep -q '\"runtime_name\": \"containerd\"' <<<\"\$1\"" _ "$OUT"
[ "$STATUS" = 0 ] || show_last
run cri Status '{}'
check "CRI Status: RuntimeReady and NetworkReady (CNI config loaded)" "$PY" -c '
import json, sys
c = {x["type"]: x.get("status", False) for x in json.loads(sys.argv[1])["status"]["conditions"]}
assert c.get("RuntimeReady") and c.get("NetworkReady"), c' "$OUT"
[ "$STATUS" = 0 ] || show_last
run cri ImageStatus '{"image": {"image": "localhost/exg-test:1"}}'
check "CRI ImageStatus sees the imported test image" bash -c "grep -q 'localhost/exg-test:1' <<<\"\$1\"" _ "$OUT"

finish
