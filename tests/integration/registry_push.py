#!/usr/bin/python3
"""Pushes the image of an OCI archive that oci_image.py wrote into a registry over HTTPS (the
distribution API's push side, monolithic uploads): the egress world's registry (Debian's
docker-registry) gets its image from local files, nothing pulled.

    registry_push.py ARCHIVE.tar ADDRESS:PORT CA.pem
      The image goes under its reference's repository and tag (the archive's
      org.opencontainers.image.ref.name without its registry part: localhost/exg-bb:1 ->
      exg-bb:1). The registry's certificate must chain to CA.pem (its name is not checked:
      the push goes to the address, the certificate names the world's host names).
"""
import http.client
import json
import ssl
import sys
import tarfile
import urllib.parse


def load(archive):
    with tarfile.open(archive) as t:
        files = {m.name: t.extractfile(m).read() for m in t.getmembers() if m.isfile()}
    desc = json.loads(files["index.json"])["manifests"][0]
    ref = desc["annotations"]["org.opencontainers.image.ref.name"]
    repo, _, tag = ref.rpartition(":")
    repo = repo.split("/", 1)[1] if "/" in repo else repo  # (without the registry the reference names)
    blobs = {"sha256:" + n[len("blobs/sha256/"):]: data for n, data in files.items() if n.startswith("blobs/sha256/")}
    return repo, tag, desc, blobs


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    archive, address, ca = sys.argv[1:]
    repo, tag, desc, blobs = load(archive)
    ctx = ssl.create_default_context(cafile=ca)
    ctx.check_hostname = False
    conn = http.client.HTTPSConnection(address, context=ctx, timeout=30)

    def call(method, path, body=b"", headers=None, want=(200, 201, 202)):
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        data = r.read()
        if r.status not in want:
            sys.exit(f"registry_push.py: {method} {path}: {r.status} {data[:300]!r}")
        return r

    manifest = blobs[desc["digest"]]
    for digest in [d["digest"] for d in [json.loads(manifest)["config"]] + json.loads(manifest)["layers"]]:
        loc = call("POST", f"/v2/{repo}/blobs/uploads/").getheader("Location")
        u = urllib.parse.urlsplit(loc)
        query = (u.query + "&" if u.query else "") + "digest=" + urllib.parse.quote(digest)
        call("PUT", f"{u.path}?{query}", blobs[digest], {"Content-Type": "application/octet-stream"})
    call("PUT", f"/v2/{repo}/manifests/{tag}", manifest, {"Content-Type": desc["mediaType"]})
    print(f"pushed {repo}:{tag} ({desc['digest']})")


if __name__ == "__main__":
    main()
