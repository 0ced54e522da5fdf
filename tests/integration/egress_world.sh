# The egress test world: sourceable, needs root. Everything lives in two network
# namespaces this file creates; nothing in them can reach a real address or this
# machine's own interfaces.
#
#   exgw-$$-c  client side (where a sandbox and the proxy run): veth 198.51.100.1/24,
#              default route via 198.51.100.2, a loopback service on 127.0.0.1:80.
#   exgw-$$-s  servers: veth 198.51.100.2/24; on lo 203.0.113.10 (allowed.test, other.test),
#              203.0.113.11 (denied.test), 169.254.169.254 (metadata), 10.0.0.5 (private);
#              198.51.100.77 (gained.test: an address the client side gains during
#              test_egress_sandbox_host_address.sh, then refused there as the host's own);
#              an HTTP server on port 80 of each; on 203.0.113.10:22 a server-first one (an
#              ssh-like banner "SSH-2.0-exgworld", then "got <the client's first line>").
#              No default route, no forwarding.
#
# Names come from a hosts file bind-mounted over /etc/hosts (and a resolv.conf
# pointing at 127.0.0.53, where nothing listens) in a private mount namespace
# for every command run on the client side; when $EGW_DIR/ca-certificates.crt exists
# (egress_world_secrets.sh), it is bound over the system CA bundle there too.
#
#   world_up                  builds it (servers answer "hello from <addr>"; GET /big is
#                             $EGW_BIG, 50 MiB, sha256 in $EGW_BIG_SHA)
#   world_down                kills the servers, deletes the namespaces (also on exit)
#   in_client CMD...          runs CMD as root in the client ns with the hosts file
#   in_client_as USER CMD...  the same as USER
#   in_client_bg CMD...       in the background; its pid in EGW_BG_PID
#   server_log_has PATTERN    a server logged a request matching PATTERN (grep -E);
#                             log lines: "<server addr> <METHOD> <path> host=<Host header>"
#   server_log_count          number of requests the servers received
#   conn_log_count PATTERN    number of TCP connections the port-80 and banner servers
#                             accepted matching PATTERN (grep -E), a bare one (no byte) too;
#                             lines: "<server addr>:<port> accepted" in $EGW_DIR/connections.log
# Variables: EGW_NS_C, EGW_NS_S, EGW_DIR (files), EGW_LOG (the servers' request log).

EGW_NS_C=exgw-$$-c
EGW_NS_S=exgw-$$-s
EGW_DIR=""
EGW_LOG=""
EGW_BIG=""
EGW_BIG_SHA=""
_EGW_PIDS=()
_EGW_UP=0
EGW_PYTHON=${EGW_PYTHON:-/usr/bin/python3}

_egw_server_py() {
    cat <<'PY'
import http.server, os, socket, socketserver, sys, threading

log_path, big_path = sys.argv[1], sys.argv[2]
addrs = sys.argv[3:]
log_lock = threading.Lock()
conn_log = os.path.join(os.path.dirname(log_path), "connections.log")

def accepted(addr, port):
    with log_lock, open(conn_log, "a") as f:
        f.write("%s:%d accepted\n" % (addr, port))

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def record(self):
        line = "%s %s %s host=%s\n" % (self.server.server_address[0], self.command, self.path,
                                       self.headers.get("Host", "-"))
        with log_lock, open(log_path, "a") as f:
            f.write(line)
    def do_GET(self):
        self.record()
        if self.path == "/big":
            size = os.path.getsize(big_path)
            self.send_response(200)
            self.send_header("Content-Length", str(size))
            self.send_header("Connection", "close")
            self.end_headers()
            with open(big_path, "rb") as f:
                self.wfile.write(f.read())
            self.close_connection = True
            return
        body = ("hello from %s\n" % self.server.server_address[0]).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
    def do_POST(self):
        self.record()
        n = int(self.headers.get("Content-Length", "0") or 0)
        data = self.rfile.read(n) if n else b""
        body = ("hello from %s, got %d bytes\n" % (self.server.server_address[0], len(data))).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_HEAD = do_GET

class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    allow_reuse_address = True
    def verify_request(self, request, client_address):
        accepted(self.server_address[0], 80)
        return True

# Server-first, like ssh or SMTP: the banner goes out before the client says anything.
def banner(addr, port):
    l = socket.create_server((addr, port), backlog=64)
    while True:
        c, _ = l.accept()
        accepted(addr, port)
        def talk(c=c):
            with c:
                c.settimeout(10)
                try:
                    c.sendall(b"SSH-2.0-exgworld\r\n")
                    c.sendall(b"got " + c.makefile("rb").readline())
                except OSError:
                    pass
        threading.Thread(target=talk, daemon=True).start()

if "203.0.113.10" in addrs:
    threading.Thread(target=banner, args=("203.0.113.10", 22), daemon=True).start()
servers = [Server((a, 80), Handler) for a in addrs]
for s in servers[1:]:
    threading.Thread(target=s.serve_forever, daemon=True).start()
servers[0].serve_forever()
PY
}

