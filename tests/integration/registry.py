#!/usr/bin/python3
"""A read-only OCI registry (the distribution API's pull side, plain HTTP) serving one image from
an OCI archive that oci_image.py wrote: images for tests, built from local files, nothing pulled.

    registry.py ARCHIVE.tar ADDRESS PORT LOG
      The image is served under its reference's repository and tag (the archive's
      org.opencontainers.image.ref.name without its registry part: localhost/exg-bb:1 ->
      exg-bb:1). Each request is appended to LOG as "ADDRESS METHOD PATH host=HOST" (the egress
      world's request log: the test reads who reached it).

Routes: GET /v2/ (the API version check), GET and HEAD /v2/REPO/manifests/TAG|DIGEST (the
manifest, its media type and Docker-Content-Digest), GET and HEAD /v2/REPO/blobs/DIGEST (config and
layer). Anything else is 404 with the API's error body.
"""
import http.server
import json
import socketserver
import sys
import tarfile


def load(archive):
    with tarfile.open(archive) as t:
        files = {m.name: t.extractfile(m).read() for m in t.getmembers() if m.isfile()}
    index = json.loads(files["index.json"])
    desc = index["manifests"][0]
    ref = desc["annotations"]["org.opencontainers.image.ref.name"]
    repo, _, tag = ref.rpartition(":")
    repo = repo.split("/", 1)[1] if "/" in repo else repo  # (without the registry the reference names)
    blobs = {"sha256:" + n[len("blobs/sha256/"):]: data for n, data in files.items() if n.startswith("blobs/sha256/")}
    return repo, tag, desc, blobs


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    archive, address, port, log = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    repo, tag, manifest_desc, blobs = load(archive)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def answer(self, status, body, media_type="application/json", digest=None):
            self.send_response(status)
            self.send_header("Content-Type", media_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Docker-Distribution-API-Version", "registry/2.0")
            if digest:
                self.send_header("Docker-Content-Digest", digest)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def route(self):
            with open(log, "a") as f:
                f.write(f"{address} {self.command} {self.path} host={self.headers.get('Host', '')}\n")
            path = self.path.split("?", 1)[0]
            if path in ("/v2/", "/v2"):
                return self.answer(200, b"{}")
            prefix = f"/v2/{repo}/"
            if path.startswith(prefix + "manifests/"):
                ref = path[len(prefix + "manifests/"):]
                if ref in (tag, manifest_desc["digest"]):
                    d = manifest_desc["digest"]
                    return self.answer(200, blobs[d], manifest_desc["mediaType"], d)
            if path.startswith(prefix + "blobs/"):
                d = path[len(prefix + "blobs/"):]
                if d in blobs:
                    return self.answer(200, blobs[d], "application/octet-stream", d)
            self.answer(404, json.dumps({"errors": [{"code": "NAME_UNKNOWN", "message": path}]}).encode())

        do_GET = do_HEAD = route

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True
        allow_reuse_address = True

    Server((address, port), Handler).serve_forever()


if __name__ == "__main__":
    main()
