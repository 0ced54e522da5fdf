#!/usr/bin/python3
"""A CRI client that speaks to a container runtime's socket the way kubelet does: gRPC unary calls
of runtime.v1.RuntimeService / ImageService, the messages encoded by hand from the CRI API's field
numbers (k8s.io/cri-api, pkg/apis/runtime/v1/api.proto). Only the messages and fields the CRI test
bed uses are described here; fields of a reply that are not described are skipped.

    cri_client.py SOCKET METHOD [JSON]   one call; the request from JSON (field names as in
                                         api.proto, enums as numbers, maps as objects), the reply
                                         printed as JSON (bytes fields as text); a gRPC error:
                                         its code and message on stderr, exit 1.
    cri_client.py SOCKET --lines         many calls on one channel (as kubelet keeps one): each
                                         line read is "METHOD JSON", each line written the reply
                                         or {"error": "CODE: message"}; ends at end of input.
"""
import json
import sys

import grpc

# Field kinds: "string", "bytes", "bool", "int" (int32/int64/uint32/uint64/enum: a varint),
# "map" (map<string, string>), or a message name. A list [kind] is a repeated field.
MESSAGES = {
    "VersionRequest": {"version": (1, "string")},
    "VersionResponse": {"version": (1, "string"), "runtime_name": (2, "string"),
                        "runtime_version": (3, "string"), "runtime_api_version": (4, "string")},
    "StatusRequest": {"verbose": (1, "bool")},
    "StatusResponse": {"status": (1, "RuntimeStatus")},
    "RuntimeStatus": {"conditions": (1, ["RuntimeCondition"])},
    "RuntimeCondition": {"type": (1, "string"), "status": (2, "bool"), "reason": (3, "string"),
                         "message": (4, "string")},
    "PodSandboxMetadata": {"name": (1, "string"), "uid": (2, "string"), "namespace": (3, "string"),
                           "attempt": (4, "int")},
    "DNSConfig": {"servers": (1, ["string"]), "searches": (2, ["string"]), "options": (3, ["string"])},
    "Int64Value": {"value": (1, "int")},
    "NamespaceOption": {"network": (1, "int"), "pid": (2, "int"), "ipc": (3, "int"), "target_id": (4, "string")},
    "SecurityProfile": {"profile_type": (1, "int"), "localhost_ref": (2, "string")},
    "LinuxSandboxSecurityContext": {"namespace_options": (1, "NamespaceOption"), "run_as_user": (3, "Int64Value"),
                                    "readonly_rootfs": (4, "bool"), "privileged": (6, "bool"),
                                    "seccomp": (9, "SecurityProfile")},
    "LinuxPodSandboxConfig": {"cgroup_parent": (1, "string"), "security_context": (2, "LinuxSandboxSecurityContext"),
                              "sysctls": (3, "map")},
    "PodSandboxConfig": {"metadata": (1, "PodSandboxMetadata"), "hostname": (2, "string"),
                         "log_directory": (3, "string"), "dns_config": (4, "DNSConfig"), "labels": (6, "map"),
                         "annotations": (7, "map"), "linux": (8, "LinuxPodSandboxConfig")},
    "RunPodSandboxRequest": {"config": (1, "PodSandboxConfig"), "runtime_handler": (2, "string")},
    "RunPodSandboxResponse": {"pod_sandbox_id": (1, "string")},
    "PodSandboxIdRequest": {"pod_sandbox_id": (1, "string")},  # Stop/RemovePodSandboxRequest
    "Empty": {},
    "PodSandboxStatusRequest": {"pod_sandbox_id": (1, "string"), "verbose": (2, "bool")},
    "PodSandboxStatusResponse": {"status": (1, "PodSandboxStatus"), "info": (2, "map")},
    "PodSandboxNetworkStatus": {"ip": (1, "string")},
    "PodSandboxStatus": {"id": (1, "string"), "metadata": (2, "PodSandboxMetadata"), "state": (3, "int"),
                         "network": (5, "PodSandboxNetworkStatus"), "runtime_handler": (9, "string")},
    "ListPodSandboxRequest": {},
    "ListPodSandboxResponse": {"items": (1, ["PodSandbox"])},
    "PodSandbox": {"id": (1, "string"), "metadata": (2, "PodSandboxMetadata"), "state": (3, "int"),
                   "runtime_handler": (7, "string")},
    "ImageSpec": {"image": (1, "string")},
    "KeyValue": {"key": (1, "string"), "value": (2, "string")},
    "Mount": {"container_path": (1, "string"), "host_path": (2, "string"), "readonly": (3, "bool"),
              "selinux_relabel": (4, "bool"), "propagation": (5, "int")},
    "ContainerMetadata": {"name": (1, "string"), "attempt": (2, "int")},
    "LinuxContainerResources": {"cpu_period": (1, "int"), "cpu_quota": (2, "int"), "cpu_shares": (3, "int"),
                                "memory_limit_in_bytes": (4, "int"), "oom_score_adj": (5, "int")},
    "Capability": {"add_capabilities": (1, ["string"]), "drop_capabilities": (2, ["string"])},
    "LinuxContainerSecurityContext": {"capabilities": (1, "Capability"), "privileged": (2, "bool"),
                                      "namespace_options": (3, "NamespaceOption"), "run_as_user": (5, "Int64Value"),
                                      "readonly_rootfs": (7, "bool"), "no_new_privs": (11, "bool"),
                                      "masked_paths": (13, ["string"]), "readonly_paths": (14, ["string"]),
                                      "seccomp": (15, "SecurityProfile")},
    "LinuxContainerConfig": {"resources": (1, "LinuxContainerResources"),
                             "security_context": (2, "LinuxContainerSecurityContext")},
    "ContainerConfig": {"metadata": (1, "ContainerMetadata"), "image": (2, "ImageSpec"), "command": (3, ["string"]),
                        "args": (4, ["string"]), "working_dir": (5, "string"), "envs": (6, ["KeyValue"]),
                        "mounts": (7, ["Mount"]), "labels": (9, "map"), "annotations": (10, "map"),
                        "log_path": (11, "string"), "stdin": (12, "bool"), "tty": (14, "bool"),
                        "linux": (15, "LinuxContainerConfig")},
    "CreateContainerRequest": {"pod_sandbox_id": (1, "string"), "config": (2, "ContainerConfig"),
                               "sandbox_config": (3, "PodSandboxConfig")},
    "CreateContainerResponse": {"container_id": (1, "string")},
    "ContainerIdRequest": {"container_id": (1, "string")},  # Start/RemoveContainerRequest
    "StopContainerRequest": {"container_id": (1, "string"), "timeout": (2, "int")},
    "ContainerStatusRequest": {"container_id": (1, "string"), "verbose": (2, "bool")},
    "ContainerStatusResponse": {"status": (1, "ContainerStatus"), "info": (2, "map")},
    "ContainerStatus": {"id": (1, "string"), "metadata": (2, "ContainerMetadata"), "state": (3, "int"),
                        "created_at": (4, "int"), "started_at": (5, "int"), "finished_at": (6, "int"),
                        "exit_code": (7, "int"), "image_ref": (9, "string"), "reason": (10, "string"),
                        "message": (11, "string"), "log_path": (15, "string")},
    "ExecSyncRequest": {"container_id": (1, "string"), "cmd": (2, ["string"]), "timeout": (3, "int")},
    "ExecSyncResponse": {"stdout": (1, "bytes"), "stderr": (2, "bytes"), "exit_code": (3, "int")},
    "ExecRequest": {"container_id": (1, "string"), "cmd": (2, ["string"]), "tty": (3, "bool"), "stdin": (4, "bool"),
                    "stdout": (5, "bool"), "stderr": (6, "bool")},
    "ExecResponse": {"url": (1, "string")},
    "AttachRequest": {"container_id": (1, "string"), "stdin": (2, "bool"), "tty": (3, "bool"), "stdout": (4, "bool"),
                      "stderr": (5, "bool")},
    "PortForwardRequest": {"pod_sandbox_id": (1, "string"), "port": (2, ["int"])},
    "UrlResponse": {"url": (1, "string")},  # Attach/PortForwardResponse
    "UpdateContainerResourcesRequest": {"container_id": (1, "string"), "linux": (2, "LinuxContainerResources")},
    "ContainerFilter": {"id": (1, "string"), "pod_sandbox_id": (3, "string")},
    "ListContainersRequest": {"filter": (1, "ContainerFilter")},
    "ListContainersResponse": {"containers": (1, ["Container"])},
    "Container": {"id": (1, "string"), "pod_sandbox_id": (2, "string"), "metadata": (3, "ContainerMetadata"),
                  "state": (6, "int")},
    "ImageStatusRequest": {"image": (1, "ImageSpec"), "verbose": (2, "bool")},
    "ImageStatusResponse": {"image": (1, "Image")},
    "Image": {"id": (1, "string"), "repo_tags": (2, ["string"]), "repo_digests": (3, ["string"]), "size": (4, "int")},
}