# _egw_exec NS CMD...: CMD in the namespace NS, in a private mount namespace with the
# world's hosts and resolv.conf. Like `ip netns exec` (a sysfs of NS on /sys), except that the
# cgroup filesystems stay mounted under it: OCI runtimes (the container layer) need them, and
# `ip netns exec` drops everything below /sys.
_EGW_ENTER='d=$0
mkdir -p "$d/cgroup-keep" && mount --rbind /sys/fs/cgroup "$d/cgroup-keep" &&
umount -l /sys && mount -t sysfs sysfs /sys &&
mount --rbind "$d/cgroup-keep" /sys/fs/cgroup && umount -l "$d/cgroup-keep" &&
mount --bind "$d/hosts" /etc/hosts && mount --bind "$d/resolv.conf" /etc/resolv.conf &&
{ [ ! -f "$d/ca-certificates.crt" ] || mount --bind "$d/ca-certificates.crt" /etc/ssl/certs/ca-certificates.crt; } &&
exec "$@"'
_egw_exec() {
    local ns=$1; shift
    unshare --mount --propagation private nsenter --net="/run/netns/$ns" bash -c "$_EGW_ENTER" "$EGW_DIR" "$@"
}

in_client() { _egw_exec "$EGW_NS_C" "$@"; }
in_client_as() {
    local user=$1; shift
    _egw_exec "$EGW_NS_C" setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups --reset-env -- "$@"
}
in_server() { ip netns exec "$EGW_NS_S" "$@"; }
# in_client_bg CMD...: like in_client, in the background; EGW_BG_PID is CMD's pid (killed by
# world_down). Redirect its stdio at the call.
in_client_bg() {
    unshare --mount --propagation private nsenter --net="/run/netns/$EGW_NS_C" bash -c "$_EGW_ENTER" "$EGW_DIR" "$@" &
    EGW_BG_PID=$!
    _EGW_PIDS+=("$EGW_BG_PID")
}

server_log_has() { grep -qE -- "$1" "$EGW_LOG" 2>/dev/null; }
server_log_count() { grep -c . "$EGW_LOG" 2>/dev/null || true; }
conn_log_count() { grep -cE -- "$1" "$(dirname "$EGW_LOG")/connections.log" 2>/dev/null || true; }

