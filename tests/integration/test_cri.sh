#!/usr/bin/env bash
# A CRI test bed (issue 46): pods driven through containerd's CRI plugin the way kubelet drives
# them, with runtime_handler `exguardian` (and `exguardian-gvisor` where runsc is installed).
# Debian's containerd (1.6) is started here with the CRI plugin on a socket, root and state
# directories of this test's, inside the egress world's client network namespace
# (egress_world.sh) and a mount namespace of its own (the machine's containerd, if any, is never
# touched); exguardian's runtimes are added to its config.toml by deploy/containerd/configure.sh
# as on a node, and the handlers' links are where those tables name them (/usr/local/bin, a
# tmpfs in containerd's mount namespace). The handler files are read from $N/handlers
# (EXGUARDIAN_HANDLERS_DIR in containerd's environment, which its shim passes on; a node has
# them in /etc/exguardian/handlers). CNI: Debian's bridge and host-local plugins, in the world's
# namespace. Images: a pause image and a test image built here from busybox-static
# (oci_image.py) and imported with `ctr images import`. The client (cri_client.py) speaks CRI's
# gRPC API with messages encoded from the API's field numbers. Through it: RunPodSandbox as
# kubelet makes it (pause, RuntimeDefault seccomp, kubelet's masked and read-only paths, a
# read-only service-account volume, an emptyDir; secrets, configMaps and hostPath volumes in kubelet's
# layout), CreateContainer and StartContainer, ExecSync and a streaming exec with a tty (cri_stream.py),
# ContainerStatus (exit code), the CRI log file, memory, CPU and pids limits never above the handler's
# (pod spec and UpdateContainerResources: held to the cap and audited, not refused; a fork bomb held
# under kubelet's podPidsLimit and the handler's pids), PortForward and Attach, checkpoint refused, StopContainer with a grace period, two
# containers sharing the pod's network, egress judged by the handler's policy (the pod network's
# own route out closed; a runc pod as the control that it is open), audit lines naming the pod,
# planted files quarantined, and nothing left after RemovePodSandbox. One containerd, one pod per
# handler, shared by the checks. Root only: containerd's CRI plugin, CNI and the runtime need root.
. "$(dirname "$0")/lib.sh"

# EXG_CRI_CONTAINERD=DIR: containerd, ctr and containerd-shim-runc-v2 of DIR instead of the
# installed ones (another version of Debian's, unpacked by test_cri_containerd_versions.sh).
if [ -n "${EXG_CRI_CONTAINERD:-}" ]; then PATH=$EXG_CRI_CONTAINERD:$PATH; fi
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
# cri METHOD [JSON]: one CRI call; the reply on stdout, a gRPC error on stderr (status 1). The
# calls go through one client on one channel (cri_client.py --lines, started once containerd
# is up): a python start-up with gRPC per call was a fifth of the test's time.
cri() {
    local reply req=${2:-"{}"}
    [ -n "${CRI[1]:-}" ] || { echo "cri_client: not running" >&2; return 1; }
    printf '%s %s\n' "$1" "${req//$'\n'/ }" >&"${CRI[1]}" || return 1
    IFS= read -r -t 150 reply <&"${CRI[0]}" || { echo "cri_client: $1: no reply" >&2; return 1; }
    case $reply in
        '{"error": '*) echo "cri_client: $(jget "$reply" 'r["error"]')" >&2; return 1 ;;
    esac
    printf '%s\n' "$reply"
}
# jget JSON EXPR: a value of a reply (python expression on r).
jget() { "$PY" -c 'import json,sys; r=json.loads(sys.argv[1]); print(eval(sys.argv[2]))' "$1" "$2"; }

# ----- the node: config.toml (paths under $N), configure.sh adds exguardian's runtimes
mkdir -p "$N/etc/containerd" "$N/etc/cni/net.d" "$N/bin" "$N/handlers" "$N/pods" "$N/kubelet"
. "$HERE/cri_node.sh"
cri_node_config "$N" "$SOCK"
note "$(containerd --version)"
# EXG_CRI_CONFIG_VERSION=3 (containerd 2.x): config.toml as `containerd config migrate` writes it,
# version 3 (its `imports = []` too), so configure.sh's drop-in is containerd-2.x-exguardian.toml.
if [ "${EXG_CRI_CONFIG_VERSION:-}" = 3 ]; then
    containerd --config "$N/etc/containerd/config.toml" config migrate > "$N/config-v3.toml" 2>/dev/null &&
        mv "$N/config-v3.toml" "$N/etc/containerd/config.toml"
    check "config.toml migrated to version 3 by containerd" grep -q '^version = 3' "$N/etc/containerd/config.toml"
fi
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
  "resources": {"memory": "256M", "cpus": 1, "pids": 64},
  "audit": {"log": "$T/audit.jsonl"}
}
JSON
ln -s "$EXG" "$N/bin/exguardian-runtime-default"
# A profile for pods that ask for it (exguardian.dev/profile: offline): no domain, /tmp only.
echo '{"network": {"allowedDomains": []}, "filesystem": {"allowWrite": ["/tmp"]}}' > "$N/handlers/offline.json"
# The gVisor handler: the same policy under runsc.
if command -v runsc >/dev/null; then
    # (no memory limit: runsc's sandbox as a whole would be held to it)
    "$PY" -c 'import json,sys; p=json.load(open(sys.argv[1])); del p["resources"]; p["layer"]="gvisor"; print(json.dumps(p))' \
        "$N/handlers/default.json" > "$N/handlers/gvisor.json"
    ln -s "$EXG" "$N/bin/exguardian-runtime-gvisor"
fi

# ----- images from local files
img_root() {  # DIR: a busybox root, /var/run a link to /run as in most images
    mkdir -p "$1/bin" "$1/etc" "$1/run" "$1/var" "$1/tmp" "$1/workspace" "$1/proc" "$1/sys" "$1/dev"
    cp "$BB" "$1/bin/busybox"
    local a
    for a in sh sleep cat echo grep ls touch mkdir id wget nc printf head tail kill unshare true ip stty tty httpd; do ln -s busybox "$1/bin/$a"; done
    ln -s ../run "$1/var/run"
}
img_root "$T/img/pause"
img_root "$T/img/test"
"$PY" "$HERE/oci_image.py" "$T/img/pause" localhost/exg-pause:1 "$T/pause.tar" /bin/sleep 2147483647
"$PY" "$HERE/oci_image.py" "$T/img/test" localhost/exg-test:1 "$T/test.tar" /bin/sh

