#!/usr/bin/python3
"""A pod's egress throughput through containerd's CRI: one pod per handler, started once, each
fetching the same file over HTTP round after round from inside its container (ExecSync of busybox
wget to /dev/null, timed inside with /proc/uptime, so CRI's exec overhead is left out); an
exguardian pod goes through its egress holder's proxy (the proxy variables the runtime sets), a
runc pod straight through the pod network. Handlers are interleaved round by round (the order
rotating), one warm-up fetch each.

    cri_egress.py SOCKET NODE_DIR CGROUP_PARENT RUNS SIZE_BYTES OUT_JSON NAME=HANDLER=URL...

HANDLER empty is the node's default runtime (runc). Writes per handler the seconds of each fetch,
and the median throughput in MiB/s.
"""
import json
import os
import statistics
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
import grpc  # noqa: E402
import cri_client  # noqa: E402
from cri_podstart import pod_config  # noqa: E402


def start_pod(channel, node, parent, handler):
    uid = str(uuid.uuid4())
    cfg = pod_config(node, parent, "egress", uid)
    req = {"config": cfg}
    if handler:
        req["runtime_handler"] = handler
    pod = cri_client.call(channel, "RunPodSandbox", req)["pod_sandbox_id"]
    cid = cri_client.call(channel, "CreateContainer", {
        "pod_sandbox_id": pod, "sandbox_config": cfg,
        "config": {"metadata": {"name": "main", "attempt": 0}, "image": {"image": "localhost/exg-test:1"},
                   "command": ["/bin/sleep", "3600"], "labels": {"io.kubernetes.container.name": "main"},
                   "log_path": "main/0.log",
                   "linux": {"security_context": {"namespace_options": {"network": 0, "pid": 1, "ipc": 0},
                                                  "seccomp": {"profile_type": 0}}}}})["container_id"]
    cri_client.call(channel, "StartContainer", {"container_id": cid})
    return pod, cid


def fetch(channel, cid, url):
    script = ("s=$(cut -d' ' -f1 /proc/uptime); wget -q -O /dev/null %s || exit 9; "
              "e=$(cut -d' ' -f1 /proc/uptime); echo $s $e" % url)
    r = cri_client.call(channel, "ExecSync", {"container_id": cid, "cmd": ["sh", "-c", script], "timeout": 300})
    if r.get("exit_code", 0) != 0:
        raise SystemExit("bench: fetch of %s failed in %s: %s" % (url, cid, r))
    s, e = map(float, r["stdout"].split())
    return max(e - s, 0.01)  # /proc/uptime counts hundredths


def main():
    sock, node, parent, runs, size, out = sys.argv[1:7]
    triples = [a.split("=", 2) for a in sys.argv[7:]]
    times = {name: [] for name, _, _ in triples}
    pods = []
    with grpc.insecure_channel("unix://" + sock) as channel:
        try:
            cids = {}
            for name, handler, _ in triples:
                pod, cid = start_pod(channel, node, parent, handler)
                pods.append(pod)
                cids[name] = cid
            for name, _, url in triples:  # warm-up, not counted
                fetch(channel, cids[name], url)
            for r in range(int(runs)):
                order = triples[r % len(triples):] + triples[:r % len(triples)]
                for name, _, url in order:
                    times[name].append(fetch(channel, cids[name], url))
        finally:
            for pod in pods:
                cri_client.call(channel, "StopPodSandbox", {"pod_sandbox_id": pod})
                cri_client.call(channel, "RemovePodSandbox", {"pod_sandbox_id": pod})
    mib = int(size) / (1 << 20)
    result = {name: {"seconds": t, "median_mib_s": mib / statistics.median(t),
                     "min_mib_s": mib / max(t), "max_mib_s": mib / min(t)} for name, t in times.items()}
    json.dump({"runs": int(runs), "size_bytes": int(size), "results": result}, open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