# METHOD: (service, request message, reply message)
METHODS = {
    "Version": ("RuntimeService", "VersionRequest", "VersionResponse"),
    "Status": ("RuntimeService", "StatusRequest", "StatusResponse"),
    "RunPodSandbox": ("RuntimeService", "RunPodSandboxRequest", "RunPodSandboxResponse"),
    "StopPodSandbox": ("RuntimeService", "PodSandboxIdRequest", "Empty"),
    "RemovePodSandbox": ("RuntimeService", "PodSandboxIdRequest", "Empty"),
    "PodSandboxStatus": ("RuntimeService", "PodSandboxStatusRequest", "PodSandboxStatusResponse"),
    "ListPodSandbox": ("RuntimeService", "ListPodSandboxRequest", "ListPodSandboxResponse"),
    "CreateContainer": ("RuntimeService", "CreateContainerRequest", "CreateContainerResponse"),
    "StartContainer": ("RuntimeService", "ContainerIdRequest", "Empty"),
    "StopContainer": ("RuntimeService", "StopContainerRequest", "Empty"),
    "RemoveContainer": ("RuntimeService", "ContainerIdRequest", "Empty"),
    "ContainerStatus": ("RuntimeService", "ContainerStatusRequest", "ContainerStatusResponse"),
    "ListContainers": ("RuntimeService", "ListContainersRequest", "ListContainersResponse"),
    "ExecSync": ("RuntimeService", "ExecSyncRequest", "ExecSyncResponse"),
    "Exec": ("RuntimeService", "ExecRequest", "ExecResponse"),
    "Attach": ("RuntimeService", "AttachRequest", "UrlResponse"),
    "PortForward": ("RuntimeService", "PortForwardRequest", "UrlResponse"),
    "UpdateContainerResources": ("RuntimeService", "UpdateContainerResourcesRequest", "Empty"),
    "ImageStatus": ("ImageService", "ImageStatusRequest", "ImageStatusResponse"),
}