# ----- containerd: the world's client network namespace, a mount namespace of its own where
# /run/containerd (shim sockets, the runc shim's root) and /usr/local/bin (the handler's link) are
# tmpfs of its own, and /etc/containerd the node's (containerd 2.x: configure.sh's drop-in in
# conf.d, imported from config.toml by its path on a node, /etc/containerd/conf.d/*.toml).
in_client_bg bash -c '
    n=$1
    mkdir -p /run/containerd && mount -t tmpfs -o mode=0711 tmpfs /run/containerd && mount -t tmpfs -o mode=0755 tmpfs /usr/local/bin &&
    { [ ! -d "$n/etc/containerd/conf.d" ] || { mkdir -p /etc/containerd && mount --bind "$n/etc/containerd" /etc/containerd; }; } &&
    cp -P "$n"/bin/* /usr/local/bin/ &&
    EXGUARDIAN_HANDLERS_DIR=$n/handlers exec containerd --config "$n/etc/containerd/config.toml"' _ "$N" \
    </dev/null >"$N/containerd.log" 2>&1
CTD=$EGW_BG_PID
# At the end (also on failure): the pods still there removed through CRI, containerd stopped, any
# process left in the pods' cgroups (all started by this test) killed by pid, the pods' parent
# cgroups removed, then the world.
PODS=()
_cri_exit() {
    local p
    for p in "${PODS[@]}"; do
        cri StopPodSandbox "{\"pod_sandbox_id\": \"$p\"}" >/dev/null 2>&1
        cri RemovePodSandbox "{\"pod_sandbox_id\": \"$p\"}" >/dev/null 2>&1
    done
    kill "$CTD" 2>/dev/null
    for p in $(cat /sys/fs/cgroup/pids/exg-cri-$$/*/*/cgroup.procs /sys/fs/cgroup/exg-cri-$$/*/*/cgroup.procs 2>/dev/null); do
        kill -9 "$p" 2>/dev/null
    done
    wait_for 20 bash -c "! kill -0 $CTD 2>/dev/null"
    local d
    for d in /sys/fs/cgroup/*/exg-cri-$$ /sys/fs/cgroup/exg-cri-$$; do
        [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
    done
    _egw_exit
}
trap _cri_exit EXIT
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
coproc CRI { exec "$PY" "$HERE/cri_client.py" "$SOCK" --lines 2>"$N/cri_client.err"; }
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

# ----- a pod as kubelet makes it
# pod_config NAME UID [ANNOTATIONS]: the PodSandboxConfig kubelet sends (ANNOTATIONS: the pod's
# own, '"key": "value", ...') (labels, log directory, cgroup parent,
# pod-level network and IPC, the container's own PID namespace, the RuntimeDefault seccomp).
pod_config() {
    cat <<JSON
{"metadata": {"name": "$1", "uid": "$2", "namespace": "exg-test", "attempt": 0},
 "hostname": "$1", "log_directory": "$N/pods/exg-test_$1_$2",
 "dns_config": {"servers": ["10.96.0.10"], "searches": ["exg-test.svc.cluster.local"], "options": ["ndots:5"]},
 "labels": {"io.kubernetes.pod.name": "$1", "io.kubernetes.pod.namespace": "exg-test", "io.kubernetes.pod.uid": "$2"},
 "annotations": {"kubernetes.io/config.source": "api", "kubernetes.io/config.seen": "2026-01-01T00:00:00Z"${3:+, $3}},
 "linux": {"cgroup_parent": "/exg-cri-$$/pod$2",
           "security_context": {"namespace_options": {"network": 0, "pid": 1, "ipc": 0}, "seccomp": {"profile_type": 0}}}}
JSON
}
# kubelet's defaults for every container (k8s.io/kubernetes pkg/securitycontext: default masked
# and read-only paths).
MASKED='["/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware"]'
READONLY='["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"]'
# container_request POD_ID POD_CONFIG NAME UID COMMAND_JSON MOUNTS_JSON [MEMORY_BYTES [CPU_QUOTA]]:
# CreateContainerRequest (MEMORY_BYTES, CPU_QUOTA: the container's memory and CPU limits, kubelet's
# from the pod spec; CPU_QUOTA in us per 100 ms).
container_request() {
    cat <<JSON
{"pod_sandbox_id": "$1", "sandbox_config": $2,
 "config": {"metadata": {"name": "$3", "attempt": 0}, "image": {"image": "localhost/exg-test:1"},
  "command": $5, "envs": [{"key": "KUBERNETES_SERVICE_HOST", "value": "10.96.0.1"}, {"key": "KUBERNETES_SERVICE_PORT", "value": "443"}],
  "mounts": $6,
  "labels": {"io.kubernetes.container.name": "$3", "io.kubernetes.pod.name": "agent", "io.kubernetes.pod.namespace": "exg-test", "io.kubernetes.pod.uid": "$4"},
  "annotations": {"io.kubernetes.container.restartCount": "0", "io.kubernetes.container.terminationMessagePath": "/dev/termination-log"},
  "log_path": "$3/0.log",
  "linux": {"resources": {"cpu_period": 100000, "cpu_shares": 2, "oom_score_adj": 1000${7:+, \"memory_limit_in_bytes\": $7}${8:+, \"cpu_quota\": $8}},
            "security_context": {"namespace_options": {"network": 0, "pid": 1, "ipc": 0},
                                 "masked_paths": $MASKED, "readonly_paths": $READONLY,
                                 "seccomp": {"profile_type": 0}}}}}
JSON
}
# start_container POD_ID POD_CONFIG NAME UID COMMAND_JSON MOUNTS_JSON: prints the container's id.
start_container() {
    local id r
    r=$(cri CreateContainer "$(container_request "$@")") && id=$(jget "$r" 'r["container_id"]') &&
        [ -n "$id" ] && cri StartContainer "{\"container_id\": \"$id\"}" >/dev/null && echo "$id"
}
# exec_sync ID SCRIPT: ExecSync of sh -c SCRIPT; OUT = stdout + stderr, STATUS = its exit code.
exec_sync() {
    local r
    r=$(cri ExecSync "$("$PY" -c 'import json,sys; print(json.dumps({"container_id": sys.argv[1], "cmd": ["sh", "-c", sys.argv[2]], "timeout": 30}))' "$1" "$2")")
    OUT=$(jget "$r" 'r.get("stdout", "") + r.get("stderr", "")') STATUS=$(jget "$r" 'r.get("exit_code", 0)')
}
container_state() {  # ID: "STATE EXIT_CODE REASON" of ContainerStatus
    jget "$(cri ContainerStatus "{\"container_id\": \"$1\"}")" \
        '"%s %s %s" % (r["status"].get("state", 0), r["status"].get("exit_code", 0), r["status"].get("reason", ""))'
}
# (no pipeline around cri: a pipeline's subshells do not have the client's descriptors)
state_of() { local s; s=$(container_state "$1") && echo "${s%% *}"; }
exited() { [ "$(state_of "$1")" = 2 ]; }

POD_UID=$(cat /proc/sys/kernel/random/uuid)
PODDIR=$N/kubelet/pods/$POD_UID
# The volumes kubelet makes for the pod: the projected service-account token (read-only), an
# emptyDir, its managed /etc/hosts and the termination log; for the agent also a secret and a
# configMap (read-only, as kubelet always mounts them) and hostPath volumes.
SA=$PODDIR/volumes/kubernetes.io~projected/kube-api-access-exg
ED=$PODDIR/volumes/kubernetes.io~empty-dir/data
SECRET=$PODDIR/volumes/kubernetes.io~secret/creds
CM=$PODDIR/volumes/kubernetes.io~configmap/app-config
HP=$T/host-paths                 # hostPath volumes' directories on the node
mkdir -p "$ED" "$PODDIR/containers/agent" "$PODDIR/containers/sidecar" "$PODDIR/containers/once" \
    "$HP/ro" "$HP/rw-in" "$HP/rw-out" "$HP/rw-ctl"
# atomic_volume DIR KEY=VALUE...: kubelet's atomic writer's layout (secret, configMap, projected):
# the files in a timestamped directory, ..data a link to it, each key a link through ..data.
atomic_volume() {
    local d=$1 ts=..2026_01_01_00_00_00.000000001 kv; shift
    mkdir -p "$d/$ts"
    for kv; do printf '%s\n' "${kv#*=}" > "$d/$ts/${kv%%=*}"; ln -s "..data/${kv%%=*}" "$d/${kv%%=*}"; done
    ln -s "$ts" "$d/..data"
}
atomic_volume "$SA" token=token-of-agent namespace=exg-test ca.crt=not-a-real-ca
atomic_volume "$SECRET" password=s3cr3t-of-agent
atomic_volume "$CM" settings.conf=mode=agent
echo host-ro-file > "$HP/ro/file"; echo host-rw-out-file > "$HP/rw-out/file"; echo host-rw-ctl-file > "$HP/rw-ctl/file"
chmod 777 "$ED" "$HP/rw-in"
printf '127.0.0.1 localhost\n' > "$PODDIR/etc-hosts"
: > "$PODDIR/containers/agent/0000"; : > "$PODDIR/containers/sidecar/0000"; : > "$PODDIR/containers/once/0000"
mounts() {  # CONTAINER [MORE]: kubelet's mounts for it (MORE: further mounts, JSON objects)
    cat <<JSON
[${2:+$2,}{"container_path": "/workspace/data", "host_path": "$ED"},
 {"container_path": "/var/run/secrets/kubernetes.io/serviceaccount", "host_path": "$SA", "readonly": true},
 {"container_path": "/etc/hosts", "host_path": "$PODDIR/etc-hosts"},
 {"container_path": "/dev/termination-log", "host_path": "$PODDIR/containers/$1/0000"}]
JSON
}
# The agent's other volumes: a secret under the allowWrite /workspace (kubelet's read-only holds
# there too), a configMap in /etc, a read-only hostPath, a writable hostPath inside allowWrite
# (the node's directory written) and one outside it (the handler's policy makes it read-only).
AGENT_VOLUMES=$(cat <<JSON
{"container_path": "/workspace/creds", "host_path": "$SECRET", "readonly": true},
 {"container_path": "/etc/app", "host_path": "$CM", "readonly": true},
 {"container_path": "/mnt/host-ro", "host_path": "$HP/ro", "readonly": true},
 {"container_path": "/workspace/host-rw", "host_path": "$HP/rw-in"},
 {"container_path": "/mnt/host-rw", "host_path": "$HP/rw-out"}
JSON
)
POD_CFG=$(pod_config agent "$POD_UID")
# kubelet's podPidsLimit: kubelet writes it into the pod's cgroup (pids.max) before
# RunPodSandbox (CRI has no pids field; a container's spec names none); the pod's containers
# are made below it.
POD_PIDS=200
if [ -d /sys/fs/cgroup/pids ]; then POD_CG=/sys/fs/cgroup/pids/exg-cri-$$/pod$POD_UID
else POD_CG=/sys/fs/cgroup/exg-cri-$$/pod$POD_UID; mkdir -p "${POD_CG%/*}" && echo +pids > "${POD_CG%/*}/cgroup.subtree_control"; fi
mkdir -p "$POD_CG" && echo "$POD_PIDS" > "$POD_CG/pids.max"
: > "$T/audit.jsonl"
run cri RunPodSandbox "{\"config\": $POD_CFG, \"runtime_handler\": \"exguardian\"}"
POD=$(jget "$OUT" 'r.get("pod_sandbox_id", "")' 2>/dev/null)
check "RunPodSandbox with runtime_handler exguardian (pause, RuntimeDefault seccomp): a pod id" test -n "$POD"
PODS+=("$POD")
[ -n "$POD" ] || { show_last; note "$(grep -E 'level=(error|warning)' "$N/containerd.log" | tail -n 5)"; finish; }
run cri PodSandboxStatus "{\"pod_sandbox_id\": \"$POD\"}"
POD_IP=$(jget "$OUT" 'r["status"].get("network", {}).get("ip", "")')
check "PodSandboxStatus: ready, handler exguardian, an IP of the CNI bridge's ($POD_IP)" "$PY" -c '
import json, sys, ipaddress
s = json.loads(sys.argv[1])["status"]
assert s.get("state", 0) == 0 and s.get("runtime_handler") == "exguardian", s
assert ipaddress.ip_address(s["network"]["ip"]) in ipaddress.ip_network(sys.argv[2]), s' "$OUT" "$POD_NET"

AGENT=$(start_container "$POD" "$POD_CFG" agent "$POD_UID" \
    '["/bin/sh", "-c", "trap \"echo got-term; exit 0\" TERM; echo first-line; echo err-line >&2; while :; do sleep 1 & wait $!; done"]' \
    "$(mounts agent "$AGENT_VOLUMES")")
check "CreateContainer and StartContainer: the agent container runs" test -n "$AGENT"
[ -n "$AGENT" ] || { note "$(grep -E 'level=(error|warning)' "$N/containerd.log" | tail -n 5)"; finish; }
check "ContainerStatus: running" test "$(state_of "$AGENT")" = 1

# The walls, from inside, through ExecSync.
exec_sync "$AGENT" 'grep -E "^(CapEff|NoNewPrivs|Seccomp|Seccomp_filters):" /proc/self/status
unshare -U true 2>/dev/null || echo userns-refused
touch /bin/planted 2>/dev/null || echo root-ro
cat /var/run/secrets/kubernetes.io/serviceaccount/token
echo x > /var/run/secrets/kubernetes.io/serviceaccount/token 2>/dev/null || echo token-ro
echo from-pod > /workspace/data/from-pod && echo emptydir-ok
echo x > /workspace/scratch && echo workspace-ok
[ -s /proc/kcore ] || echo kcore-masked
echo 1 > /proc/sys/kernel/panic 2>/dev/null || echo procsys-ro
echo exit-5; exit 5'
check "ExecSync: the command's exit code (5) is ExecSync's" test "$STATUS" = 5
check "agent: no capabilities, no_new_privs, seccomp filter mode (the engine's and ExGuardian's stacked)" bash -c '
    grep -q "CapEff:.0000000000000000" <<<"$1" && grep -q "NoNewPrivs:.1" <<<"$1" && grep -q "Seccomp:.2" <<<"$1" &&
    [ "$(sed -n "s/^Seccomp_filters:[[:space:]]*//p" <<<"$1")" -ge 2 ]' _ "$OUT"
