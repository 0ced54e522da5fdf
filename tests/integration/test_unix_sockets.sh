#!/usr/bin/env bash
# Host pathname Unix sockets (issue 12, part 4): a socket the host bound is unreachable from
# inside, wherever the sandbox's read-only view shows it (under /var/lib, in the workspace),
# and its listener receives nothing; network.allowUnixSockets names the exceptions,
# network.allowAllUnixSockets lifts the masks; sockets the code makes inside keep working.
source "$(dirname "$0")/lib.sh"

new_workspace
require_sandbox || finish
command -v python3 >/dev/null || { skip "python3 is not installed"; finish; }

SVC=$O/svc
mkdir -p "$SVC" && chmod 755 "$SVC"
cat > "$SVC/listen.py" <<'PY'
import os, socket, sys
path, log = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
os.chmod(path, 0o777)  # only the sandbox stops the connect, not the socket's mode
s.listen(8)
while True:
    c, _ = s.accept()
    data = c.recv(100)
    with open(log, "a") as f:
        f.write("received %r\n" % data)
    c.sendall(b"hello from the host listener\n")
    c.close()
PY
cat > "$SVC/client.py" <<'PY'
import errno, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(sys.argv[1])
    s.sendall(b"EXG-FROM-INSIDE")
    print("connected:", s.recv(100).decode().strip())
except OSError as e:
    print("refused:", errno.errorcode.get(e.errno, e.errno))
