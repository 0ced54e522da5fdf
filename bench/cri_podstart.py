#!/usr/bin/python3
"""Pod start through containerd's CRI to the container's first output, as kubelet drives it:
RunPodSandbox, CreateContainer, StartContainer, then the CRI log file polled for the container's
first line; each pod stopped and removed after its round (not timed). Handlers are interleaved
round by round (the order rotating) so that a change of the machine's load hits each alike.

    cri_podstart.py SOCKET NODE_DIR CGROUP_PARENT RUNS OUT_JSON NAME=HANDLER...

HANDLER empty is the node's default runtime (runc). Writes per handler the times of the whole
start and of StartContainer alone (seconds), their medians and p90.
"""
import json
import os
import statistics
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
import grpc  # noqa: E402
import cri_client  # noqa: E402


def pod_config(node, parent, name, uid):
    return {"metadata": {"name": name, "uid": uid, "namespace": "exg-bench", "attempt": 0},
            "hostname": name, "log_directory": "%s/pods/%s" % (node, uid),
            "labels": {"io.kubernetes.pod.name": name, "io.kubernetes.pod.namespace": "exg-bench"},
            "linux": {"cgroup_parent": "%s/pod%s" % (parent, uid),
                      "security_context": {"namespace_options": {"network": 0, "pid": 1, "ipc": 0},
                                           "seccomp": {"profile_type": 0}}}}


def one_start(channel, node, parent, handler):
    uid = str(uuid.uuid4())
    cfg = pod_config(node, parent, "bench", uid)
    log = "%s/pods/%s/main/0.log" % (node, uid)
    t0 = time.monotonic()
    req = {"config": cfg}
    if handler:
        req["runtime_handler"] = handler
    pod = cri_client.call(channel, "RunPodSandbox", req)["pod_sandbox_id"]
    try:
        cid = cri_client.call(channel, "CreateContainer", {
            "pod_sandbox_id": pod, "sandbox_config": cfg,
            "config": {"metadata": {"name": "main", "attempt": 0}, "image": {"image": "localhost/exg-test:1"},
                       "command": ["/bin/sh", "-c", "echo first-output; exec sleep 600"],
                       "labels": {"io.kubernetes.container.name": "main"}, "log_path": "main/0.log",
                       "linux": {"security_context": {"namespace_options": {"network": 0, "pid": 1, "ipc": 0},
                                                      "seccomp": {"profile_type": 0}}}}})["container_id"]
        t1 = time.monotonic()
        cri_client.call(channel, "StartContainer", {"container_id": cid})
        t2 = time.monotonic()
        deadline = t2 + 30
        while True:
            try:
                if "first-output" in open(log).read():
                    break
            except FileNotFoundError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("bench: no first output in %s" % log)
            time.sleep(0.001)
        t3 = time.monotonic()
    finally:
        cri_client.call(channel, "StopPodSandbox", {"pod_sandbox_id": pod})
        cri_client.call(channel, "RemovePodSandbox", {"pod_sandbox_id": pod})
    return t3 - t0, t2 - t1


def summary(xs):
    s = sorted(xs)
    return {"median": statistics.median(s), "p90": s[min(len(s) - 1, int(round(0.9 * (len(s) - 1))))], "times": xs}


def main():
    sock, node, parent, runs, out = sys.argv[1:6]
    pairs = [a.split("=", 1) for a in sys.argv[6:]]
    res = {name: {"start": [], "start_container": []} for name, _ in pairs}
    with grpc.insecure_channel("unix://" + sock) as channel:
        for _, handler in pairs:  # warm-up: one start each, not counted
            one_start(channel, node, parent, handler)
        for r in range(int(runs)):
            order = pairs[r % len(pairs):] + pairs[:r % len(pairs)]
            for name, handler in order:
                whole, start = one_start(channel, node, parent, handler)
                res[name]["start"].append(whole)
                res[name]["start_container"].append(start)
    result = {name: {"start": summary(v["start"]), "start_container": summary(v["start_container"])}
              for name, v in res.items()}
    json.dump({"runs": int(runs), "results": result}, open(out, "w"), indent=1)


if __name__ == "__main__":
    main()