check "agent: user namespaces refused, read-only root, /proc/kcore masked, /proc/sys read-only" bash -c '
    grep -q userns-refused <<<"$1" && grep -q root-ro <<<"$1" && grep -q kcore-masked <<<"$1" && grep -q procsys-ro <<<"$1"' _ "$OUT"
check "agent: the service-account token at /var/run/secrets/... is there and read-only" bash -c '
    grep -q token-of-agent <<<"$1" && grep -q token-ro <<<"$1"' _ "$OUT"
check "agent: the emptyDir at /workspace/data written, the write on the host; /workspace writable" bash -c '
    grep -q emptydir-ok <<<"$1" && grep -q workspace-ok <<<"$1" && grep -qx from-pod "$2/from-pod"' _ "$OUT" "$ED"
grep -q exit-5 <<<"$OUT" || note "$OUT"
check "the token's host file unchanged" grep -qx token-of-agent "$SA/token"

# The other volumes, where the pod spec puts them, through kubelet's ..data links.
exec_sync "$AGENT" 'cat /var/run/secrets/kubernetes.io/serviceaccount/namespace
[ -L /var/run/secrets/kubernetes.io/serviceaccount/..data ] && echo sa-atomic-layout
cat /workspace/creds/password /etc/app/settings.conf /mnt/host-ro/file
echo x > /workspace/creds/password 2>/dev/null || echo secret-ro; touch /workspace/creds/new 2>/dev/null || echo secret-dir-ro
echo x > /etc/app/settings.conf 2>/dev/null || echo configmap-ro
echo x > /mnt/host-ro/file 2>/dev/null || echo hostro-ro
echo pod-wrote > /workspace/host-rw/out && echo hostrw-in-ok
echo x > /mnt/host-rw/file 2>/dev/null || echo hostrw-out-ro; touch /mnt/host-rw/new 2>/dev/null || echo hostrw-out-new-ro'
check "agent: the projected token's namespace key through kubelet's ..data link" bash -c '
    grep -qx exg-test <<<"$1" && grep -q sa-atomic-layout <<<"$1"' _ "$OUT"
check "agent: a secret at /workspace/creds and a configMap at /etc/app read through ..data, both read-only" bash -c '
    grep -qx s3cr3t-of-agent <<<"$1" && grep -qx mode=agent <<<"$1" &&
    grep -q secret-ro <<<"$1" && grep -q secret-dir-ro <<<"$1" && grep -q configmap-ro <<<"$1"' _ "$OUT"
check "agent: a read-only hostPath read and not written; a writable hostPath inside allowWrite written on the node" bash -c '
    grep -qx host-ro-file <<<"$1" && grep -q hostro-ro <<<"$1" && grep -q hostrw-in-ok <<<"$1" && grep -qx pod-wrote "$2/rw-in/out"' \
    _ "$OUT" "$HP"
check "agent: a writable hostPath outside allowWrite made read-only by the handler's policy, the node's files unchanged" bash -c '
    grep -q hostrw-out-ro <<<"$1" && grep -q hostrw-out-new-ro <<<"$1" &&
    grep -qx host-rw-out-file "$2/rw-out/file" && [ ! -e "$2/rw-out/new" ] &&
    grep -qx s3cr3t-of-agent "$3/password" && [ ! -e "$3/new" ]' _ "$OUT" "$HP" "$SECRET"
grep -q hostrw-in-ok <<<"$OUT" || note "$OUT"

# A hostPath of containerd's own socket (the classic way out of a pod): the handler's policy
# lists no unix socket, so the container does not start, and says why.
mkdir -p "$PODDIR/containers/sockpod"; : > "$PODDIR/containers/sockpod/0000"
r=$(cri CreateContainer "$(container_request "$POD" "$POD_CFG" sockpod "$POD_UID" '["/bin/sleep", "600"]' \
    "$(mounts sockpod "{\"container_path\": \"/var/run/containerd.sock\", \"host_path\": \"$SOCK\"}")")") &&
    SOCK_C=$(jget "$r" 'r["container_id"]')