def varint(n):
    n &= (1 << 64) - 1  # negative int32/int64: ten bytes of two's complement, as protobuf does
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(number, wire):
    return varint(number << 3 | wire)


def encode_value(kind, value):
    """(wire type, bytes of the value) for one value of a field."""
    if kind == "string":
        data = value.encode()
    elif kind == "bytes":
        data = value.encode() if isinstance(value, str) else bytes(value)
    elif kind in ("bool", "int"):
        return 0, varint(int(value))
    elif kind == "map":
        raise AssertionError("maps are encoded by encode()")
    else:
        data = encode(kind, value)
    return 2, varint(len(data)) + data


def encode(message, obj):
    fields = MESSAGES[message]
    out = bytearray()
    for name, value in obj.items():
        if name not in fields:
            raise SystemExit("cri_client: %s has no field %r here" % (message, name))
        number, kind = fields[name]
        if kind == "map":
            for k, v in value.items():  # a map is a repeated entry {key = 1, value = 2}
                entry = key(1, 2) + encode_value("string", k)[1] + key(2, 2) + encode_value("string", v)[1]
                out += key(number, 2) + varint(len(entry)) + entry
            continue
        for v in (value if isinstance(kind, list) else [value]):
            wire, data = encode_value(kind[0] if isinstance(kind, list) else kind, v)
            out += key(number, wire) + data
    return bytes(out)


