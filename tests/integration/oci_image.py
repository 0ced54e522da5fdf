#!/usr/bin/python3
"""Writes an OCI image archive (an image layout in a tar, what `ctr images import` reads) of one
layer made from a local directory: images for tests, built from local files, nothing pulled.

    oci_image.py [--docker-manifest] ROOTFS NAME OUT.tar [ENTRYPOINT...]
      NAME: the image's reference (org.opencontainers.image.ref.name, e.g. localhost/exg-pause:1)
      --docker-manifest: a manifest.json beside the layout too (the docker-archive form, what
        `docker load` before Docker 25 reads: Debian 12's docker.io 20.10), naming the same
        config and layer blobs; podman load takes either
"""
import hashlib
import io
import json
import os
import sys
import tarfile


def blob(out, files, data, media_type):
    digest = hashlib.sha256(data).hexdigest()
    files.append(("blobs/sha256/" + digest, data))
    return {"mediaType": media_type, "digest": "sha256:" + digest, "size": len(data)}


def layer_tar(rootfs):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for dirpath, dirnames, filenames in os.walk(rootfs):
            dirnames.sort()
            for name in sorted(dirnames) + sorted(filenames):
                path = os.path.join(dirpath, name)
                info = t.gettarinfo(path, arcname=os.path.relpath(path, rootfs))
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                info.mtime = 0
                if info.isfile():
                    with open(path, "rb") as f:
                        t.addfile(info, f)
                else:
                    t.addfile(info)
    return buf.getvalue()


def main():
    args = sys.argv[1:]
    docker_manifest = args[:1] == ["--docker-manifest"]
    if docker_manifest:
        args = args[1:]
    if len(args) < 3:
        sys.exit(__doc__)
    rootfs, name, out = args[:3]
    entrypoint = args[3:]
    files = []
    layer = layer_tar(rootfs)
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    layer_desc = blob(out, files, layer, "application/vnd.oci.image.layer.v1.tar")
    config = {"architecture": "amd64", "os": "linux",
              "config": {"Entrypoint": entrypoint, "Env": ["PATH=/bin"], "WorkingDir": "/"},
              "rootfs": {"type": "layers", "diff_ids": [diff_id]}}
    config_desc = blob(out, files, json.dumps(config).encode(), "application/vnd.oci.image.config.v1+json")
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": config_desc, "layers": [layer_desc]}
    manifest_desc = blob(out, files, json.dumps(manifest).encode(), "application/vnd.oci.image.manifest.v1+json")
    manifest_desc["annotations"] = {"org.opencontainers.image.ref.name": name}
    manifest_desc["platform"] = {"architecture": "amd64", "os": "linux"}
    index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [manifest_desc]}
    files.append(("index.json", json.dumps(index).encode()))
    if docker_manifest:
        files.append(("manifest.json", json.dumps([{"Config": "blobs/sha256/" + config_desc["digest"][7:],
                                                    "RepoTags": [name],
                                                    "Layers": ["blobs/sha256/" + layer_desc["digest"][7:]]}]).encode()))
    files.append(("oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode()))
    with tarfile.open(out, "w") as t:
        for path, data in files:
            info = tarfile.TarInfo(path)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))


if __name__ == "__main__":
    main()