run cri StartContainer "{\"container_id\": \"${SOCK_C:-none}\"}"
check "a hostPath of containerd's socket: StartContainer refused, naming network.allowUnixSockets" bash -c '
    [ "$1" != 0 ] && grep -q "a host socket; the handler.s policy must list it in network.allowUnixSockets" <<<"$2"' _ "$STATUS" "$ERR"
[ -n "${SOCK_C:-}" ] && cri RemoveContainer "{\"container_id\": \"$SOCK_C\"}" >/dev/null

# A streaming exec with a tty (kubectl exec -it): CRI's Exec gives a URL on containerd's
# streaming server (in its network namespace), spoken as kubectl does (WebSocket,
# v4.channel.k8s.io, cri_stream.py): a line on stdin, a resize to 100x40 on the resize channel.
# (A tty without stdin, which kubectl never asks for, gives no output even on runc here.)
TTY_CMD='tty; [ -t 1 ] && echo on-a-tty; grep NoNewPrivs /proc/self/status; read l; echo "got:$l"
n=0; while [ "$(stty size)" != "40 100" ] && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done; echo size $(stty size); exit 3'
r=$(cri Exec "$("$PY" -c 'import json,sys; print(json.dumps({"container_id": sys.argv[1], "cmd": ["sh", "-c", sys.argv[2]], "tty": True, "stdin": True, "stdout": True}))' "$AGENT" "$TTY_CMD")") &&
    URL=$(jget "$r" 'r["url"]')
check "CRI Exec with tty: a URL on containerd's streaming server" grep -q '^http://127\.0\.0\.1:[0-9]*/exec/' <<<"${URL:-}"
run in_ctd "$PY" "$HERE/cri_stream.py" "${URL:-none}" --resize 100x40 --stdin $'line-in\n'
check "streaming exec with a tty: the command on a pty, walled (no_new_privs), its stdin read, resized to 40x100, its exit status 3" bash -c '
    [ "$1" = 3 ] && grep -q "^/dev/pts/" <<<"$2" && grep -q on-a-tty <<<"$2" && grep -q "NoNewPrivs:.1" <<<"$2" &&
    grep -q "got:line-in" <<<"$2" &&
    grep -q "size 40 100" <<<"$2"' _ "$STATUS" "$OUT"
grep -q "size 40 100" <<<"$OUT" || note "status $STATUS: $OUT $ERR"

# Memory-preserving suspend (checkpoint, as runc defines it) through containerd: refused with
# the reason; the agent runs on (containerd paused it around the attempt and resumed it).
run "${CTR[@]}" tasks checkpoint "$AGENT"
check "ctr tasks checkpoint: refused, 'checkpoint: not supported' and why" bash -c '
    [ "$1" != 0 ] && grep -q "checkpoint: not supported: CRIU does not save" <<<"$2$3"' _ "$STATUS" "$OUT" "$ERR"
[ "$STATUS" != 0 ] && grep -q "not supported" <<<"$OUT$ERR" || note "status $STATUS: $OUT $ERR"
exec_sync "$AGENT" 'echo still-running'
check "the agent still runs after the refused checkpoint" test "$STATUS $OUT" = "0 still-running"
AGENT_LOG=$N/pods/exg-test_agent_$POD_UID/agent/0.log
check "the CRI log file has the container's stdout and stderr lines (kubelet's format)" bash -c '
    grep -Eq "^[0-9TZ:.+-]+ stdout F first-line$" "$1" && grep -Eq "^[0-9TZ:.+-]+ stderr F err-line$" "$1"' _ "$AGENT_LOG"

# Egress, judged by the handler's policy: allowed.test through the container's proxy; metadata
# (by address and by a name resolving to it) and a name not allowed refused; the pod network's
# own route out (CNI's default route, which works in this world: see the control pod below) closed.
# (No -T for busybox's wget: with a proxy it segfaults here; ExecSync's timeout bounds it.)
conns_before=$(conn_log_count '^203\.0\.113\.10:80 ')
exec_sync "$AGENT" 'wget -q -O - http://allowed.test/ 2>&1
wget -q -O - http://169.254.169.254/ >/dev/null 2>&1 || echo metadata-refused
wget -q -O - http://meta.test/ >/dev/null 2>&1 || echo metaname-refused
wget -q -O - http://denied.test/ >/dev/null 2>&1 || echo denied-refused
{ printf "GET / HTTP/1.0\r\n\r\n" | nc -w 2 203.0.113.10 80 2>&1 | grep -q hello && echo direct-reached || echo direct-refused; } &
{ printf "GET / HTTP/1.0\r\n\r\n" | nc -w 2 169.254.169.254 80 2>&1 | grep -q hello && echo direct-metadata-reached || echo direct-metadata-refused; } &
wait'
check "agent: allowed.test reached through the container's proxy" grep -q 'hello from 203.0.113.10' <<<"$OUT"
check "agent: 169.254.169.254, meta.test (resolves to it) and denied.test refused by the proxy" bash -c '
    grep -q metadata-refused <<<"$1" && grep -q metaname-refused <<<"$1" && grep -q denied-refused <<<"$1"' _ "$OUT"
check "agent: the pod network's own route out closed (direct to 203.0.113.10 and 169.254.169.254)" bash -c '
    grep -q direct-refused <<<"$1" && grep -q direct-metadata-refused <<<"$1"' _ "$OUT"
check "the servers saw one connection from the pod (the proxy's), none direct" \
    test "$(( $(conn_log_count '^203\.0\.113\.10:80 ') - conns_before ))" = 1
check "audit: allowed.test allowed and 169.254.169.254 refused, tagged with the container id and handler" \
    audit_has "$T/audit.jsonl" "{\"sandbox\": \"$AGENT\", \"host\": \"allowed.test\", \"decision\": \"allowed\", \"handler\": \"default\"}" \
    "{\"sandbox\": \"$AGENT\", \"host\": \"169.254.169.254\", \"decision\": \"refused\"}"
check "audit: the agent's lines name the pod's namespace, the pod and the container (from CRI's annotations)" \
    audit_has "$T/audit.jsonl" "{\"sandbox\": \"$AGENT\", \"host\": \"allowed.test\", \"pod_namespace\": \"exg-test\", \"pod\": \"agent\", \"container\": \"agent\"}"

# A second container of the pod: the same network (the pause container's), its own proxy.
SIDECAR=$(start_container "$POD" "$POD_CFG" sidecar "$POD_UID" '["/bin/sh", "-c", "exec nc -ll -p 8080 -e echo from-sidecar"]' \
    "$(mounts sidecar)" $((1024 * 1024 * 1024)) 400000)
check "a second container (sidecar) in the pod runs" test -n "$SIDECAR"
exec_sync "$AGENT" 'for i in 1 2 3 4 5 6 7 8 9 10; do nc -w 2 127.0.0.1 8080 </dev/null 2>/dev/null | grep . && break; sleep 0.3; done'
check "agent reaches the sidecar's listener on the pod's loopback (one network namespace)" grep -q from-sidecar <<<"$OUT"
exec_sync "$SIDECAR" 'wget -q -O - http://allowed.test/ 2>&1; ip -4 -o addr show 2>/dev/null | grep -v " lo "'
check "sidecar: allowed.test reached through its own proxy, the pod's IP ($POD_IP) on its interface" bash -c '
    grep -q "hello from 203.0.113.10" <<<"$1" && grep -q "inet $2/" <<<"$1"' _ "$OUT" "$POD_IP"

# kubectl port-forward: CRI PortForward's URL on containerd's streaming server, spoken as
# kubelet's WebSocket port forwarding (cri_stream.py --port-forward): containerd connects to the
# port on the pod network namespace's loopback, where the sidecar listens.
r=$(cri PortForward "{\"pod_sandbox_id\": \"$POD\", \"port\": [8080]}") && URL=$(jget "$r" 'r["url"]')
run in_ctd "$PY" "$HERE/cri_stream.py" "${URL:-none}" --port-forward --until from-sidecar
check "PortForward to the pod's port 8080: the sidecar's listener answers through containerd's stream" bash -c '
    [ "$1" = 0 ] && grep -q from-sidecar <<<"$2"' _ "$STATUS" "$OUT"