world_up() {
    [ "$(id -u)" -eq 0 ] || { echo "world_up: needs root" >&2; return 1; }
    EGW_DIR=$(mktemp -d /tmp/exgw.XXXXXX) || return 1
    chmod 755 "$EGW_DIR"
    EGW_LOG=$EGW_DIR/requests.log
    : > "$EGW_LOG"
    chmod 644 "$EGW_LOG"
    _EGW_UP=1
    cat > "$EGW_DIR/hosts" <<'HOSTS'
127.0.0.1 localhost
203.0.113.10 allowed.test
203.0.113.10 other.test
203.0.113.11 denied.test
169.254.169.254 meta.test
10.0.0.5 private.test
127.0.0.1 rebind.test
127.0.0.1 mixed.test
203.0.113.10 mixed.test
203.0.113.10 tp.wild.test
169.254.169.254 meta.wild.test
198.51.100.77 gained.test
HOSTS
    echo "nameserver 127.0.0.53" > "$EGW_DIR/resolv.conf"
    chmod 644 "$EGW_DIR/hosts" "$EGW_DIR/resolv.conf"
    _egw_server_py > "$EGW_DIR/server.py"
    EGW_BIG=$EGW_DIR/big.bin
    head -c $((50 * 1024 * 1024)) /dev/urandom > "$EGW_BIG"
    EGW_BIG_SHA=$(sha256sum "$EGW_BIG" | cut -d' ' -f1)

    ip netns add "$EGW_NS_C" && ip netns add "$EGW_NS_S" || return 1
    ip link add exgw$$c type veth peer name exgw$$s || return 1
    ip link set exgw$$c netns "$EGW_NS_C" && ip link set exgw$$s netns "$EGW_NS_S" || return 1
    ip -n "$EGW_NS_C" link set lo up
    ip -n "$EGW_NS_S" link set lo up
    ip -n "$EGW_NS_C" addr add 198.51.100.1/24 dev exgw$$c
    ip -n "$EGW_NS_S" addr add 198.51.100.2/24 dev exgw$$s
    ip -n "$EGW_NS_C" link set exgw$$c up
    ip -n "$EGW_NS_S" link set exgw$$s up
    ip -n "$EGW_NS_C" route add default via 198.51.100.2 || return 1
    local a
    for a in 203.0.113.10 203.0.113.11 169.254.169.254 10.0.0.5 198.51.100.77; do
        ip -n "$EGW_NS_S" addr add "$a/32" dev lo || return 1
    done
    # The servers' replies go back over the veth (198.51.100.0/24 is connected).
    ip netns exec "$EGW_NS_S" "$EGW_PYTHON" "$EGW_DIR/server.py" "$EGW_LOG" "$EGW_BIG" \
        203.0.113.10 203.0.113.11 169.254.169.254 10.0.0.5 198.51.100.77 </dev/null >"$EGW_DIR/server-s.err" 2>&1 &
    _EGW_PIDS+=($!)
    disown $!  # no "Killed" notice at world_down
    ip netns exec "$EGW_NS_C" "$EGW_PYTHON" "$EGW_DIR/server.py" "$EGW_LOG" "$EGW_BIG" 127.0.0.1 \
        </dev/null >"$EGW_DIR/server-c.err" 2>&1 &
    _EGW_PIDS+=($!)
    disown $!
    local end=$((SECONDS + 20))
    until in_client "$EGW_PYTHON" -c '
import socket, sys
for a in ("203.0.113.10", "203.0.113.11", "169.254.169.254", "10.0.0.5", "198.51.100.77", "127.0.0.1", "203.0.113.10:22"):
    a, _, p = a.partition(":")
    socket.create_connection((a, int(p or 80)), timeout=1).close()' 2>/dev/null; do
        if [ "$SECONDS" -ge "$end" ]; then
            echo "world_up: servers did not come up" >&2
            cat "$EGW_DIR"/server-*.err >&2
            return 1
        fi
        sleep 0.1
    done
    : > "$EGW_LOG"  # the readiness probes made no HTTP requests, but start clean anyway
    : > "$EGW_DIR/connections.log"  # (they were connections)
    chmod 644 "$EGW_DIR/connections.log"
    return 0
}

world_down() {
    local p ns
    for p in "${_EGW_PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
    # Anything else still running inside the world's namespaces was started by this test too.
    for ns in "$EGW_NS_C" "$EGW_NS_S"; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
    done
    for p in "${_EGW_PIDS[@]}"; do wait "$p" 2>/dev/null; done
    _EGW_PIDS=()
    ip netns del "$EGW_NS_C" 2>/dev/null
    ip netns del "$EGW_NS_S" 2>/dev/null
    [ -n "$EGW_DIR" ] && [ "$_EGW_UP" = 1 ] && rm -rf -- "$EGW_DIR"
    _EGW_UP=0
    return 0
}

# world_parent_proxy_up (root, after world_up): a proxy of the user's on 198.51.100.2:3128 in the
# servers' namespace (tests/integration/parent_proxy.py: CONNECT and SOCKS5 to the world's names);
# its request log is $EGW_PARENT_LOG.
EGW_PARENT_LOG=""
world_parent_proxy_up() {
    EGW_PARENT_LOG=$EGW_DIR/parent.log
    : > "$EGW_PARENT_LOG"
    chmod 666 "$EGW_PARENT_LOG"
    ip netns exec "$EGW_NS_S" "$EGW_PYTHON" "$(dirname "${BASH_SOURCE[0]}")/parent_proxy.py" "$EGW_PARENT_LOG" \
        "$EGW_DIR/hosts" tcp:198.51.100.2:3128 </dev/null >"$EGW_DIR/parent.err" 2>&1 &
    _EGW_PIDS+=($!)
    disown $!
    local end=$((SECONDS + 20))
    until in_client "$EGW_PYTHON" -c 'import socket; socket.create_connection(("198.51.100.2", 3128), timeout=1).close()' \
            2>/dev/null; do
        [ "$SECONDS" -lt "$end" ] || { cat "$EGW_DIR/parent.err" >&2; return 1; }
        sleep 0.1
    done
}

