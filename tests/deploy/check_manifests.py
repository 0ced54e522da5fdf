#!/usr/bin/env python3
"""Client-side checks of deploy/ (issue 17): no cluster here, so every manifest is held to a
JSON Schema of the fields it uses (the shapes of Kubernetes' and kubernetes-sigs/agent-sandbox's
APIs, written here for those fields) and to the references between the files: RuntimeClass
handlers are containerd runtimes, their BinaryName links name handler files, the templates'
runtimeClassName and profile annotation exist, the DaemonSet's mounts and ConfigMap resolve, the
kustomization's files exist. Prints one line per check; exit 1 on the first failure set.

usage: check_manifests.py DEPLOY_DIR
"""
import os
import re
import sys
import tomllib

import jsonschema
import yaml

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"
META = {"type": "object", "required": ["name"],
        "properties": {"name": {"type": "string", "pattern": DNS_SUBDOMAIN},
                       "namespace": {"type": "string", "pattern": DNS_LABEL},
                       "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                       "annotations": {"type": "object", "additionalProperties": {"type": "string"}}}}
CONTAINER = {"type": "object", "required": ["name", "image"],
             "properties": {"name": {"type": "string", "pattern": DNS_LABEL}, "image": {"type": "string", "minLength": 1},
                            "command": {"type": "array", "items": {"type": "string"}},
                            "args": {"type": "array", "items": {"type": "string"}},
                            "volumeMounts": {"type": "array", "items": {"type": "object", "required": ["name", "mountPath"]}},
                            "env": {"type": "array", "items": {"type": "object", "required": ["name"]}}}}
POD_SPEC = {"type": "object", "required": ["containers"],
            "properties": {"containers": {"type": "array", "minItems": 1, "items": CONTAINER},
                           "initContainers": {"type": "array", "items": CONTAINER},
                           "runtimeClassName": {"type": "string", "pattern": DNS_SUBDOMAIN},
                           "nodeSelector": {"type": "object", "additionalProperties": {"type": "string"}},
                           "hostPID": {"type": "boolean"},
                           "volumes": {"type": "array", "items": {"type": "object", "required": ["name"]}}}}
SCHEMAS = {
    ("v1", "Namespace"): {"type": "object", "required": ["metadata"], "properties": {"metadata": META}},
    ("node.k8s.io/v1", "RuntimeClass"): {
        "type": "object", "required": ["metadata", "handler"],
        "properties": {"metadata": META, "handler": {"type": "string", "pattern": DNS_LABEL},
                       "scheduling": {"type": "object", "properties": {
                           "nodeSelector": {"type": "object", "additionalProperties": {"type": "string"}}}}}},
    ("apps/v1", "DaemonSet"): {
        "type": "object", "required": ["metadata", "spec"],
        "properties": {"metadata": META, "spec": {
            "type": "object", "required": ["selector", "template"],
            "properties": {"selector": {"type": "object", "required": ["matchLabels"]},
                           "template": {"type": "object", "required": ["metadata", "spec"],
                                        "properties": {"spec": POD_SPEC}}}}}},
    ("extensions.agents.x-k8s.io/v1alpha1", "SandboxTemplate"): {
        "type": "object", "required": ["metadata", "spec"],
        "properties": {"metadata": META, "spec": {
            "type": "object", "required": ["podTemplate"],
            "properties": {"podTemplate": {"type": "object", "required": ["spec"], "properties": {"spec": POD_SPEC}}}}}},
    ("extensions.agents.x-k8s.io/v1alpha1", "SandboxWarmPool"): {
        "type": "object", "required": ["metadata", "spec"],
        "properties": {"metadata": META, "spec": {
            "type": "object", "required": ["replicas", "sandboxTemplateRef"],
            "properties": {"replicas": {"type": "integer", "minimum": 0},
                           "sandboxTemplateRef": {"type": "object", "required": ["name"],
                                                  "properties": {"name": {"type": "string"}}}}}}},
}

failed = 0


def check(ok, what):
    global failed
    print(("ok   - " if ok else "FAIL - ") + what)
    if not ok:
        failed += 1


def main(deploy):
    objs = []
    for root, _, files in os.walk(deploy):
        for f in sorted(files):
            if f.endswith(".yaml") and f != "kustomization.yaml":
                path = os.path.join(root, f)
                for doc in yaml.safe_load_all(open(path)):
                    if doc:
                        objs.append((os.path.relpath(path, deploy), doc))
    for path, o in objs:
        key = (o.get("apiVersion"), o.get("kind"))
        schema = SCHEMAS.get(key)
        check(schema is not None, f"{path}: {key[1]} {key[0]} is a kind this check knows")
        if schema:
            try:
                jsonschema.validate(o, schema)
                check(True, f"{path}: {key[1]} {o['metadata']['name']} matches its schema")
            except jsonschema.ValidationError as e:
                check(False, f"{path}: {key[1]}: {e.message} at {'/'.join(map(str, e.absolute_path))}")
    by_kind = {}
    for _, o in objs:
        by_kind.setdefault(o.get("kind"), []).append(o)

    handlers = {f[:-5] for f in os.listdir(os.path.join(deploy, "handlers")) if f.endswith(".json")}
    # containerd 1.6/1.7 (tables for config.toml, version 2) and 2.x (a drop-in, version 3).
    cdir = os.path.join(deploy, "containerd")
    one = tomllib.load(open(os.path.join(cdir, "containerd-1.x-runtimes.toml"), "rb"))
    runc1 = tomllib.load(open(os.path.join(cdir, "containerd-1.x-runc.toml"), "rb"))
    two = tomllib.load(open(os.path.join(cdir, "containerd-2.x-exguardian.toml"), "rb"))
    check("version" not in one and "version" not in runc1, "containerd 1.x tables: no version key (config.toml's is 2)")
    check(two.get("version") == 3, "containerd 2.x drop-in: config version 3")
    check(list(runc1["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]) == ["runc"],
          "containerd 1.x runc table: runc only")
    sets = {"1.x": one["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"],
            "2.x": {k: v for k, v in two["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"].items()
                    if k != "runc"}}
    for ver, runtimes in sets.items():
        for name, r in runtimes.items():
            check(r.get("runtime_type") == "io.containerd.runc.v2", f"containerd {ver} runtime {name}: the runc v2 shim")
            binary = r.get("options", {}).get("BinaryName", "")
            m = re.fullmatch(r"/usr/local/bin/exguardian-runtime-([a-z0-9._-]+)", binary)
            check(bool(m) and m.group(1) in handlers, f"containerd {ver} runtime {name}: BinaryName {binary} names a handler file")
            check(any(re.fullmatch(p.replace(".", r"\.").replace("*", ".*"), "exguardian.dev/profile")
                      for p in r.get("pod_annotations", [])), f"containerd {ver} runtime {name}: passes exguardian.dev/profile")
    check(set(sets["1.x"]) == set(sets["2.x"]), "containerd 1.x and 2.x: the same runtimes")
    runtimes = sets["1.x"]
    for rc in by_kind.get("RuntimeClass", []):
        check(rc["handler"] in runtimes, f"RuntimeClass {rc['metadata']['name']}: handler {rc['handler']} is a containerd runtime")
    rc_names = {rc["metadata"]["name"] for rc in by_kind.get("RuntimeClass", [])}
    templates = {t["metadata"]["name"]: t for t in by_kind.get("SandboxTemplate", [])}
    for name, t in templates.items():
        pod = t["spec"]["podTemplate"]
        check(pod["spec"].get("runtimeClassName") in rc_names, f"SandboxTemplate {name}: runtimeClassName is a RuntimeClass here")
        prof = pod.get("metadata", {}).get("annotations", {}).get("exguardian.dev/profile")
        check(prof is None or prof in handlers, f"SandboxTemplate {name}: profile {prof} is a handler file")
    for wp in by_kind.get("SandboxWarmPool", []):
        ref = wp["spec"]["sandboxTemplateRef"]["name"]
        check(ref in templates, f"SandboxWarmPool {wp['metadata']['name']}: its template {ref} is defined")

    kz = yaml.safe_load(open(os.path.join(deploy, "kustomization.yaml")))
    for r in kz.get("resources", []):
        check(os.path.isfile(os.path.join(deploy, r)), f"kustomization: resource {r} exists")
    generated = set()
    for g in kz.get("configMapGenerator", []):
        generated.add(g["name"])
        for f in g.get("files", []):
            check(os.path.isfile(os.path.join(deploy, f)), f"kustomization: ConfigMap {g['name']} file {f} exists")
    for ds in by_kind.get("DaemonSet", []):
        spec = ds["spec"]["template"]["spec"]
        labels = ds["spec"]["template"]["metadata"].get("labels", {})
        sel = ds["spec"]["selector"]["matchLabels"]
        check(all(labels.get(k) == v for k, v in sel.items()), f"DaemonSet {ds['metadata']['name']}: selector matches its pods")
        vols = {v["name"]: v for v in spec.get("volumes", [])}
        for c in spec.get("initContainers", []) + spec["containers"]:
            for vm in c.get("volumeMounts", []):
                check(vm["name"] in vols, f"DaemonSet: {c['name']} mounts volume {vm['name']}, which exists")
        for v in vols.values():
            if "configMap" in v:
                check(v["configMap"]["name"] in generated, f"DaemonSet: ConfigMap {v['configMap']['name']} is generated")
        ns = ds["metadata"].get("namespace")
        check(ns == kz.get("namespace"), f"DaemonSet: namespace {ns} is the kustomization's")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