[ "$STATUS" = 0 ] || note "status $STATUS: $OUT $ERR"
# Probes from the node, as kubelet makes them: from the node's network namespace (containerd's,
# where kubelet runs) to the pod's IP. tcpSocket: a connection to the sidecar's port 8080;
# httpGet: GET /healthz (kubelet's User-Agent) to a server the agent starts on port 8081, success
# a status from 200 to 399. The holder's table lets replies to connections from outside pass;
# the pod's own connections out stay refused: to the node (a listener on the bridge's gateway
# address, which the node itself and the runc control pod below reach) and the metadata address.
exec_sync "$AGENT" 'mkdir -p /tmp/www && echo healthy > /tmp/www/healthz && httpd -p 8081 -h /tmp/www && echo httpd-up'
check "agent: an HTTP server on the pod's port 8081 (busybox httpd, for kubelet's httpGet probe)" grep -q httpd-up <<<"$OUT"
probe() {  # tcp IP PORT | http URL: as kubelet's prober, from containerd's (the node's) network namespace
    in_ctd "$PY" -c '
import socket, sys, urllib.request
if sys.argv[1] == "tcp":
    socket.create_connection((sys.argv[2], int(sys.argv[3])), timeout=5).close(); print("tcp-open")
else:
    r = urllib.request.build_opener(urllib.request.ProxyHandler({})).open(
        urllib.request.Request(sys.argv[2], headers={"User-Agent": "kube-probe/1.31"}), timeout=5)
    assert 200 <= r.status < 400, r.status
    print("http", r.status, r.read().decode().strip())' "$@"
}
run probe tcp "$POD_IP" 8080
check "tcpSocket probe from the node to the pod's IP ($POD_IP:8080, the sidecar's port): connected" test "$STATUS $OUT" = "0 tcp-open"
[ "$STATUS" = 0 ] || show_last
run probe http "http://$POD_IP:8081/healthz"
check "httpGet probe from the node to http://$POD_IP:8081/healthz: 200 and the agent's page" test "$STATUS $OUT" = "0 http 200 healthy"
[ "$STATUS" = 0 ] || show_last
run probe tcp "$POD_IP" 8099
check "tcpSocket probe to a port nothing in the pod listens on: fails (the probe can fail)" test "$STATUS" != 0
# kubelet's exec probe is ExecSync with the probe's timeoutSeconds: a probe command that runs
# past it is an error (the probe failed), not a success.
run cri ExecSync "{\"container_id\": \"$AGENT\", \"cmd\": [\"sleep\", \"30\"], \"timeout\": 1}"
check "exec probe past its timeout (ExecSync, 1 s, of sleep 30): an error naming the timeout" bash -c '
    [ "$1" != 0 ] && grep -Eqi "timeout|deadline" <<<"$2"' _ "$STATUS" "$ERR"
[ "$STATUS" != 0 ] || show_last
# The node's listener on the pod network's gateway address (the bridge, in the node's namespace).
NODE_IP=${POD_NET%.0/24}.1
in_ctd "$BB" nc -ll -p 9099 -e echo node-answer </dev/null >/dev/null 2>&1 &
NODE_LISTENER=$!
world_track "$NODE_LISTENER"
wait_for 10 in_ctd "$PY" -c 'import socket,sys; socket.create_connection((sys.argv[1], 9099), timeout=2)' "$NODE_IP" 2>/dev/null
exec_sync "$AGENT" "nc -w 2 $NODE_IP 9099 </dev/null 2>&1 | grep -q node-answer && echo node-reached || echo node-refused
wget -q -O - http://$NODE_IP:9099/ >/dev/null 2>&1; echo proxied-tried"
check "while the probes pass, the pod's own connection to the node ($NODE_IP:9099) is refused (169.254.169.254's above)" \
    bash -c 'grep -q node-refused <<<"$1" && grep -q proxied-tried <<<"$1"' _ "$OUT"
check "audit: the node's address asked of the agent's proxy refused" \
    audit_has "$T/audit.jsonl" "{\"sandbox\": \"$AGENT\", \"host\": \"$NODE_IP\", \"decision\": \"refused\"}"
grep -q node-refused <<<"$OUT" || note "$OUT"

# kubectl attach: a container with stdin open (the pod spec's stdin: true), CRI Attach's URL,
# stdin sent and the container's answer read on stdout, as runc's containers through the shim.
mkdir -p "$PODDIR/containers/talker"; : > "$PODDIR/containers/talker/0000"
r=$(cri CreateContainer "$(container_request "$POD" "$POD_CFG" talker "$POD_UID" \
    '["/bin/sh", "-c", "while read l; do echo heard:$l; grep NoNewPrivs /proc/self/status; done"]' "$(mounts talker)" |
    "$PY" -c 'import json,sys; r=json.load(sys.stdin); r["config"]["stdin"]=True; print(json.dumps(r))')") &&
    TALKER=$(jget "$r" 'r["container_id"]') && cri StartContainer "{\"container_id\": \"$TALKER\"}" >/dev/null
r=$(cri Attach "{\"container_id\": \"${TALKER:-none}\", \"stdin\": true, \"stdout\": true, \"stderr\": true}") && URL=$(jget "$r" 'r["url"]')
run in_ctd "$PY" "$HERE/cri_stream.py" "${URL:-none}" --stdin $'hello-attach\n' --until NoNewPrivs
check "Attach (stdin and stdout) to a running container: its stdin read, its answer from a walled process (no_new_privs)" bash -c '
    [ "$1" = 0 ] && grep -q heard:hello-attach <<<"$2" && grep -q "NoNewPrivs:.1" <<<"$2"' _ "$STATUS" "$OUT"
[ "$STATUS" = 0 ] || note "status $STATUS: $OUT $ERR"
if [ -n "${TALKER:-}" ]; then
    cri StopContainer "{\"container_id\": \"$TALKER\", \"timeout\": 1}" >/dev/null
    cri RemoveContainer "{\"container_id\": \"$TALKER\"}" >/dev/null
fi

# A container that ends by itself: ContainerStatus gives its exit code.
ONCE=$(start_container "$POD" "$POD_CFG" once "$POD_UID" '["/bin/sh", "-c", "echo bye; exit 7"]' "$(mounts once)")
wait_for 10 exited "$ONCE"
check "a container that exits 7: ContainerStatus exited, exit code 7" test "$(container_state "$ONCE")" = "2 7 Error"

# Memory: the smaller of the pod spec's limit and the handler's (256M). The agent's pod spec
# names none (kubelet's 0): the handler's holds. A container whose spec says 32 MiB gets that,
# and when it goes past it (tail keeps its one endless line of /dev/zero in memory; as the
# container's pid 1 it is the one killed), ContainerStatus says OOMKilled.
mem_limit_of() {  # ID: memory.limit_in_bytes of the container's cgroup (v1 memory or v2 memory.max)
    local d
    d=$(find /sys/fs/cgroup/memory/exg-cri-$$ /sys/fs/cgroup/exg-cri-$$ -type d -name "$1" 2>/dev/null | head -n 1)
    [ -n "$d" ] && cat "$d/memory.limit_in_bytes" 2>/dev/null || cat "$d/memory.max" 2>/dev/null
}
check "the agent (no limit in its pod spec) held to the handler's 256M" test "$(mem_limit_of "$AGENT")" = $((256 * 1024 * 1024))
check "the sidecar (1 GiB in its pod spec, above the handler's) held to the handler's 256M" \
    test "$(mem_limit_of "$SIDECAR")" = $((256 * 1024 * 1024))
# containerd sets the memory and swap limit to the pod spec's memory (so that it does not swap):
# held with the memory, else 1 GiB asked could become 256M of memory and 768M of swap.
memsw_of() {  # ID: memory and swap together (v1 memory.memsw.limit_in_bytes; v2: memory.max + memory.swap.max)
    local d
    d=$(find /sys/fs/cgroup/memory/exg-cri-$$ /sys/fs/cgroup/exg-cri-$$ -type d -name "$1" 2>/dev/null | head -n 1)
    if [ -f "$d/memory.memsw.limit_in_bytes" ]; then cat "$d/memory.memsw.limit_in_bytes"
    elif [ -f "$d/memory.swap.max" ]; then
        local m sw; m=$(cat "$d/memory.max") sw=$(cat "$d/memory.swap.max")
        if [ "$m" = max ] || [ "$sw" = max ]; then echo unlimited; else echo $((m + sw)); fi
    else echo no-swap-accounting; fi
}
SW=$(memsw_of "$SIDECAR")
if [ "$SW" = no-swap-accounting ]; then
    note "no swap accounting in this kernel's cgroups: the sidecar's memory and swap limit not checked"