PY
start_listener() {  # PATH LOG
    python3 "$SVC/listen.py" "$1" "$2" & track_bg $!
    local i=0
    while [ ! -S "$1" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
    [ -S "$1" ] || fail "listener on $1 did not start"
}
HOST_SOCK=$SVC/host.sock HOST_LOG=$SVC/host.log
WS_SOCK=$WS/ws-host.sock WS_LOG=$SVC/ws.log
start_listener "$HOST_SOCK" "$HOST_LOG"
start_listener "$WS_SOCK" "$WS_LOG"
: > "$HOST_LOG"; : > "$WS_LOG"; chmod 666 "$HOST_LOG" "$WS_LOG"

# The control: the listeners answer a client on the host.
run python3 "$SVC/client.py" "$HOST_SOCK"
check "control: the host listener answers on the host" grep -q "connected: hello from the host" <<<"$OUT"
: > "$HOST_LOG"

connect_in() {  # PATH [run options]
    local p=$1; shift
    run sbx "$@" -- python3 "$SVC/client.py" "$p"
}
nothing_received() { ! grep -q EXG-FROM-INSIDE "$1"; }
received() { grep -q EXG-FROM-INSIDE "$1"; }

for s in "$HOST_SOCK" "$WS_SOCK"; do
    log=$HOST_LOG; [ "$s" = "$WS_SOCK" ] && log=$WS_LOG
    connect_in "$s"
    check "default: connect to the host's $s fails inside" grep -q "^refused:" <<<"$OUT"
    [ "$STATUS" -eq 0 ] || { fail "default: the client did not run (status $STATUS)"; show_last; }
    check "default: the listener of $s received nothing" nothing_received "$log"
done
# The mask is a mount point: the socket cannot be renamed away or replaced either.
# EBUSY; gVisor answers the rename of this mask with EPERM. (Renamed by python: mv stats it
# first, which gVisor answers with EPERM too, so there mv would never try the rename.)
mask_busy='OSError: \[Errno 16\] Device or resource busy'
on_layer gvisor && mask_busy='PermissionError: \[Errno 1\] Operation not permitted'
expect_refused "$mask_busy" '' -- \
    python3 -c 'import os, sys; os.rename(sys.argv[1], sys.argv[2])' "$WS_SOCK" "$WS/moved.sock"
check "the workspace socket is still there on the host" test -S "$WS_SOCK"

# -v and --dry-run say how many were masked.
run sbx --dry-run -- true
check "--dry-run lists the mask over $HOST_SOCK" grep -q "mask-file $HOST_SOCK" <<<"$OUT$ERR"
check "--dry-run says how many host sockets are masked" grep -Eq "host Unix sockets: [0-9]+ masked" <<<"$OUT$ERR"

# A socket bound in another network namespace is reachable by its path all the same (a path
# lookup crosses namespaces): the scan reads every namespace it can see, one process each, among
# 600 more processes than usual here (a desktop's count). As an ordinary user the other
# namespace is the user's own (unshare -r), the only kind it can read.
if unshare_net=(unshare --net) && [ "$EXG_AS" = user ]; then unshare_net=(unshare -r --net); fi
if "${unshare_net[@]}" true 2>/dev/null; then
    for _ in $(seq 600); do sleep 600 & track_bg $!; done
    NS_SOCK=$SVC/other-netns.sock NS_LOG=$SVC/other-netns.log
    : > "$NS_LOG"; chmod 666 "$NS_LOG"
    "${unshare_net[@]}" python3 "$SVC/listen.py" "$NS_SOCK" "$NS_LOG" & track_bg $!
    i=0; while [ ! -S "$NS_SOCK" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
    check "a listener in another network namespace is up" test -S "$NS_SOCK"
    run sbx --dry-run -- true
    check "--dry-run (with $(ls /proc | grep -c '^[0-9]') processes) lists the mask over the other namespace's socket" \
        grep -q "mask-file $NS_SOCK" <<<"$OUT$ERR"
    check "--dry-run counts the other network namespace" grep -Eq "found in ([2-9]|[1-9][0-9]+) network namespaces" <<<"$OUT$ERR"
    connect_in "$NS_SOCK"
    check "connect to the other namespace's socket fails inside" grep -q "^refused:" <<<"$OUT"
    check "its listener received nothing" nothing_received "$NS_LOG"
else
    skip "no network namespace to bind a listener in here (${unshare_net[*]} fails)"
fi

# Exceptions. gVisor's gofer reaches no host socket at all (runsc --host-uds none) and a
# microVM's 9p view carries none: there a policy that lets one through is refused, not dropped.
printf '{"network": {"allowUnixSockets": ["%s"]}}\n' "$HOST_SOCK" > "$SVC/allow-one.json"
printf '{"network": {"allowAllUnixSockets": true}}\n' > "$SVC/allow-all.json"
if on_layer gvisor microvm; then
    for pol in allow-one allow-all; do
        run sbx --policy "$SVC/$pol.json" -- true
        check "$EXG_LAYER: the $pol policy is refused with why (status $STATUS)" \
            bash -c '[ "$1" = 125 ] && grep -q "cannot carry a host.s Unix socket" <<<"$2"' _ "$STATUS" "$ERR"
    done
    check "$EXG_LAYER: the host listener received nothing" nothing_received "$HOST_LOG"
else
    connect_in "$HOST_SOCK" --policy "$SVC/allow-one.json"
    check "allowUnixSockets: the named socket answers inside" grep -q "connected: hello from the host" <<<"$OUT"
    check "allowUnixSockets: the listener received the bytes" received "$HOST_LOG"
    run sbx --dry-run --policy "$SVC/allow-one.json" -- true
    check "--dry-run names the allowed socket" grep -q "allowed: $HOST_SOCK" <<<"$OUT$ERR"
    connect_in "$WS_SOCK" --policy "$SVC/allow-one.json"
    check "allowUnixSockets: a socket it does not name stays refused" grep -q "^refused:" <<<"$OUT"
    check "allowUnixSockets: the other listener received nothing" nothing_received "$WS_LOG"
    connect_in "$WS_SOCK" --policy "$SVC/allow-all.json"
    check "allowAllUnixSockets: the workspace socket answers inside" grep -q "connected: hello from the host" <<<"$OUT"
    check "allowAllUnixSockets: its listener received the bytes" received "$WS_LOG"
fi

# Bound after the start (issue 39, 1): the start-time masks cannot know these. A sandbox
# waits, the host binds listeners in the workspace and under /var/lib, then the sandbox tries
# them by absolute and relative name, and by renaming the host's socket onto a name it had
# bound itself (the judgement is of the inode a name reaches now, not of the name). Every
# attempt is refused, the listeners receive nothing, and the supervisor says so (audit log,
# and a line on stderr). gVisor's gofer and a microVM's 9p reach no host socket at all.
LATE_WS=$WS/late.sock LATE_O=$SVC/late.sock LATE_LOG=$SVC/late.log
: > "$LATE_LOG"; chmod 666 "$LATE_LOG"
late_client='
import errno, os, socket, sys, time
ws, targets = sys.argv[1], sys.argv[2:]
mine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
mine.bind(os.path.join(ws, "mine.sock")); mine.listen(1)
open(os.path.join(ws, ".ready"), "w").close()
for _ in range(600):
    if os.path.exists(os.path.join(ws, ".go")): break
    time.sleep(0.05)
def attempt(label, p):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(p); s.sendall(b"EXG-FROM-INSIDE"); print(label, "connected:", s.recv(100))
    except OSError as e:
        print(label, "refused:", errno.errorcode.get(e.errno, e.errno))
for t in targets: attempt(t, t)
os.chdir(ws); attempt("relative", "late.sock")
try:
    os.rename(os.path.join(ws, "late.sock"), os.path.join(ws, "mine.sock"))
    attempt("renamed", os.path.join(ws, "mine.sock"))
    os.rename(os.path.join(ws, "mine.sock"), os.path.join(ws, "late.sock"))
except OSError as e:
    print("renamed refused:", errno.errorcode.get(e.errno, e.errno))
d = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
dest = os.path.join(ws, "late-dgram.sock")
# sendto, sendmsg and sendmmsg (the last through ctypes: Python has no wrapper) all name
# the destination; sendmsg and sendmmsg carry it where the seccomp filter cannot read it.
def sendmmsg(sock, path):
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    class iovec(ctypes.Structure): _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
    class sockaddr_un(ctypes.Structure): _fields_ = [("family", ctypes.c_ushort), ("path", ctypes.c_char * 108)]
    class msghdr(ctypes.Structure):
        _fields_ = [("name", ctypes.c_void_p), ("namelen", ctypes.c_uint), ("iov", ctypes.POINTER(iovec)),
                    ("iovlen", ctypes.c_size_t), ("control", ctypes.c_void_p), ("controllen", ctypes.c_size_t),
                    ("flags", ctypes.c_int)]
    class mmsghdr(ctypes.Structure): _fields_ = [("hdr", msghdr), ("len", ctypes.c_uint)]
    buf = ctypes.create_string_buffer(b"EXG-FROM-INSIDE")
    iov = iovec(ctypes.cast(buf, ctypes.c_void_p), 15)
    addr = sockaddr_un(socket.AF_UNIX, path.encode())
    m = (mmsghdr * 2)()
    for i in range(2):
        m[i].hdr = msghdr(ctypes.cast(ctypes.pointer(addr), ctypes.c_void_p), ctypes.sizeof(addr), ctypes.pointer(iov), 1, None, 0, 0)
    n = libc.sendmmsg(sock.fileno(), m, 2, 0)
    if n < 0: raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
for label, send in (("dgram", lambda: d.sendto(b"EXG-FROM-INSIDE", dest)),
                    ("sendmsg", lambda: d.sendmsg([b"EXG-FROM-INSIDE"], [], 0, dest)),
                    ("sendmmsg", lambda: sendmmsg(d, dest))):
    try:
        send(); print(label, "sent")
    except OSError as e:
        print(label, "refused:", errno.errorcode.get(e.errno, e.errno))
'
cat > "$SVC/listen_dgram.py" <<'PY'
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o777)
while True:
    data = s.recv(100)
    with open(sys.argv[2], "a") as f: f.write("received %r\n" % data)
PY
if on_layer microvm; then
    # The client binds a socket of its own in the workspace, which 9p refuses (qemu ends the
    # guest: "attempt to open special file"); a guest reaches no host socket through 9p at all.
    skip "microvm: bound later: the workspace is the host's directory over 9p, which carries no socket"
else
    rm -f "$WS/.ready" "$WS/.go"
    ( sbx --audit-log "$SVC/late-audit.jsonl" -- python3 -c "$late_client" "$WS" "$LATE_WS" "$LATE_O" \
          >"$SVC/late.out" 2>"$SVC/late.err"; echo $? >"$SVC/late.rc" ) &
    late_pid=$!; track_bg $late_pid
    if wait_for 60 test -e "$WS/.ready"; then
        start_listener "$LATE_WS" "$LATE_LOG"
        start_listener "$LATE_O" "$LATE_LOG"
        python3 "$SVC/listen_dgram.py" "$WS/late-dgram.sock" "$LATE_LOG" & track_bg $!
        wait_for 10 test -S "$WS/late-dgram.sock"
        touch "$WS/.go"
        wait "$late_pid"
        OUT=$(cat "$SVC/late.out") ERR=$(cat "$SVC/late.err") STATUS=$(cat "$SVC/late.rc")
        [ "$STATUS" -eq 0 ] || { fail "bound later: the client did not run (status $STATUS)"; show_last; }
        for label in "$LATE_WS" "$LATE_O" relative renamed dgram sendmsg sendmmsg; do
            check "bound later: $label is refused inside" grep -q "^$label refused:" <<<"$OUT"
        done
        check "bound later: the late listeners received nothing" nothing_received "$LATE_LOG"
        if ! on_layer gvisor microvm; then
            check "bound later: the refusal is in the audit log" audit_has "$SVC/late-audit.jsonl" \
                "{\"event\": \"unix_socket_refused\", \"path\": \"$LATE_WS\"}" \
                "{\"event\": \"unix_socket_refused\", \"path\": \"late.sock\"}"
            check "bound later: stderr says what was refused" grep -q "unix sockets bound outside the sandbox: [0-9]* connections\? refused: .*late.sock" <<<"$ERR"
        fi
    else
        fail "bound later: the sandbox did not come up: $(head -3 "$SVC/late.err")"
    fi
    rm -f "$WS/.ready" "$WS/.go" "$WS/mine.sock"
fi

# Sockets the code makes itself, in /tmp and in the workspace, keep working.
own='
import os, socket, sys, threading
for d in sys.argv[1:]:
    p = os.path.join(d, "own.sock")
    if os.path.exists(p): os.unlink(p)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); srv.bind(p); srv.listen(1)
    def serve():
        c, _ = srv.accept(); c.sendall(c.recv(10)); c.close()
    t = threading.Thread(target=serve); t.start()
    cl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); cl.connect(p); cl.sendall(b"ping")
    print(d, cl.recv(10).decode()); t.join(); os.unlink(p)