# world_track PID: another process of the test's own, killed by world_down.
# world_registry_up DIR UNPACKED (root, after world_up and world_secrets_up): Debian's
# docker-registry (unpacked by run.sh into UNPACKED, never installed: its postinst starts a
# service) behind TLS on 203.0.113.10:5000 of the server namespace, its certificate from the
# world's CA ($EGW_DIR/secrets/ca.pem, in the client side's trust store) for tp.wild.test,
# its storage in $EGW_DIR/registry/store. It holds exg-pulled:1 (busybox and a
# file /pulled), an image DIR/oci_image.py builds here and DIR/registry_push.py pushes to it.
# Its log, one JSON object a line (each request's "response completed" line carries
# http.request.method, .uri, .host and .remoteaddr): $EGW_DIR/registry/registry.log.
world_registry_up() {
    local dir=$1 u=$2 r=$EGW_DIR/registry
    [ -x "$u/docker-registry/usr/bin/docker-registry" ] || { echo "world_registry_up: no docker-registry unpacked in $u" >&2; return 1; }
    [ -s "$EGW_DIR/secrets/ca.pem" ] || { echo "world_registry_up: no world CA (world_secrets_up first)" >&2; return 1; }
    mkdir -p "$r/root/bin" "$r/store" && chmod 755 "$r" && cp "$(command -v busybox)" "$r/root/bin/" && ln -s busybox "$r/root/bin/sh" \
        && echo "pulled through the proxy" > "$r/root/pulled" || return 1
    "$EGW_PYTHON" "$dir/oci_image.py" "$r/root" localhost/exg-pulled:1 "$r/img.tar" /bin/sh || return 1
    _egs_leaf "$EGW_DIR/secrets/ca" "$r/tls" tp.wild.test || return 1
    cat > "$r/config.yml" <<YML || return 1
version: 0.1
log:
  level: info
  formatter: json
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: $r/store
http:
  addr: 203.0.113.10:5000
  secret: exguardian-test-world
  tls:
    certificate: $r/tls.pem
    key: $r/tls.key
YML
    : > "$r/registry.log" && chmod 644 "$r/registry.log"
    ip netns exec "$EGW_NS_S" "$u/docker-registry/usr/bin/docker-registry" serve "$r/config.yml" \
        </dev/null >>"$r/registry.log" 2>&1 &
    _EGW_PIDS+=($!)
    disown $!
    local end=$((SECONDS + 20))
    until ip netns exec "$EGW_NS_S" "$EGW_PYTHON" "$dir/registry_push.py" "$r/img.tar" 203.0.113.10:5000 \
            "$EGW_DIR/secrets/ca.pem" >"$r/push.out" 2>&1; do
        [ "$SECONDS" -ge "$end" ] && { echo "world_registry_up: the registry did not take the image" >&2; cat "$r/push.out" "$r/registry.log" >&2; return 1; }
        sleep 0.2
    done
}

