# Extra servers for the egress test world (tests/integration/egress_world.sh), used by
# tests/integration/test_egress_sandbox_tools.sh. Sourceable; adds nothing to the traps.
#
#   world_extra_up   (root, right after world_up, same shell: uses EGW_NS_C, EGW_NS_S,
#                    EGW_DIR, EGW_LOG, in_server, world_track) adds:
#     203.0.113.10:443   HTTPS (own test CA, $EGW_DIR/ca/ca.pem, world-readable; leaf for
#                        allowed.test, wild.test, *.wild.test, *.a.wild.test, port.test)
#     203.0.113.10:8080  dumb-HTTP git: $EGW_DIR/srv/git/repo.git (bare, update-server-info);
#                        the working tree's head commit id is in $EGW_DIR/srv/git/HEAD_ID
#     203.0.113.10:8000  "hello" for many connections at once (listen backlog 1024; the
#                        world's port-80 servers keep python's default of 5, which drops
#                        SYNs and stalls hundreds of simultaneous connections)
#     203.0.113.12:80    a PEP 503 simple index (new address on the server ns's lo) serving
#                        one pure-python wheel, exgdemo 0.1 (built here by hand, no network)
#     203.0.113.12:8081  a minimal npm registry (pypi.test:8081): GET /exgdemo is the package
#                        document (one version, 1.0.0), its dist.tarball is
#                        http://pypi.test:8081/exgdemo/-/exgdemo-1.0.0.tgz (package/package.json)
#     198.51.100.1:8081  a server on the CLIENT ns's own veth address (ip netns exec $EGW_NS_C)
#     198.51.100.2:53    a UDP "DNS" sink that logs every datagram it receives
#   and appends to $EGW_DIR/hosts: ownif.test, pypi.test, wild.test, a.wild.test,
#   b.a.wild.test, port.test. It also copies this file to $EGW_DIR/egress_world_extra.sh so
#   the test (which run.sh copies alone) can source the client-side helpers below.
#
# Log lines (appended to $EGW_LOG, like the world's port-80 servers but with the port, so the
# two never match each other's patterns):
#   "<addr>:<port> <METHOD> <path> host=<Host header>"   (HTTP/HTTPS)
#   "<addr>:53 UDP <n> bytes"                             (UDP sink)
#
# Client-side helpers (any user, inside the client ns):
#   extra_log_has PATTERN / extra_log_count PATTERN   grep -E on $EGW_LOG
#   EGX_CA                                            the CA certificate's path
#   EGX_PKG                                           the wheel's project name (exgdemo)

EGX_PKG=exgdemo
EGX_PKG_VER=0.1

EGX_CA=""
[ -n "${EGW_LOG:-}" ] && EGX_CA=$(dirname "$EGW_LOG")/ca/ca.pem

extra_log_has() { grep -qE -- "$1" "$EGW_LOG" 2>/dev/null; }
extra_log_count() { grep -cE -- "$1" "$EGW_LOG" 2>/dev/null || true; }

_egx_server_py() {
    cat <<'PY'
# server.py LOG MODE ADDR PORT [ARG]: MODE = https CERT KEY | files DIR | npm DIR | udp
import functools, http.server, os, socket, socketserver, ssl, sys, threading

log_path, mode, addr, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
log_lock = threading.Lock()

def log(line):
    with log_lock, open(log_path, "a") as f:
        f.write(line + "\n")

if mode == "udp":
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, port))
    while True:
        data, peer = s.recvfrom(65535)
        log("%s:%d UDP %d bytes" % (addr, port, len(data)))

class Base:
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def record(self):
        log("%s:%d %s %s host=%s" % (addr, port, self.command, self.path, self.headers.get("Host", "-")))

class Hello(Base, http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.record()
        body = ("hello from %s:%d\n" % (addr, port)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
    do_HEAD = do_GET

class Files(Base, http.server.SimpleHTTPRequestHandler):
    def send_head(self):
        self.record()
        return super().send_head()

class Npm(Files):
    # /NAME is the package document DIR/NAME.json; everything else is a file under DIR.
    def translate_path(self, path):
        p = super().translate_path(path)
        if "/-/" not in path and os.path.isfile(p.rstrip("/") + ".json"):
            return p.rstrip("/") + ".json"
        return p

class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024

if mode == "https":
    srv = Server((addr, port), Hello)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[5], sys.argv[6])
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True, do_handshake_on_connect=False)
elif mode == "files":
    srv = Server((addr, port), functools.partial(Files, directory=sys.argv[5]))
elif mode == "npm":
    srv = Server((addr, port), functools.partial(Npm, directory=sys.argv[5]))
else:
    srv = Server((addr, port), Hello)