else
    check "the sidecar's memory and swap together held to the handler's 256M (containerd asked 1 GiB)" test "$SW" = $((256 * 1024 * 1024))
fi
cpu_quota_of() {  # ID: the CFS quota of the container's cgroup, us per 100 ms (v1 cpu or v2 cpu.max)
    local d
    d=$(find /sys/fs/cgroup/cpu,cpuacct/exg-cri-$$ /sys/fs/cgroup/cpu/exg-cri-$$ /sys/fs/cgroup/exg-cri-$$ -type d -name "$1" 2>/dev/null | head -n 1)
    [ -n "$d" ] && { cat "$d/cpu.cfs_quota_us" 2>/dev/null || cut -d" " -f1 "$d/cpu.max" 2>/dev/null; }
}
# CPU: the handler's 1 CPU (100000 us per 100 ms): the agent's pod spec names no limit, the
# sidecar's asks for 4.
check "CPU: the agent (no limit in its pod spec) and the sidecar (4 CPUs asked) held to the handler's 1 CPU" bash -c '
    [ "$1" = 100000 ] && [ "$2" = 100000 ]' _ "$(cpu_quota_of "$AGENT")" "$(cpu_quota_of "$SIDECAR")"
check "audit: the sidecar's pod spec (1 GiB, 4 CPUs) held to the handler's at create, one line naming it" "$PY" -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
l = [x for x in lines if x.get("sandbox") == sys.argv[2] and x.get("event") == "resources_capped" and x.get("verb") == "create"]
assert len(l) == 1 and l[0].get("container") == "sidecar" and l[0].get("pod") == "agent", l
c = {x["field"]: (x["asked"], x["applied"]) for x in l[0]["changes"]}
assert c["memory.limit"] == (1 << 30, 256 << 20) and c["cpu.quota"] == (400000, 100000), c
assert c.get("memory.swap", (0, 256 << 20))[1] == 256 << 20, c' "$T/audit.jsonl" "$SIDECAR"
# UpdateContainerResources (kubelet's in-place resize) as create: each limit the smaller of the
# one asked and the handler's, never above it, and not refused: containerd sends each update
# with the figures of the container's spec it keeps (the sidecar's 4 CPUs with every later
# update), so a refusal would have refused every later resize of an over-asking pod. What was
# held is in the audit log, tagged with the pod and the container.
run cri UpdateContainerResources "{\"container_id\": \"$AGENT\", \"linux\": {\"cpu_period\": 100000, \"cpu_shares\": 2, \"cpu_quota\": 400000}}"
check "UpdateContainerResources of the agent to 4 CPUs: done, held to the handler's 1 CPU" bash -c '
    [ "$1" = 0 ] && [ "$2" = 100000 ]' _ "$STATUS" "$(cpu_quota_of "$AGENT")"
[ "$STATUS" = 0 ] || note "$ERR"
check "audit: the resize held to the cap (asked 400000 us, 100000 applied), naming the pod and the container" \
    audit_has "$T/audit.jsonl" "{\"sandbox\": \"$AGENT\", \"event\": \"resources_capped\", \"verb\": \"update\", \"pod\": \"agent\", \"container\": \"agent\", \"handler\": \"default\", \"changes\": [{\"field\": \"cpu.quota\", \"asked\": 400000, \"applied\": 100000}]}"
run cri UpdateContainerResources "{\"container_id\": \"$SIDECAR\", \"linux\": {\"cpu_period\": 100000, \"cpu_shares\": 2, \"memory_limit_in_bytes\": $((1024 * 1024 * 1024))}}"
check "UpdateContainerResources of the sidecar to 1 GiB: done, held to the handler's 256M" bash -c '
    [ "$1" = 0 ] && [ "$2" = $((256 * 1024 * 1024)) ]' _ "$STATUS" "$(mem_limit_of "$SIDECAR")"
[ "$STATUS" = 0 ] || note "$ERR"
run cri UpdateContainerResources "{\"container_id\": \"$SIDECAR\", \"linux\": {\"cpu_period\": 100000, \"cpu_shares\": 2, \"memory_limit_in_bytes\": $((128 * 1024 * 1024))}}"
check "UpdateContainerResources of the sidecar (4 CPUs in its pod spec, re-sent by containerd) to 128 MiB: applied, still 1 CPU" bash -c '
    [ "$1" = 0 ] && [ "$2" = $((128 * 1024 * 1024)) ] && [ "$3" = 100000 ]' _ "$STATUS" "$(mem_limit_of "$SIDECAR")" "$(cpu_quota_of "$SIDECAR")"
[ "$STATUS" = 0 ] || note "$ERR"
mkdir -p "$PODDIR/containers/hog"; : > "$PODDIR/containers/hog/0000"
HOG=$(start_container "$POD" "$POD_CFG" hog "$POD_UID" '["/bin/sh", "-c", "exec tail /dev/zero"]' \
    "$(mounts hog)" $((32 * 1024 * 1024)))
check "a container whose pod spec says 32 MiB runs" test -n "$HOG"
wait_for 20 exited "$HOG"
check "past its 32 MiB: ContainerStatus exited 137, reason OOMKilled" test "$(container_state "$HOG")" = "2 137 OOMKilled"
[ "$(container_state "$HOG")" = "2 137 OOMKilled" ] || note "$(container_state "$HOG")"

# pids: a container's the smaller of the handler's 64 and none asked (kubelet's podPidsLimit
# is the pod cgroup's, above). After checking both limits are in place from the node, a fork
# bomb in a container of its own stays at 64; the pod (at most $POD_PIDS) and its other
# containers go on; stopping the container ends it all.
mkdir -p "$PODDIR/containers/bomb"; : > "$PODDIR/containers/bomb/0000"
BOMB=$(start_container "$POD" "$POD_CFG" bomb "$POD_UID" '["/bin/sleep", "3600"]' "$(mounts bomb)")
BOMB_CG=$(find "$POD_CG" -mindepth 1 -maxdepth 1 -type d -name "${BOMB:-none}*" | head -n 1)
check "pids: the bomb's container in the pod's cgroup (kubelet's podPidsLimit $POD_PIDS), its own pids.max the handler's 64" bash -c '
    [ -n "$1" ] && [ "$(cat "$1/pids.max")" = 64 ] && [ "$(cat "$2/pids.max")" = "$3" ]' _ "$BOMB_CG" "$POD_CG" "$POD_PIDS"