# world_sshd_up UNPACKED (root, after world_up): Debian's sshd (openssh-server unpacked by run.sh
# into UNPACKED, never installed: its postinst starts a service) on 203.0.113.10:2222 of the server
# namespace, its sftp internal, root's login by key only: $EGW_DIR/sshd/client_key (world-
# readable: the test's client copies it). It serves $EGW_DIR/sshd/srv (a file "file"). sshd
# wants its privilege separation user and /run/sshd: it runs in a mount namespace of its own
# with a copy of /etc/passwd that adds the user (nobody's ids) and a tmpfs on /run (the host's
# users and /run untouched). Its log: $EGW_DIR/sshd/log.
world_sshd_up() {
    local u=$1 d=$EGW_DIR/sshd
    [ -x "$u/openssh-server/usr/sbin/sshd" ] || { echo "world_sshd_up: no openssh-server unpacked in $u" >&2; return 1; }
    mkdir -p "$d/srv" && chmod 755 "$d" "$d/srv" && echo "served over sshfs" > "$d/srv/file" || return 1
    ssh-keygen -q -t ed25519 -N '' -f "$d/host_key" && ssh-keygen -q -t ed25519 -N '' -f "$d/client_key" || return 1
    chmod 644 "$d/client_key" && cp "$d/client_key.pub" "$d/authorized_keys" || return 1
    { cat /etc/passwd; echo "sshd:x:65534:65534:sshd privilege separation:/run/sshd:/usr/sbin/nologin"; } > "$d/passwd"
    : > "$d/log" && chmod 644 "$d/log" || return 1
    cat > "$d/config" <<CFG || return 1
ListenAddress 203.0.113.10:2222
HostKey $d/host_key
AuthorizedKeysFile $d/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
Subsystem sftp internal-sftp
PidFile none
LogLevel VERBOSE
CFG
    ip netns exec "$EGW_NS_S" unshare -m --propagation private sh -c \
        'mount --bind "$1/passwd" /etc/passwd && mount -t tmpfs -o mode=0755 exg-run /run && mkdir -m 0755 /run/sshd && exec "$2" -D -e -f "$1/config"' \
        _ "$d" "$u/openssh-server/usr/sbin/sshd" </dev/null >"$d/log" 2>&1 &
    _EGW_PIDS+=($!)
    disown $!
    local end=$((SECONDS + 20))
    until grep -q "Server listening on 203.0.113.10 port 2222" "$d/log"; do
        [ "$SECONDS" -ge "$end" ] && { echo "world_sshd_up: sshd did not come up" >&2; cat "$d/log" >&2; return 1; }
        sleep 0.1
    done
}

# world_vpn_up UNPACKED (root, after world_up): an OpenVPN server (Debian's openvpn unpacked by
# run.sh into UNPACKED, with the libraries this host lacks) on 203.0.113.10:1194 of the server
# namespace, TCP, a static key ($EGW_DIR/vpn/key, world-readable: the test's client needs it),
# its tunnel 10.8.0.1 <-> 10.8.0.2. Its log: $EGW_DIR/vpn/server.log.
world_vpn_up() {
    local u=$1 v=$EGW_DIR/vpn
    local libs=$u/liblzo2-2/lib/x86_64-linux-gnu:$u/libnl-genl-3-200/lib/x86_64-linux-gnu:$u/libpkcs11-helper1/usr/lib/x86_64-linux-gnu
    [ -x "$u/openvpn/usr/sbin/openvpn" ] || { echo "world_vpn_up: no openvpn unpacked in $u" >&2; return 1; }
    mkdir -p "$v" && chmod 755 "$v" || return 1
    LD_LIBRARY_PATH=$libs "$u/openvpn/usr/sbin/openvpn" --genkey secret "$v/key" >/dev/null 2>&1 && chmod 644 "$v/key" || return 1
    echo "$libs" > "$v/libs"
    ip netns exec "$EGW_NS_S" env LD_LIBRARY_PATH="$libs" "$u/openvpn/usr/sbin/openvpn" --dev tun --proto tcp-server \
        --local 203.0.113.10 --port 1194 --ifconfig 10.8.0.1 10.8.0.2 --secret "$v/key" --cipher AES-256-CBC \
        --auth SHA256 --verb 3 </dev/null >"$v/server.log" 2>&1 &
    _EGW_PIDS+=($!)
    disown $!
    chmod 644 "$v/server.log"
    local end=$((SECONDS + 20))
    # (its log, not a probe connection: the p2p server takes one client at a time)
    until grep -q "Listening for incoming TCP connection" "$v/server.log"; do
        [ "$SECONDS" -ge "$end" ] && { echo "world_vpn_up: the OpenVPN server did not come up" >&2; cat "$v/server.log" >&2; return 1; }
        sleep 0.1
    done
}

world_track() { _EGW_PIDS+=("$1"); }

_egw_exit() {
    world_down
    if declare -F _lib_exit >/dev/null; then _lib_exit; fi
}
trap _egw_exit EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