srv.serve_forever()
PY
}

# _egx_make_ca DIR: a test CA and a leaf for the world's HTTPS names.
_egx_make_ca() {
    local d=$1
    mkdir -p "$d" && chmod 755 "$d"
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=ExGuardian test CA" \
        -keyout "$d/ca.key" -out "$d/ca.pem" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
        >/dev/null 2>&1 || return 1
    openssl req -newkey rsa:2048 -nodes -subj "/CN=allowed.test" \
        -keyout "$d/leaf.key" -out "$d/leaf.csr" >/dev/null 2>&1 || return 1
    printf '%s\n' "basicConstraints=CA:FALSE" "keyUsage=digitalSignature,keyEncipherment" \
        "extendedKeyUsage=serverAuth" \
        "subjectAltName=DNS:allowed.test,DNS:wild.test,DNS:*.wild.test,DNS:*.a.wild.test,DNS:port.test" \
        > "$d/leaf.ext"
    openssl x509 -req -in "$d/leaf.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
        -days 2 -sha256 -extfile "$d/leaf.ext" -out "$d/leaf.pem" >/dev/null 2>&1 || return 1
    chmod 644 "$d/ca.pem" "$d/leaf.pem"
    chmod 600 "$d/ca.key" "$d/leaf.key"
}

# _egx_make_git DIR: DIR/repo.git, a bare repo with one commit, ready for dumb HTTP.
_egx_make_git() {
    local d=$1 w
    mkdir -p "$d" && w=$(mktemp -d "$d/.work.XXXXXX") || return 1
    (
        cd "$w" || exit 1
        export GIT_CONFIG_NOSYSTEM=1 HOME="$w"
        git -c init.defaultBranch=main init -q . &&
        echo "served by the egress test world" > README &&
        git add README &&
        git -c user.name=exgw -c user.email=exgw@example.invalid commit -q -m "world repo" &&
        git rev-parse HEAD > "$d/HEAD_ID" &&
        git clone -q --bare . "$d/repo.git" &&
        cd "$d/repo.git" && git update-server-info
    ) || return 1
    rm -rf "$w"
    chmod -R a+rX "$d"
}