# The peer a server inside sees is the client inside (its uid), by relative name and abstract name.
import struct
os.chdir(sys.argv[1])
for label, name in (("relative", "own-rel.sock"), ("abstract", "\0exg-own-%d" % os.getpid())):
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); srv.bind(name); srv.listen(1)
    cl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); cl.connect(name)
    c, _ = srv.accept()
    pid, uid, gid = struct.unpack("3i", c.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    print(label, "peer uid", uid, "mine", os.getuid(), "peer pid", pid, "mine", os.getpid())
    if label == "relative": os.unlink(name)
'
if on_layer microvm; then
    # The guest mounts its own tmpfs at /tmp, /var/tmp and /dev/shm (guest/scratch.hpp): local
    # inodes, where sockets work. The workspace is the host's directory over 9p, where a
    # socket answers ENXIO (docs/microvm.md).
    run sbx -- python3 -c "$own" /tmp /var/tmp /dev/shm
    check "microvm: a socket made inside /tmp works" grep -q "^/tmp ping" <<<"$OUT"
    check "microvm: a socket made inside /var/tmp works" grep -q "^/var/tmp ping" <<<"$OUT"
    check "microvm: a socket made inside /dev/shm works" grep -q "^/dev/shm ping" <<<"$OUT"
    [ "$STATUS" -eq 0 ] || show_last
    skip "microvm: a socket bound in the workspace (the host's directory over 9p) does not connect (ENXIO; docs/microvm.md)"
    finish
fi
run sbx -- python3 -c "$own" /tmp "$WS"
check "a socket made inside /tmp works" grep -q "^/tmp ping" <<<"$OUT"
for label in relative abstract; do
    check "a socket made inside ($label name): its server sees the client's own uid" \
        grep -Eq "^$label peer uid ([0-9]+) mine \1 " <<<"$OUT"
done
check "a socket made inside the workspace works" grep -q "^$WS ping" <<<"$OUT"
[ "$STATUS" -eq 0 ] || show_last
finish