if [ -n "$BOMB_CG" ] && [ "$(cat "$BOMB_CG/pids.max")" = 64 ]; then
    # (The bomb's orphans go to the container's pid 1, sleep, which never reaps them.)
    exec_sync "$BOMB" 'b() { b | b & }; (b) </dev/null >/dev/null 2>&1; echo bomb-started'
    # (the bomb's count comes and goes below the limit as refused forks end subshells: what holds
    # is that forks past 64 are refused and the count is never above it)
    wait_for 30 bash -c '[ "$(sed -n "s/^max //p" "$1/pids.events")" -gt 0 ]' _ "$BOMB_CG"
    check "pids: the fork bomb held at 64 processes, forks past it refused (pids.events max)" bash -c '
        [ "$(cat "$1/pids.current")" -le 64 ] && [ "$(sed -n "s/^max //p" "$1/pids.events")" -gt 0 ]' _ "$BOMB_CG"
    [ "$(cat "$BOMB_CG/pids.current")" -le 64 ] || note "pids.current $(cat "$BOMB_CG/pids.current"), events: $(cat "$BOMB_CG/pids.events"); exec: $STATUS $OUT"
    check "pids: the pod under its podPidsLimit ($POD_PIDS)" bash -c '[ "$(cat "$1/pids.current")" -lt "$2" ]' _ "$POD_CG" "$POD_PIDS"
    exec_sync "$AGENT" 'echo agent-forks-fine'
    check "pids: the agent, in the same pod, runs new processes during the bomb" test "$STATUS $OUT" = "0 agent-forks-fine"
    run cri StopContainer "{\"container_id\": \"$BOMB\", \"timeout\": 1}"
    check "pids: StopContainer ends the bomb, no process of it left" bash -c '
        [ "$1" = 0 ] && { [ ! -d "$2" ] || [ "$(cat "$2/pids.current")" = 0 ]; }' _ "$STATUS" "$BOMB_CG"
else
    note "the bomb was not run: its container's limit is not in place"
fi
[ -n "$BOMB" ] && cri RemoveContainer "{\"container_id\": \"$BOMB\"}" >/dev/null

# Planted files: written through the emptyDir (an allowWrite path the container writes on the
# host), quarantined when the container ends.
exec_sync "$AGENT" 'mkdir -p /workspace/data/repo/.git/hooks && echo "curl evil" > /workspace/data/repo/.git/hooks/pre-commit && echo "export X=1" > /workspace/data/.envrc && echo planted'
check "agent planted a git hook and an .envrc in the emptyDir" grep -q planted <<<"$OUT"

# StopContainer with a grace period: the agent traps SIGTERM and exits 0 in time; the sidecar
# (nc as its pid 1 ignores SIGTERM) is killed when the grace period ends.
run cri StopContainer "{\"container_id\": \"$AGENT\", \"timeout\": 20}"
check "StopContainer(agent, 20 s): exited 0 after its SIGTERM trap ran" bash -c '
    [ "$1" = 0 ] && [ "${2% *}" = "2 0" ] && grep -Eq " stdout F got-term$" "$3"' _ "$STATUS" "$(container_state "$AGENT")" "$AGENT_LOG"
run cri StopContainer "{\"container_id\": \"$SIDECAR\", \"timeout\": 2}"
check "StopContainer(sidecar, 2 s): killed when the grace period ended (exit code 137)" bash -c '
    [ "$1" = 0 ] && [ "${2% *}" = "2 137" ]' _ "$STATUS" "$(container_state "$SIDECAR")"
check "planted files moved out of the emptyDir when the agent ended" wait_for 10 bash -c \
    "[ ! -e '$ED/.envrc' ] && [ ! -e '$ED/repo/.git/hooks/pre-commit' ] && [ -e '$ED/from-pod' ]"
# (the holder writes the audit lines once the whole sweep is done: after the files left)
audit_has_quietly() { audit_has "$@" >/dev/null; }
check "planted files in the quarantine, with audit lines" wait_for 10 bash -c "
    find '$T/quarantine/$AGENT' -name .envrc | grep -q . && find '$T/quarantine/$AGENT' -name pre-commit | grep -q . &&
    grep -q '\"event\":\"planted\"' '$T/audit.jsonl'"
check "audit: the planted lines name the pod and container too" \
    wait_for 5 audit_has_quietly "$T/audit.jsonl" '{"event": "planted", "pod_namespace": "exg-test", "pod": "agent", "container": "agent"}'

# ----- RemovePodSandbox leaves nothing: no process, mount, state directory, cgroup or address.
IDS=("$POD" "$AGENT" "$SIDECAR" "$ONCE" "$HOG" "${SOCK_C:-}")
expect_status 0 cri StopPodSandbox "{\"pod_sandbox_id\": \"$POD\"}"
expect_status 0 cri RemovePodSandbox "{\"pod_sandbox_id\": \"$POD\"}"
run cri ListPodSandbox '{}'
check "ListPodSandbox: the pod is gone" bash -c "! grep -q '$POD' <<<\"\$1\"" _ "$OUT"
leftovers() {
    local id left=""
    for id in "${IDS[@]}"; do
        [ -n "$id" ] || continue
        pgrep -f -- "$id" >/dev/null && left+="process($id) "
        grep -q -- "$id" /proc/self/mountinfo && left+="host-mount($id) "
        in_ctd grep -q -- "$id" /proc/self/mountinfo && left+="mount($id) "
        left+=$(in_ctd find /run/containerd "$N/run/containerd" "$N/var/lib/containerd/io.containerd.grpc.v1.cri" -name "*$id*" -printf 'state(%p) ' 2>/dev/null)
        find /sys/fs/cgroup/ -type d -name "*$id*" 2>/dev/null | grep -q . && left+="cgroup($id) "
    done
    [ -n "$(ls "$N/cni-ipam/exg-pod" 2>/dev/null | grep -v -e lock -e last_reserved)" ] && left+="pod-address "
    in_ctd ip link show 2>/dev/null | grep -q veth && left+="veth "
    pgrep -f -- '[-]-root /run/containerd/runc/k8s.io create' >/dev/null && left+="egress-holder "
    [ -z "$left" ] || { note "left: $left"; return 1; }
}
check "after RemovePodSandbox: no process, mount, state directory, cgroup, veth, address or egress holder of the pod left" \
    wait_for 10 leftovers

# ----- a pod annotated exguardian.dev/profile: offline (a Pod's metadata.annotations, which
# kubelet passes in PodSandboxConfig and containerd's pod_annotations hands to the containers):
# the handler's policy narrowed for that pod only.
OFF_UID=$(cat /proc/sys/kernel/random/uuid)
OFF_CFG=$(pod_config offline "$OFF_UID" '"exguardian.dev/profile": "offline"')
OFFPOD=$(jget "$(cri RunPodSandbox "{\"config\": $OFF_CFG, \"runtime_handler\": \"exguardian\"}")" 'r.get("pod_sandbox_id", "")' 2>/dev/null)
PODS+=("$OFFPOD")
OFF_C=""
[ -n "$OFFPOD" ] && OFF_C=$(start_container "$OFFPOD" "$OFF_CFG" worker "$OFF_UID" '["/bin/sleep", "600"]' '[]')
check "a pod annotated exguardian.dev/profile: offline runs" test -n "$OFF_C"
exec_sync "$OFF_C" 'wget -q -O - http://allowed.test/ >/dev/null 2>&1 || echo allowed-refused
touch /workspace/x 2>/dev/null || echo workspace-refused; touch /tmp/x && echo tmp-ok'
check "profile offline: allowed.test (the handler's, not the profile's) refused, /workspace read-only, /tmp writable" bash -c '
    grep -q allowed-refused <<<"$1" && grep -q workspace-refused <<<"$1" && grep -q tmp-ok <<<"$1"' _ "$OUT"
check "profile offline: the refusal audited for that pod" audit_has "$T/audit.jsonl" \
    "{\"sandbox\": \"$OFF_C\", \"host\": \"allowed.test\", \"decision\": \"refused\", \"pod\": \"offline\"}"
[ -n "$OFFPOD" ] && cri StopPodSandbox "{\"pod_sandbox_id\": \"$OFFPOD\"}" >/dev/null && cri RemovePodSandbox "{\"pod_sandbox_id\": \"$OFFPOD\"}" >/dev/null
IDS=("$OFFPOD" "$OFF_C")
check "profile offline: nothing of the pod left after RemovePodSandbox" wait_for 10 leftovers

# ----- runtime_handler exguardian-gvisor: a pod whose container runs under runsc (the pause
# container is left to crun), the same policy.
if command -v runsc >/dev/null; then
    GV_UID=$(cat /proc/sys/kernel/random/uuid)
    GV_CFG=$(pod_config gvpod "$GV_UID")
    GVPOD=$(jget "$(cri RunPodSandbox "{\"config\": $GV_CFG, \"runtime_handler\": \"exguardian-gvisor\"}")" 'r.get("pod_sandbox_id", "")' 2>/dev/null)
    PODS+=("$GVPOD")
    GV_C=""
    # (stdin open, as the pod spec's stdin: true, for Attach; a listener on port 8080 for the
    # node's probe and PortForward)
    r=$([ -n "$GVPOD" ] && cri CreateContainer "$(container_request "$GVPOD" "$GV_CFG" gvagent "$GV_UID" \
        '["/bin/sh", "-c", "nc -ll -p 8080 -e echo from-gvisor & while read l; do echo heard:$l; uname -r; done"]' '[]' |
        "$PY" -c 'import json,sys; r=json.load(sys.stdin); r["config"]["stdin"]=True; print(json.dumps(r))')") &&
        GV_C=$(jget "$r" 'r["container_id"]') && cri StartContainer "{\"container_id\": \"$GV_C\"}" >/dev/null || GV_C=""
    check "exguardian-gvisor: the pod and its container run" test -n "$GV_C"
    # (busybox wget fails reading the proxy's replies under runsc's host network: a raw request.)
    exec_sync "$GV_C" 'for h in allowed.test 169.254.169.254; do printf "GET http://%s/ HTTP/1.0\r\nHost: %s\r\n\r\n" $h $h | nc 127.0.0.1 3128 | head -1; done
touch /bin/planted 2>/dev/null || echo root-ro; grep CapEff /proc/self/status; echo "kernel $(uname -r)"
printf "GET / HTTP/1.0\r\n\r\n" | nc -w 2 203.0.113.10 80 2>&1 | grep -q hello && echo direct-reached || echo direct-refused'
    check "exguardian-gvisor: the container runs on gVisor's kernel, not the host's ($(uname -r))" bash -c '
        grep -q "^kernel " <<<"$1" && ! grep -qx "kernel $2" <<<"$1"' _ "$OUT" "$(uname -r)"
    check "exguardian-gvisor: allowed.test 200 and 169.254.169.254 403 through the container's proxy" bash -c '
        grep -q "200 OK" <<<"$1" && grep -q "403" <<<"$1"' _ "$OUT"
    check "exguardian-gvisor: read-only root, no capabilities, the pod network's route out closed" bash -c '
        grep -q root-ro <<<"$1" && grep -q "CapEff:.0000000000000000" <<<"$1" && grep -q direct-refused <<<"$1"' _ "$OUT"
    grep -q "200 OK" <<<"$OUT" || note "$OUT"
    check "exguardian-gvisor: audit lines with the handler gvisor and the pod's names" audit_has "$T/audit.jsonl" \
        "{\"sandbox\": \"$GV_C\", \"host\": \"169.254.169.254\", \"decision\": \"refused\", \"handler\": \"gvisor\", \"pod\": \"gvpod\", \"container\": \"gvagent\"}"
    # The node's probe, PortForward and Attach as on the exguardian handler (runsc's network is the
    # pod's namespace itself, --network=host: the listener is on the pod's IP and loopback).
    GV_IP=$(jget "$(cri PodSandboxStatus "{\"pod_sandbox_id\": \"$GVPOD\"}")" 'r["status"].get("network", {}).get("ip", "")' 2>/dev/null)
    run probe tcp "${GV_IP:-none}" 8080
    check "exguardian-gvisor: tcpSocket probe from the node to the pod's IP ($GV_IP:8080): connected" test "$STATUS $OUT" = "0 tcp-open"
    [ "$STATUS" = 0 ] || show_last
    r=$(cri PortForward "{\"pod_sandbox_id\": \"$GVPOD\", \"port\": [8080]}") && URL=$(jget "$r" 'r["url"]') || URL=none
    run in_ctd "$PY" "$HERE/cri_stream.py" "$URL" --port-forward --until from-gvisor
    check "exguardian-gvisor: PortForward to the pod's port 8080: the gVisor container's listener answers" bash -c '
        [ "$1" = 0 ] && grep -q from-gvisor <<<"$2"' _ "$STATUS" "$OUT"
    [ "$STATUS" = 0 ] || note "status $STATUS: $OUT $ERR"
    r=$(cri Attach "{\"container_id\": \"$GV_C\", \"stdin\": true, \"stdout\": true, \"stderr\": true}") && URL=$(jget "$r" 'r["url"]') || URL=none
    run in_ctd "$PY" "$HERE/cri_stream.py" "$URL" --stdin $'hello-gvisor\n' --until heard:hello-gvisor
    check "exguardian-gvisor: Attach (stdin and stdout): the container's stdin read, its answer back" bash -c '
        [ "$1" = 0 ] && grep -q heard:hello-gvisor <<<"$2"' _ "$STATUS" "$OUT"
    [ "$STATUS" = 0 ] || note "status $STATUS: $OUT $ERR"
    # kubectl exec -it on gVisor, as the agent's above. (runsc gives the exec a pty of the host's
    # imported as a host file: isatty holds and resizes arrive, but ttyname finds no /dev/pts
    # name, so busybox's `tty` says "not a tty"; gVisor's /proc/self/status has no NoNewPrivs
    # line: the capabilities are read instead.)
    GV_TTY_CMD='[ -t 0 ] && [ -t 1 ] && echo on-a-tty; grep CapEff /proc/self/status; read l; echo "got:$l"
n=0; while [ "$(stty size)" != "40 100" ] && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done; echo size $(stty size); exit 3'
    r=$(cri Exec "$("$PY" -c 'import json,sys; print(json.dumps({"container_id": sys.argv[1], "cmd": ["sh", "-c", sys.argv[2]], "tty": True, "stdin": True, "stdout": True}))' "$GV_C" "$GV_TTY_CMD")") &&
        URL=$(jget "$r" 'r["url"]') || URL=none
    run in_ctd "$PY" "$HERE/cri_stream.py" "$URL" --resize 100x40 --stdin $'line-in\n'
    check "exguardian-gvisor: streaming exec with a tty: stdin and stdout a terminal, no capabilities, its stdin read, resized to 40x100, exit status 3" bash -c '
        [ "$1" = 3 ] && grep -q on-a-tty <<<"$2" && grep -q "CapEff:.0000000000000000" <<<"$2" &&
        grep -q "got:line-in" <<<"$2" && grep -q "size 40 100" <<<"$2"' _ "$STATUS" "$OUT"
    [ "$STATUS" = 3 ] && grep -q "size 40 100" <<<"$OUT" || note "status $STATUS: $OUT $ERR"
    [ -n "$GVPOD" ] && cri StopPodSandbox "{\"pod_sandbox_id\": \"$GVPOD\"}" >/dev/null && cri RemovePodSandbox "{\"pod_sandbox_id\": \"$GVPOD\"}" >/dev/null
    IDS=("$GVPOD" "$GV_C")
    check "exguardian-gvisor: nothing of the pod left after RemovePodSandbox" wait_for 10 leftovers
else
    skip "runsc is not installed: the exguardian-gvisor handler not run through CRI"
fi

# The control: the same pod on the node's default runtime (runc, no handler) goes direct through
# the pod network's route, so "direct-refused" above is exguardian's wall, not this world's.
CTL_UID=$(cat /proc/sys/kernel/random/uuid)
CTL_CFG=$(pod_config control "$CTL_UID")
CTL=$(jget "$(cri RunPodSandbox "{\"config\": $CTL_CFG}")" 'r.get("pod_sandbox_id", "")' 2>/dev/null)
CTL_C=""
PODS+=("$CTL")
[ -n "$CTL" ] && CTL_C=$(start_container "$CTL" "$CTL_CFG" plain "$CTL_UID" '["/bin/sleep", "600"]' \
    "[{\"container_path\": \"/mnt/host-rw\", \"host_path\": \"$HP/rw-ctl\"}]")
check "control: a runc pod (no handler) runs" test -n "$CTL_C"
exec_sync "$CTL_C" 'nc -w 2 '"$NODE_IP"' 9099 </dev/null 2>&1 | grep -q node-answer && echo node-reached || echo node-refused
printf "GET / HTTP/1.0\r\n\r\n" | nc -w 2 203.0.113.10 80 2>&1 | grep -q hello && echo direct-reached || echo direct-refused
echo ctl-wrote > /mnt/host-rw/file && echo hostrw-written'
check "control: a runc pod reaches 203.0.113.10 directly through the pod network" grep -q direct-reached <<<"$OUT"
check "control: a runc pod reaches the node's listener on $NODE_IP:9099 (the agent's refusal is the handler's doing)" grep -q node-reached <<<"$OUT"
kill "$NODE_LISTENER" 2>/dev/null
check "control: the runc pod writes its hostPath at /mnt/host-rw (the agent's read-only one is the handler's doing)" bash -c '
    grep -q hostrw-written <<<"$1" && grep -qx ctl-wrote "$2"' _ "$OUT" "$HP/rw-ctl/file"
[ -n "$CTL" ] && cri StopPodSandbox "{\"pod_sandbox_id\": \"$CTL\"}" >/dev/null && cri RemovePodSandbox "{\"pod_sandbox_id\": \"$CTL\"}" >/dev/null
IDS=("$CTL" "$CTL_C")
check "control: nothing of the runc pod left either" wait_for 10 leftovers

cgroup_parents_gone() {  # the pods' parent cgroups (kubelet's to remove, as it made them): empty now
    local d left=0
    for d in /sys/fs/cgroup/*/exg-cri-$$ /sys/fs/cgroup/exg-cri-$$; do
        [ -d "$d" ] || continue
        find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
        [ -d "$d" ] && left=1
    done
    return $left
}
check "the pods' parent cgroups empty (removed as kubelet would)" wait_for 10 cgroup_parents_gone

finish