def read_varint(buf, i):
    n = shift = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def decode(message, buf):
    by_number = {number: (name, kind) for name, (number, kind) in MESSAGES[message].items()}
    obj = {}
    i = 0
    while i < len(buf):
        k, i = read_varint(buf, i)
        number, wire = k >> 3, k & 7
        if wire == 0:
            raw, i = read_varint(buf, i)
        elif wire == 2:
            n, i = read_varint(buf, i)
            raw, i = buf[i:i + n], i + n
        elif wire == 1:
            raw, i = buf[i:i + 8], i + 8
        elif wire == 5:
            raw, i = buf[i:i + 4], i + 4
        else:
            raise SystemExit("cri_client: wire type %d in %s" % (wire, message))
        if number not in by_number:
            continue
        name, kind = by_number[number]
        repeated = isinstance(kind, list)
        base = kind[0] if repeated else kind
        if base == "map":
            entry = decode("KeyValue", raw)
            obj.setdefault(name, {})[entry.get("key", "")] = entry.get("value", "")
            continue
        if base == "int":
            value = raw - (1 << 64) if raw >= 1 << 63 else raw
        elif base == "bool":
            value = bool(raw)
        elif base in ("string", "bytes"):
            value = bytes(raw).decode(errors="replace")
        else:
            value = decode(base, bytes(raw))
        if repeated:
            obj.setdefault(name, []).append(value)
        else:
            obj[name] = value
    return obj


def call(channel, method, request):
    service, req_type, reply_type = METHODS[method]
    rpc = channel.unary_unary("/runtime.v1.%s/%s" % (service, method),
                              request_serializer=lambda b: b, response_deserializer=lambda b: b)
    return decode(reply_type, rpc(encode(req_type, request), timeout=120))


def serve_lines(socket):
    with grpc.insecure_channel("unix://" + socket) as channel:
        for line in sys.stdin:
            method, _, request = line.strip().partition(" ")
            try:
                if method not in METHODS:
                    raise ValueError("no method %r here" % method)
                reply = call(channel, method, json.loads(request or "{}"))
            except grpc.RpcError as e:
                reply = {"error": "%s: %s: %s" % (method, e.code().name, e.details())}
            except (ValueError, SystemExit) as e:
                reply = {"error": "%s: %s" % (method, e)}
            print(json.dumps(reply), flush=True)


def main():
    if len(sys.argv) == 3 and sys.argv[2] == "--lines":
        serve_lines(sys.argv[1])
        return
    if len(sys.argv) not in (3, 4) or sys.argv[2] not in METHODS:
        sys.exit("usage: cri_client.py SOCKET METHOD [JSON]; METHOD one of " + " ".join(sorted(METHODS)))
    request = json.loads(sys.argv[3]) if len(sys.argv) == 4 else {}
    try:
        with grpc.insecure_channel("unix://" + sys.argv[1]) as channel:
            reply = call(channel, sys.argv[2], request)
    except grpc.RpcError as e:
        print("cri_client: %s: %s: %s" % (sys.argv[2], e.code().name, e.details()), file=sys.stderr)
        sys.exit(1)
    print(json.dumps(reply))


if __name__ == "__main__":
    main()