# _egx_make_index DIR: DIR/simple/ (PEP 503) and DIR/packages/<wheel>; no network.
_egx_make_index() {
    local d=$1
    mkdir -p "$d/simple/$EGX_PKG" "$d/packages" || return 1
    "${EGW_PYTHON:-/usr/bin/python3}" - "$d" "$EGX_PKG" "$EGX_PKG_VER" <<'PY' || return 1
import base64, hashlib, os, sys, zipfile
d, name, ver = sys.argv[1:4]
dist = "%s-%s.dist-info" % (name, ver)
files = {
    "%s/__init__.py" % name: b'GREETING = "hello from the egress test index"\n',
    dist + "/METADATA": ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: egress test wheel\n" % (name, ver)).encode(),
    dist + "/WHEEL": b"Wheel-Version: 1.0\nGenerator: egress_world_extra\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
for p, data in files.items():
    h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    record.append("%s,sha256=%s,%d" % (p, h, len(data)))
record.append(dist + "/RECORD,,")
files[dist + "/RECORD"] = ("\n".join(record) + "\n").encode()
whl = "%s-%s-py3-none-any.whl" % (name, ver)
path = os.path.join(d, "packages", whl)
with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
    for p, data in files.items():
        z.writestr(p, data)
sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
with open(os.path.join(d, "simple", "index.html"), "w") as f:
    f.write('<!DOCTYPE html><html><body><a href="/simple/%s/">%s</a></body></html>\n' % (name, name))
with open(os.path.join(d, "simple", name, "index.html"), "w") as f:
    f.write('<!DOCTYPE html><html><body><a href="/packages/%s#sha256=%s">%s</a></body></html>\n' % (whl, sha, whl))
with open(os.path.join(d, "WHEEL_SHA256"), "w") as f:
    f.write(sha + "\n")
PY
    chmod -R a+rX "$d"
}

# _egx_make_npm DIR: DIR/exgdemo.json (package document) and DIR/exgdemo/-/exgdemo-1.0.0.tgz.
_egx_make_npm() {
    local d=$1 w
    mkdir -p "$d/exgdemo/-" && w=$(mktemp -d "$d/.work.XXXXXX") || return 1
    mkdir -p "$w/package" &&
    printf '%s\n' '{' '  "name": "exgdemo",' '  "version": "1.0.0",' \
        '  "description": "egress test package",' '  "main": "index.js",' '  "license": "MIT"' '}' \
        > "$w/package/package.json" &&
    echo 'module.exports = "hello from the egress test registry";' > "$w/package/index.js" &&
    tar -C "$w" --owner=0 --group=0 --numeric-owner -czf "$d/exgdemo/-/exgdemo-1.0.0.tgz" package || return 1
    rm -rf "$w"
    "${EGW_PYTHON:-/usr/bin/python3}" - "$d" <<'PY' || return 1
import base64, hashlib, json, os, sys
d = sys.argv[1]
tgz = open(os.path.join(d, "exgdemo", "-", "exgdemo-1.0.0.tgz"), "rb").read()
doc = {
    "name": "exgdemo",
    "dist-tags": {"latest": "1.0.0"},
    "versions": {"1.0.0": {
        "name": "exgdemo", "version": "1.0.0", "main": "index.js", "license": "MIT",
        "dist": {
            "tarball": "http://pypi.test:8081/exgdemo/-/exgdemo-1.0.0.tgz",
            "shasum": hashlib.sha1(tgz).hexdigest(),
            "integrity": "sha512-" + base64.b64encode(hashlib.sha512(tgz).digest()).decode(),
        },
    }},
}
json.dump(doc, open(os.path.join(d, "exgdemo.json"), "w"))
PY
    chmod -R a+rX "$d"
}

# _egx_start NS LOGNAME ARGS...: a server from server.py in NS, tracked by world_down.
_egx_start() {
    local ns=$1 name=$2; shift 2
    ip netns exec "$ns" "${EGW_PYTHON:-/usr/bin/python3}" "$EGW_DIR/extra-server.py" "$EGW_LOG" "$@" \
        </dev/null >"$EGW_DIR/extra-$name.err" 2>&1 &
    world_track $!
}

world_extra_up() {
    [ "$(id -u)" -eq 0 ] || { echo "world_extra_up: needs root" >&2; return 1; }
    [ -n "${EGW_DIR:-}" ] && [ -d "$EGW_DIR" ] || { echo "world_extra_up: world_up first" >&2; return 1; }
    local py=${EGW_PYTHON:-/usr/bin/python3}
    install -m 644 "${BASH_SOURCE[0]}" "$EGW_DIR/egress_world_extra.sh" || return 1
    _egx_server_py > "$EGW_DIR/extra-server.py"
    _egx_make_ca "$EGW_DIR/ca" || { echo "world_extra_up: CA failed" >&2; return 1; }
    _egx_make_git "$EGW_DIR/srv/git" || { echo "world_extra_up: git repo failed" >&2; return 1; }
    _egx_make_index "$EGW_DIR/srv/pypi" || { echo "world_extra_up: index failed" >&2; return 1; }
    _egx_make_npm "$EGW_DIR/srv/npm" || { echo "world_extra_up: npm registry failed" >&2; return 1; }
    chmod 755 "$EGW_DIR/srv"
    cat >> "$EGW_DIR/hosts" <<'HOSTS'
198.51.100.1 ownif.test
203.0.113.12 pypi.test
203.0.113.10 wild.test
203.0.113.10 a.wild.test
203.0.113.10 b.a.wild.test
203.0.113.10 port.test
HOSTS
    ip -n "$EGW_NS_S" addr add 203.0.113.12/32 dev lo || return 1

    _egx_start "$EGW_NS_S" https https 203.0.113.10 443 "$EGW_DIR/ca/leaf.pem" "$EGW_DIR/ca/leaf.key"
    _egx_start "$EGW_NS_S" git files 203.0.113.10 8080 "$EGW_DIR/srv/git"
    _egx_start "$EGW_NS_S" many hello 203.0.113.10 8000
    _egx_start "$EGW_NS_S" pypi files 203.0.113.12 80 "$EGW_DIR/srv/pypi"
    _egx_start "$EGW_NS_S" npm npm 203.0.113.12 8081 "$EGW_DIR/srv/npm"
    _egx_start "$EGW_NS_S" udp udp 198.51.100.2 53
    _egx_start "$EGW_NS_C" ownif hello 198.51.100.1 8081

    local end=$((SECONDS + 20))
    until ip netns exec "$EGW_NS_C" "$py" -c '
import socket
for a in (("203.0.113.10", 443), ("203.0.113.10", 8080), ("203.0.113.10", 8000), ("203.0.113.12", 80), ("203.0.113.12", 8081), ("198.51.100.1", 8081)):
    socket.create_connection(a, timeout=1).close()' 2>/dev/null &&
          ip netns exec "$EGW_NS_S" ss -Hlun 'sport = :53' | grep -q 198.51.100.2; do
        if [ "$SECONDS" -ge "$end" ]; then
            echo "world_extra_up: servers did not come up" >&2
            cat "$EGW_DIR"/extra-*.err >&2
            return 1
        fi
        sleep 0.1
    done
    return 0
}
