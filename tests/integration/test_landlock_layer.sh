#!/usr/bin/env bash
# The landlock layer (issue 42 part 3): a sandbox without namespaces, on a host that refuses
# user namespaces, made here for real: a user namespace with user.max_user_namespaces=0 set in it
# and a network namespace of its own (so that the loopback services below are this test's, and
# nothing reaches a real address):
# - root runner: root of a namespace mapping uids 0-65535 onto themselves (maps written from
#   here), the workspace owned by exgtest (the command runs as it);
# - user runner: uid 1000 of a user namespace made below one whose limit is 0.
# There `--layer auto` chooses landlock and says so, and one sandbox tries every attack the layer
# claims to stop, each checked refused (and its effect absent on the host after): a write outside
# the writable paths, reading a denyRead path, a TCP connect to a loopback service that is not
# the proxy, the proxy's port on another loopback address, a UDP socket, raw and packet sockets,
# a TCP bind, a signal to a host process, an abstract unix socket of the host, the proxy without
# its token, a host off the allowlist through the proxy; a git hook planted in the workspace is
# quarantined at the end; the raw and packet sockets' refusals are in the audit log. Sessions on the
# layer: `exguardian session` (commands, a pty command, the attacks again inside it; what a
# command left behind is gone after shutdown, after SIGTERM and after kill -9 of its supervisor) and
# mcp (a sandbox, a command; two at once, neither reading the other's workspace or TMPDIR). Two
# `run` sandboxes of one uid at once: neither reads the other's workspace or TMPDIR (by path,
# O_PATH, /proc/PID/cwd and root, listing, find). kill -9 of a supervisor with no cgroup, and a
# timeout: nothing the command detached (background, nohup, setsid, double fork) survives; a
# sibling sandbox and a host process of the same uid do.
# Then: a kernel without Landlock (a parent seccomp filter answering
# ENOSYS to landlock_create_ruleset): --layer landlock refuses (exit 125), saying why.
source "$(dirname "$0")/lib.sh"

# (exit 77: skipped, as ctest is told in CMakeLists.txt) The layer needs Landlock ABI 6 (TCP
# rules, scoping); on an older kernel it refuses to start, which the end of this script checks
# by hiding Landlock.
abi=$(python3 -c 'import ctypes; print(ctypes.CDLL(None, use_errno=True).syscall(444, None, 0, 1))' 2>/dev/null)
if ! [ "${abi:-0}" -ge 6 ] 2>/dev/null; then
    echo "skip: this kernel's Landlock ABI is ${abi:-unknown} (-1: none); the landlock layer needs ABI 6 (network rules from 4, scoping from 6)"
    exit 77
fi

me=$(id -u)
if [ -z "${EXG_LL_INNER:-}" ]; then
    new_workspace
    WORLD=$T/world
    mkdir -p "$WORLD"
    export EXG_LL_INNER=1 EXG_LL_WS=$WS
    self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
    # The world's own loopback: lo up, then this script again inside it.
    inner='ip link set lo up 2>/dev/null || python3 -c "import socket,fcntl,struct; s=socket.socket(); fcntl.ioctl(s, 0x8914, struct.pack(\"16sh\", b\"lo\", 0x1|0x40))" || { echo "world: cannot bring lo up" >&2; exit 99; }'
    if [ "$me" = 0 ]; then
        chown -R exgtest: "$WS"
        export EXG_LL_AS=root
        rm -f "$WORLD/go"; mkfifo "$WORLD/go"
        unshare --user --net -- bash -c 'read -r _ <"$1"; shift; exec bash -c "$0" _ "$@"' \
            "$inner; echo 0 >/proc/sys/user/max_user_namespaces || exit 99; exec timeout 120 bash \"\$1\"" \
            "$WORLD/go" "$self" &
        pid=$!
        mine=$(readlink /proc/self/ns/user)
        while [ "$(readlink "/proc/$pid/ns/user" 2>/dev/null)" = "$mine" ] && kill -0 "$pid" 2>/dev/null; do sleep 0.01; done
        echo "0 0 65536" >"/proc/$pid/uid_map" && echo "0 0 65536" >"/proc/$pid/gid_map"
        echo go >"$WORLD/go"
        wait "$pid"
        exit $?
    fi
    export EXG_LL_AS=user
    go=$WORLD/go
    rm -f "$go"; mkfifo "$go"
    timeout 150 unshare --user --map-root-user --net -- bash -c '
        go=$1 self=$2 inner=$3
        eval "$inner"
        unshare --user --map-user=1000 --map-group=1000 -- bash -c "read -r _ <\"\$0\"; exec timeout 120 bash \"\$1\"" "$go" "$self" &
        child=$!
        mine=$(readlink /proc/self/ns/user)
        while [ "$(readlink /proc/$child/ns/user 2>/dev/null)" = "$mine" ] && kill -0 $child 2>/dev/null; do sleep 0.01; done
        echo 0 >/proc/sys/user/max_user_namespaces || { echo "world: cannot set the limit" >&2; kill $child; exit 99; }
        echo go >"$go"
        wait $child' _ "$go" "$self" "$inner"
    exit $?
fi

# ---- inside the world ------------------------------------------------------------------------------
WS=$EXG_LL_WS
cd "$WS" || exit 1
check "the world refuses user namespaces" bash -c '! unshare --user true 2>/dev/null'
if [ "$EXG_LL_AS" = root ]; then
    # The command runs as the workspace's owner; the invoker is root of the world.
    AS=(); who="root of the world (workspace owned by exgtest)"
else
    AS=(); who="uid $(id -u), an ordinary user"
fi
note "as $who"
# What the attacks aim at lies outside the host's temporary trees ($O is under /var/lib): this layer
# hides /tmp, where $T is, as a whole (the siblings' part below), and each wall here is its own.
L=$O/landlock
mkdir -p "$L" && chmod 755 "$L"
OUTSIDE=$L/outside
mkdir -p "$OUTSIDE" && echo original >"$OUTSIDE/file"
SECRETS=$L/secretdir
mkdir -p "$SECRETS" && echo topsecret-ll >"$SECRETS/key" && echo readable >"$L/neighbour"
if [ "$EXG_LL_AS" = root ]; then chown -R exgtest: "$OUTSIDE" "$SECRETS" "$L/neighbour"; chmod 755 "$T"; fi
git -C "$WS" init -q 2>/dev/null
[ "$EXG_LL_AS" = root ] && chown -R exgtest: "$WS"
cat >"$T/policy.json" <<JSON
{
  "network": {"allowedDomains": ["allowed.test"]},
  "filesystem": {"denyRead": ["$SECRETS"], "allowWrite": [], "denyWrite": []}
}
JSON

# Loopback services of this world, outside the sandbox: a TCP one that is not the proxy, an
# abstract unix socket, a pathname one anyone may connect to (as a Docker socket is for its group);
# and a host process to signal.
python3 -c '
import os, socket, sys, threading
t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); t.bind(("127.0.0.1", 18080)); t.listen(8)
a = socket.socket(socket.AF_UNIX); a.bind("\0exg-ll-host"); a.listen(8)
u = socket.socket(socket.AF_UNIX); u.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o777); u.listen(8)
def serve(s):
    while True:
        c, _ = s.accept(); c.sendall(b"host-service\n"); c.close()
threading.Thread(target=serve, args=(a,), daemon=True).start()
threading.Thread(target=serve, args=(u,), daemon=True).start()
print("up", flush=True)
serve(t)' "$L/host.sock" >"$T/services.out" 2>&1 &
track_bg $!
# (the victim runs as the sandbox's own uid: only the scoping can refuse the signal)
if [ "$EXG_LL_AS" = root ]; then setpriv --reuid=exgtest --regid=exgtest --clear-groups -- sleep 300 &
else sleep 300 & fi
victim=$!
track_bg $victim
for _ in $(seq 100); do grep -q up "$T/services.out" 2>/dev/null && break; sleep 0.05; done

# ---- --layer auto chooses landlock, and says so ------------------------------------------------------
run timeout 60 "$EXG" run --layer auto -- true
check "$who: --layer auto runs (status $STATUS)" test "$STATUS" = 0
check "$who: ... and says it chose landlock, not process" \
    grep -qE '^exguardian: layer auto: chose landlock .*not process' <<<"$ERR"
[ "$STATUS" = 0 ] || show_last
check "$who: ... and says what the layer cannot do (no namespaces)" grep -q 'layer landlock: no namespaces' <<<"$ERR"

# ---- one sandbox, every attack ---------------------------------------------------------------------
cat >"$L/attacks.py" <<'PY'
import errno, os, re, socket, sys
outside, secrets, victim = sys.argv[1], sys.argv[2], int(sys.argv[3])
def res(name, fn):
    try:
        r = fn()
        print(f"{name}: ALLOWED {r!r}"[:200])
    except OSError as e:
        print(f"{name}: refused {errno.errorcode.get(e.errno, e.errno)}")
def write_outside():
    with open(outside + "/file", "w") as f: f.write("pwned")
def create_outside():
    open(outside + "/new", "w").close()
def truncate_outside():
    os.truncate(outside + "/file", 0)
def read_secret():
    return open(secrets + "/key").read()
def list_secret():
    return os.listdir(secrets)
def tcp(host, port):
    def f():
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET); s.settimeout(5); s.connect((host, port)); return s.recv(64)
    return f
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b"x", ("127.0.0.1", 18081))
def raw():
    socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
def packet():
    socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
def bind_tcp():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1); return s.getsockname()
def kill_host():
    os.kill(victim, 0)
def abstract():
    s = socket.socket(socket.AF_UNIX); s.connect("\0exg-ll-host"); return s.recv(64)
def fastopen():  # a connect inside the send, past connect() and so past Landlock's port rule
    s = socket.socket(); s.settimeout(5); s.sendto(b"x", socket.MSG_FASTOPEN, ("127.0.0.1", 18080)); return s.recv(64)
def pathname():
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[4]); return s.recv(64)
m = re.match(r"http://([^:@/]+):([^@/]+)@127\.0\.0\.1:(\d+)", os.environ.get("HTTP_PROXY", ""))
port = int(m.group(3)) if m else 0
print("proxy-url-has-token:", bool(m))
def proxy(auth, host):
    def f():
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        req = f"GET http://{host}/ HTTP/1.1\r\nHost: {host}\r\n"
        if auth:
            import base64
            req += "Proxy-Authorization: Basic " + base64.b64encode(f"{m.group(1)}:{m.group(2)}".encode()).decode() + "\r\n"
        s.sendall((req + "Connection: close\r\n\r\n").encode())
        return s.recv(200).split(b"\r\n")[0].decode()
    return f
res("write-outside", write_outside)
res("create-outside", create_outside)
res("truncate-outside", truncate_outside)
res("read-denied", read_secret)
res("list-denied", list_secret)
res("tcp-other-port", tcp("127.0.0.1", 18080))
res("tcp-proxy-port-other-address", tcp("127.0.0.2", port))
res("tcp-proxy-port-ipv6-any", tcp("::", port))
res("udp", udp)
res("raw", raw)
res("packet", packet)
res("bind", bind_tcp)
res("kill-host-process", kill_host)
res("abstract-unix", abstract)
res("pathname-unix", pathname)
res("tcp-fastopen", fastopen)
res("proxy-without-token", proxy(False, "allowed.test"))
res("proxy-denied-host", proxy(True, "denied.test"))
with open("inside.txt", "w") as f: f.write("ok")
print("write-workspace: ok")
print("tmpdir:", os.environ.get("TMPDIR"))
open(os.environ["TMPDIR"] + "/scratch", "w").close()
print("write-tmpdir: ok")
os.makedirs(".git/hooks", exist_ok=True)
with open(".git/hooks/post-checkout", "w") as f: f.write("#!/bin/sh\ntouch /tmp/pwned\n")
PY
[ "$EXG_LL_AS" = root ] && chmod 644 "$L/attacks.py"
run timeout 60 "$EXG" run --layer landlock --policy "$T/policy.json" --audit-log "$T/audit.jsonl" -- python3 "$L/attacks.py" "$OUTSIDE" "$SECRETS" "$victim" "$L/host.sock"
note "status $STATUS"
printf '%s\n' "$OUT" | sed 's/^/#      /'
attack() {  # NAME DESC: the sandbox printed "NAME: refused ..."
    check "$who: $2 is refused ($(grep "^$1: " <<<"$OUT" | head -1))" grep -q "^$1: refused" <<<"$OUT"
}
check "$who: the sandbox ran (status 123: the planted hook; stderr says planted)" \
    bash -c '[ "$1" = 123 ] && grep -q "planted: .git/hooks/post-checkout" <<<"$2"' _ "$STATUS" "$ERR"
[ "$STATUS" = 123 ] || show_last
check "$who: the workspace is writable (inside.txt)" test "$(cat "$WS/inside.txt" 2>/dev/null)" = ok
check "$who: TMPDIR is a private directory of the run, writable" grep -q "^write-tmpdir: ok" <<<"$OUT"
attack write-outside "writing a file outside the writable paths (the invoker's own)"
attack create-outside "creating a file outside the writable paths"
attack truncate-outside "truncate(2) outside the writable paths"
check "$who: ... and the file outside is unchanged, nothing created" \
    bash -c '[ "$(cat "$1/file")" = original ] && [ ! -e "$1/new" ]' _ "$OUTSIDE"
attack read-denied "reading a denyRead file"
attack list-denied "listing a denyRead directory"
check "$who: ... the secret is nowhere in the output" bash -c '! grep -q topsecret-ll <<<"$1$2"' _ "$OUT" "$ERR"
check "$who: the proxy variables carry a per-run token" grep -q "^proxy-url-has-token: True" <<<"$OUT"
attack tcp-other-port "a TCP connect to a loopback service that is not the proxy"
attack tcp-proxy-port-other-address "a TCP connect to the proxy's port on another address (127.0.0.2)"
attack tcp-proxy-port-ipv6-any "a TCP connect to the proxy's port on :: (IPv6)"
check "$who: a TCP Fast Open send to a loopback service that is not the proxy is refused (EPERM: the host-network filter)" \
    grep -qE "^tcp-fastopen: refused EPERM" <<<"$OUT"
attack udp "a UDP socket"
attack raw "a raw socket"
attack packet "a packet socket"
# Audited as on the other layers: the main filter's refusal through the supervisor, one line each
# (raw: EPERM; packet, AF_PACKET: EAFNOSUPPORT), the call named.
socket_lines() {  # ERRNO: the audit log's refused socket() calls with that errno
    python3 -c 'import json,sys; print(sum(1 for l in open(sys.argv[1]) if (j := json.loads(l)).get("event") == "syscall_refused" and j.get("syscall") == "socket" and j.get("errno") == int(sys.argv[2])))' "$T/audit.jsonl" "$1" 2>/dev/null
}
check "$who: ... the raw socket's refusal is audited: one syscall_refused line naming socket, EPERM ($(socket_lines 1) line(s))" \
    test "$(socket_lines 1)" = 1
check "$who: ... the packet socket's too: one line naming socket, EAFNOSUPPORT ($(socket_lines 97) line(s))" \
    test "$(socket_lines 97)" = 1
attack bind "a TCP bind"
attack kill-host-process "a signal to a host process (Landlock scoping)"
check "$who: ... and the host process is still alive" kill -0 "$victim"
attack abstract-unix "connecting to the host's abstract unix socket (the gate; scoping)"
check "$who: connecting to a host unix socket by its path, open to anyone, is refused by the gate (EACCES; the host itself reaches it)" \
    bash -c 'grep -qE "^pathname-unix: refused (EACCES|EPERM)" <<<"$1" &&
             python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); assert s.recv(64)" "$2"' _ "$OUT" "$L/host.sock"
check "$who: the proxy without the token answers 407" grep -q "^proxy-without-token: ALLOWED 'HTTP/1.1 407" <<<"$OUT"
check "$who: the proxy with the token refuses a host off the allowlist (403)" \
    grep -q "^proxy-denied-host: ALLOWED 'HTTP/1.1 403" <<<"$OUT"
check "$who: the planted hook is gone from the workspace" test ! -e "$WS/.git/hooks/post-checkout"
tmpdir=$(sed -n 's/^tmpdir: //p' <<<"$OUT")
check "$who: the run's private TMPDIR ($tmpdir) is removed after it" bash -c '[ -n "$1" ] && [ ! -e "$1" ]' _ "$tmpdir"

# ---- two sandboxes of the same uid at once: neither reads the other's workspace or TMPDIR ------------
# Fresh workspaces in the host's /tmp (where mcp's and serve's sandboxes keep theirs); the sandbox A
# writes a secret into its workspace and its TMPDIR and waits; B, meanwhile, tries them by path, by
# listing and searching the host's temporary trees, through /proc/A/cwd and /proc/A/root, and by
# reopening an O_PATH descriptor. Landlock holds here, not mode bits: both run as the same uid.
SIB_A=$T/sib-a SIB_B=$T/sib-b
mkdir -p "$SIB_A" "$SIB_B"
[ "$EXG_LL_AS" = root ] && chown exgtest: "$SIB_A" "$SIB_B"
sib_secret=sib-secret-$RANDOM$RANDOM
cat >"$L/sibling.sh" <<'SH'
ws=$1 tmp=$2 pid=$3
for p in "$ws/secret" "$tmp/secret" "/proc/$pid/cwd/secret" "/proc/$pid/root$ws/secret"; do
    if cat "$p" 2>/dev/null; then echo "read: $p"; else echo "refused: cat $p"; fi
    if python3 -c 'import os,sys; fd=os.open(sys.argv[1], os.O_PATH); print(open(f"/proc/self/fd/{fd}").read())' "$p" 2>/dev/null
    then echo "read: O_PATH $p"; else echo "refused: O_PATH $p"; fi
done
for d in "$ws" "$tmp" /tmp /var/tmp /dev/shm "/proc/$pid/cwd" "/proc/$pid/root/tmp"; do
    if ls -a "$d" 2>/dev/null; then echo "listed: $d"; else echo "refused: ls $d"; fi
done
find /tmp /var/tmp /dev/shm -name secret 2>/dev/null | sed 's/^/found: /'
grep -rs . /tmp /var/tmp /dev/shm 2>/dev/null | head -5 | sed 's/^/grep: /'
echo sibling-done
SH
chmod 644 "$L/sibling.sh"
(cd "$SIB_A" && exec timeout 60 "$EXG" run --layer landlock -- sh -c \
    'echo "$1" > secret && echo "$1" > "$TMPDIR/secret" && cat secret "$TMPDIR/secret" >/dev/null &&
     echo "$TMPDIR $$" > info.tmp && mv info.tmp info; while [ ! -e done ]; do sleep 0.1; done' _ "$sib_secret") \
    >"$T/sib-a.out" 2>&1 &
sib_a=$!
track_bg "$sib_a"
if wait_for 20 test -s "$SIB_A/info"; then
    read -r a_tmp a_pid <"$SIB_A/info"
    check "$who: control: sandbox A's secret is in its workspace and TMPDIR ($a_tmp) on the host" \
        bash -c '[ "$(cat "$1/secret")" = "$3" ] && [ "$(cat "$2/secret")" = "$3" ]' _ "$SIB_A" "$a_tmp" "$sib_secret"
    run bash -c 'cd "$1" && exec timeout 60 "$2" run --layer landlock -- sh "$3/sibling.sh" "$4" "$5" "$6"' _ \
        "$SIB_B" "$EXG" "$L" "$SIB_A" "$a_tmp" "$a_pid"
    check "$who: sandbox B ran its tries (status $STATUS)" grep -q '^sibling-done' <<<"$OUT"
    [ "$STATUS" = 0 ] || show_last
    check "$who: B reads nothing of A's by path, O_PATH, /proc/A/cwd or /proc/A/root ($(grep -c '^refused: \(cat\|O_PATH\)' <<<"$OUT") of 8 refused)" \
        test "$(grep -c '^refused: \(cat\|O_PATH\)' <<<"$OUT")" = 8
    check "$who: B lists none of A's workspace, A's TMPDIR, the host's /tmp, /var/tmp, /dev/shm, /proc/A/cwd, /proc/A/root/tmp" \
        bash -c '[ "$(grep -c "^refused: ls" <<<"$1")" = 7 ] && ! grep -q "^listed:" <<<"$1"' _ "$OUT"
    check "$who: ... find and grep over the temporary trees find nothing, and A's secret is nowhere in B's output" \
        bash -c '! grep -q "^found: \|^grep: " <<<"$1" && ! grep -q "$3" <<<"$1$2"' _ "$OUT" "$ERR" "$sib_secret"
    check "$who: ... B's own TMPDIR and workspace work meanwhile" \
        bash -c 'cd "$1" && timeout 60 "$2" run --layer landlock -- sh -c "echo x > \$TMPDIR/f && cat \$TMPDIR/f && echo y > f && cat f && mktemp >/dev/null" 2>/dev/null | tr -d "\n" | grep -qx xy' _ "$SIB_B" "$EXG"
else
    fail "$who: sandbox A never wrote its secret"; sed 's/^/#      /' "$T/sib-a.out"
fi
touch "$SIB_A/done"
wait "$sib_a" 2>/dev/null

# ---- kill -9 of the supervisor, no cgroup: nothing the sandbox started survives ----------------------
# Without a cgroup (the user runner may make none here; the root runner's, whose root is the host's
# uid 0, is run in a mount namespace with no cgroup filesystem), only the layer's warden can end
# what the command detached: background, nohup, setsid, a double fork ignoring SIGTERM/SIGHUP/SIGINT.
# Each carries MARKER in its argv.
_ll_left() { pgrep -f -- "$1" >/dev/null; }
_ll_none() { ! _ll_left "$1"; }
ll_spawner() {
    local m=$1
    printf '%s' "
        (exec -a $m-bg sleep 1000) </dev/null >/dev/null 2>&1 &
        nohup bash -c 'exec -a $m-nohup sleep 1000' </dev/null >/dev/null 2>&1 &
        setsid bash -c '(exec -a $m-setsid sleep 1000) & ' </dev/null >/dev/null 2>&1
        ( ( (trap '' TERM HUP INT; exec -a $m-double sleep 1000) & ) & ) </dev/null >/dev/null 2>&1
        mkdir -p \"\$TMPDIR/a/b/c\" && echo x > \"\$TMPDIR/a/b/c/f\" && echo \"tmpdir: \$TMPDIR\"
        sleep 0.3; echo spawned"
}
m=exg-ll-k9-$$-$RANDOM
# Meanwhile a sibling sandbox of the same uid runs, which the warden must leave alone (as the host process $victim).
(cd "$SIB_B" && exec "$EXG" run --layer landlock -- bash -c "(exec -a $m-peer sleep 60) & echo up; wait") >"$T/k9-sibling.out" 2>&1 &
k9_sibling=$!
track_bg "$k9_sibling"
wait_for 20 grep -q up "$T/k9-sibling.out"
no_cgroup=()
[ "$EXG_LL_AS" = root ] && no_cgroup=(unshare --mount -- sh -c 'mount -t tmpfs none /sys/fs/cgroup && exec "$@"' _)
(cd "$WS" && exec "${no_cgroup[@]}" "$EXG" run --layer landlock -- bash -c "$(ll_spawner "$m"); sleep 100") >"$T/k9.out" 2>&1 &
k9=$!
track_bg "$k9"
if wait_for 20 grep -q spawned "$T/k9.out"; then
    check "$who: control: no cgroup holds the sandbox, and its detached processes run ($(pgrep -fc -- "^$m-[bnsd]") of 4)" \
        bash -c '[ "$(pgrep -fc -- "^$1-[bnsd]")" = 4 ] && ! grep -qi "exg" /proc/$(pgrep -f -- "^$1-double")/cgroup' _ "$m"
    kill -9 "$k9"
    wait "$k9" 2>/dev/null
    wait_for 5 _ll_none "$m-[bnsd]"
    check "$who: kill -9 of the supervisor: none of them survives (left: $(pgrep -af -- "$m-[bnsd]" | tr '\n' ' '))" _ll_none "$m-[bnsd]"
    k9_tmp=$(sed -n 's/^tmpdir: //p' "$T/k9.out")
    _k9_tmp_gone() { [ -n "$k9_tmp" ] && [ ! -e "$k9_tmp" ]; }
    wait_for 5 _k9_tmp_gone
    check "$who: ... and its private TMPDIR ($k9_tmp, with a tree in it) is removed, though the supervisor never ran its end" _k9_tmp_gone
    check "$who: ... while a sibling sandbox and a host process of the same uid live on (the warden's kill stays in its domain)" \
        bash -c 'pgrep -f -- "^$1-peer" >/dev/null && kill -0 "$2"' _ "$m" "$victim"
    for p in $(pgrep -f -- "$m-[bnsd]"); do kill -9 "$p" 2>/dev/null; done
else
    fail "$who: kill -9: the command never started"; sed 's/^/#      /' "$T/k9.out"
fi
pkill -f -- "^$m-peer" 2>/dev/null
wait "$k9_sibling" 2>/dev/null
# The timeout (the supervisor kills init): likewise.
m=exg-ll-timeout-$$-$RANDOM
run bash -c 'cd "$1" && shift && exec "$@"' _ "$WS" "${no_cgroup[@]}" "$EXG" run --layer landlock --timeout 2s -- bash -c "$(ll_spawner "$m"); sleep 100"
wait_for 5 _ll_none "$m-[bnsd]"
check "$who: a timeout with no cgroup (status $STATUS): none of the detached processes survives (left: $(pgrep -af -- "$m-[bnsd]" | tr '\n' ' '))" \
    bash -c '[ "$1" = 124 ] && grep -q "^spawned" <<<"$2" && ! pgrep -f -- "$3-[bnsd]" >/dev/null' _ "$STATUS" "$OUT" "$m"
for p in $(pgrep -f -- "$m-[bnsd]"); do kill -9 "$p" 2>/dev/null; done

# ---- sessions: a session on the landlock layer, driven with commands, a pty, attacks; its end ------
# The agent is not pid 1 here (no pid namespace): a child subreaper, which ends every process the
# session left behind when the session ends, as a pid namespace's end does elsewhere.
SOCK=$T/ctl.sock
sc() { timeout -k 2 30 "$EXG" session-client --control "unix:$SOCK" "$@"; }
_answers() { timeout 5 "$EXG" session-client --control "unix:$SOCK" call '{"op":"list"}' >/dev/null 2>&1; }
_answers_or_ended() { _answers || ! kill -0 "$1" 2>/dev/null; }
start_session() {  # LOG
    (cd "$WS" && exec timeout -k 5 120 "$EXG" session --layer landlock --policy "$T/policy.json" --control "unix:$SOCK") >"$1" 2>&1 &
    SESSION_PID=$!
    track_bg "$SESSION_PID"
    wait_for 20 _answers_or_ended "$SESSION_PID" && _answers
}
if start_session "$T/session.log"; then
    ok "$who: session --layer landlock is up"
    check "$who: ... and says it is on the landlock layer" grep -q "landlock" "$T/session.log"
    run sc exec -- sh -c 'echo one > state.txt; echo "$TMPDIR"'
    s_tmp=$OUT
    check "$who: a command in the session writes the workspace (status $STATUS)" \
        bash -c '[ "$1" = 0 ] && [ "$(cat "$2/state.txt")" = one ]' _ "$STATUS" "$WS"
    run sc exec -- cat state.txt
    check "$who: ... and the next command sees it (state across commands)" test "$OUT" = one
    run sc exec -- id -u
    check "$who: ... the commands run as the sandbox's uid ($OUT)" \
        test "$OUT" = "$([ "$EXG_LL_AS" = root ] && id -u exgtest || id -u)"
    run sc exec --pty --rows 41 --cols 117 -- sh -c 'test -t 0 && stty size && tty'
    check "$who: a pty command runs on a terminal of its size ($(tr -d '\r' <<<"$OUT" | tr '\n' ' '))" \
        bash -c 'grep -q "41 117" <<<"$1" && grep -q "^/dev/pts/" <<<"$1"' _ "$OUT"
    run sc exec -- sh -c "echo pwned > '$OUTSIDE/file'"
    check "$who: in the session, writing outside the writable paths is refused (status $STATUS), the file unchanged" \
        bash -c '[ "$1" != 0 ] && [ "$(cat "$2/file")" = original ]' _ "$STATUS" "$OUTSIDE"
    run sc exec -- python3 "$L/attacks.py" "$OUTSIDE" "$SECRETS" "$victim" "$L/host.sock"
    for a in read-denied tcp-other-port udp raw packet bind kill-host-process abstract-unix pathname-unix; do
        check "$who: in the session, $a is refused ($(grep "^$a: " <<<"$OUT" | head -1))" grep -q "^$a: refused" <<<"$OUT"
    done
    check "$who: ... the host process is still alive, the secret nowhere" \
        bash -c 'kill -0 "$1" && ! grep -q topsecret-ll <<<"$2"' _ "$victim" "$OUT"
    rm -rf "$WS/.git/hooks/post-checkout"
    # Left behind: a process in a session of its own, its parent gone (it is the agent's orphan).
    run sc exec -- sh -c 'setsid sh -c "exec sleep 31337" </dev/null >/dev/null 2>&1 & echo started'
    _left() { pgrep -x sleep -a 2>/dev/null | grep -q " 31337$"; }
    wait_for 5 _left  # ("started" is said before the background's exec of sleep)
    check "$who: control: the process a command left behind runs (status $STATUS)" _left
    run sc call '{"op":"shutdown"}'
    check "$who: shutdown is answered" grep -q '"ok":true' <<<"$OUT"
    _ended() { ! kill -0 "$SESSION_PID" 2>/dev/null; }
    wait_for 20 _ended
    check "$who: ... the session has ended" _ended
    _gone() { ! _left; }
    wait_for 10 _gone
    check "$who: ... and nothing it started is left on the host (the left-behind sleep is gone)" _gone
    check "$who: ... its private TMPDIR ($s_tmp) is removed" bash -c '[ -n "$1" ] && [ ! -e "$1" ]' _ "$s_tmp"
    check "$who: ... its control socket is gone" test ! -e "$SOCK"
else
    fail "$who: session --layer landlock did not come up"; sed 's/^/#      /' "$T/session.log"
fi
# SIGTERM to the session: it ends, and so does what it started.
if start_session "$T/session2.log"; then
    run sc exec -- sh -c 'setsid sh -c "exec sleep 31338" </dev/null >/dev/null 2>&1 & echo started'
    kill -TERM "$SESSION_PID"
    _ended() { ! kill -0 "$SESSION_PID" 2>/dev/null; }
    wait_for 20 _ended
    _gone2() { ! pgrep -x sleep -a 2>/dev/null | grep -q " 31338$"; }
    wait_for 10 _gone2
    _all_gone2() { _ended && _gone2; }
    check "$who: SIGTERM to a landlock session ends it and what it started" _all_gone2
else
    fail "$who: the second session did not come up"; sed 's/^/#      /' "$T/session2.log"
fi

# kill -9 of the session's supervisor: the agent dies with it, and the warden ends what it started.
if start_session "$T/session3.log"; then
    run sc exec -- sh -c 'setsid sh -c "exec sleep 31339" </dev/null >/dev/null 2>&1 & echo started'
    _left3() { pgrep -x sleep -a 2>/dev/null | grep -q " 31339$"; }
    wait_for 5 _left3  # (as above)
    check "$who: control: the session's left-behind process runs" _left3
    kill -9 "$(pgrep -P "$SESSION_PID" -x exguardian)"  # (SESSION_PID is timeout's)
    wait "$SESSION_PID" 2>/dev/null
    _gone3() { ! _left3; }
    wait_for 5 _gone3
    check "$who: kill -9 of a landlock session's supervisor ends what it started" _gone3
    pkill -9 -x -f 'sleep 31339' 2>/dev/null
    rm -f "$SOCK"
else
    fail "$who: the third session did not come up"; sed 's/^/#      /' "$T/session3.log"
fi
# ... and its private TMPDIR goes too, whichever sees the supervisor's end first: the agent (its
# channel closes before the supervisor's exit is over) or the warden (the supervisor's pidfd). Left
# about 1 run in 4 here before (the agent told the warden it ended normally); the orders themselves
# are made certain in the unit test WardenEnd. Six sessions, each killed once it answered.
k9_left="" k9_seen=0
for k in 1 2 3 4 5 6; do
    start_session "$T/session-k9-$k.log" || continue
    run sc exec -- sh -c 'echo "$TMPDIR"'
    case "$OUT" in /tmp/exguardian-*) k9_seen=$((k9_seen + 1)) ;; *) continue ;; esac
    kill -9 "$(pgrep -P "$SESSION_PID" -x exguardian)"
    wait "$SESSION_PID" 2>/dev/null
    _k9s_gone() { [ ! -e "$1" ]; }
    wait_for 8 _k9s_gone "$OUT" || { k9_left+="$OUT "; rm -rf -- "$OUT"; }
    rm -f "$SOCK"
done
check "$who: kill -9 of a landlock session's supervisor, $k9_seen times: no private TMPDIR left (${k9_left:-none})" \
    bash -c '[ "$1" = 6 ] && [ -z "$2" ]' _ "$k9_seen" "$k9_left"

# mcp on the landlock layer: a sandbox made, a command run in it, the sandbox destroyed (JSON-RPC
# over stdio, as an MCP client speaks it).
cat >"$T/mcp.py" <<'PY'
import json, subprocess, sys
exg, ws = sys.argv[1], sys.argv[2]
p = subprocess.Popen([exg, "mcp", "--layer", "landlock", "--workspace-root", ws], stdin=subprocess.PIPE,
                     stdout=subprocess.PIPE, text=True)
n = 0
def call(method, params):
    global n
    n += 1
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": n, "method": method, "params": params}) + "\n"); p.stdin.flush()
    while True:
        m = json.loads(p.stdout.readline())
        if m.get("id") == n: return m
def tool(name, args):
    r = call("tools/call", {"name": name, "arguments": args})["result"]
    return r.get("structuredContent") or {"error": json.dumps(r)[:300]}
call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}})
p.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n"); p.stdin.flush()
c = tool("create_sandbox", {"layer": "landlock", "workspace": ws})
print("created:", json.dumps(c))
sid = c.get("sandbox_id")
if sid:
    r = tool("run_command", {"sandbox_id": sid, "command": "echo mcp-on-landlock; id -u"})
    print("run:", json.dumps(r))
    print("run-ok:", r.get("exit_code") == 0 and "mcp-on-landlock" in r.get("stdout", ""))
    print("destroyed:", json.dumps(tool("destroy_sandbox", {"sandbox_id": sid})))
    # Two sandboxes of this server at once, one uid, workspaces in the host's /tmp (a fresh
    # workspace, made at /home/user, needs a mount: refused on this layer): the second reads
    # nothing of the first's workspace or TMPDIR.
    secret = sys.argv[3]
    ca = tool("create_sandbox", {"layer": "landlock", "workspace": ws + "/mcp-a"})
    cb = tool("create_sandbox", {"layer": "landlock", "workspace": ws + "/mcp-b"})
    print("created-two:", json.dumps(ca)[:300], json.dumps(cb)[:300])
    a, b = ca.get("sandbox_id"), cb.get("sandbox_id")
    w = tool("run_command", {"sandbox_id": a, "command": f"echo {secret} > secret; echo {secret} > $TMPDIR/secret; echo $PWD $TMPDIR"})
    paths = w.get("stdout", "").split()
    print("sibling-paths:", paths)
    if a and b and len(paths) == 2:
        ws_a, tmp_a = paths
        r = tool("run_command", {"sandbox_id": b, "command":
                 f"cat {ws_a}/secret || echo refused-ws; cat {tmp_a}/secret || echo refused-tmp; "
                 f"ls {ws_a} || echo refused-ls-ws; ls {tmp_a} || echo refused-ls-tmp; ls /var/tmp || echo refused-ls-var-tmp; "
                 f"find /tmp /var/tmp -name secret; echo own > secret && cat secret"})
        print("sibling:", json.dumps(r))
        out = r.get("stdout", "") + r.get("stderr", "")
        print("sibling-held:", secret not in out and all(f"refused-{k}" in out for k in ("ws", "tmp", "ls-ws", "ls-tmp", "ls-var-tmp"))
              and out.count("own") >= 1)
    for x in (a, b):
        if x: tool("destroy_sandbox", {"sandbox_id": x})
p.stdin.close(); p.wait(timeout=30)
PY
mkdir -p "$WS/mcp-a" "$WS/mcp-b"
[ "$EXG_LL_AS" = root ] && chown exgtest: "$WS/mcp-a" "$WS/mcp-b"
run timeout 90 python3 "$T/mcp.py" "$EXG" "$WS" "mcp-secret-$RANDOM$RANDOM"
note "$(head -c 600 <<<"$OUT")"
if [ "$EXG_LL_AS" = user ] && grep -q "cgroup limits: cannot be enforced" <<<"$OUT"; then
    # (mcp's sandboxes have default memory/pids/CPU limits; an ordinary user with no delegated
    # cgroup cannot have them enforced, and the sandbox is refused, saying so: fail closed)
    skip "$who: mcp --layer landlock: no cgroup this user may make here, so mcp's default limits refuse the sandbox (said: cgroup limits cannot be enforced)"
else
check "$who: mcp --layer landlock makes a landlock sandbox and runs a command in it" \
    bash -c 'grep -q "^created: .*\"layer\": \"landlock\"" <<<"$1" && grep -q "^run-ok: True" <<<"$1" &&
             grep -q "^destroyed: .*\"destroyed\": true" <<<"$1"' _ "$OUT"
check "$who: ... two mcp sandboxes at once: the second reads and lists nothing of the first's workspace or TMPDIR ($(grep '^sibling-paths:' <<<"$OUT"))" \
    grep -q "^sibling-held: True" <<<"$OUT"
fi
[ "$STATUS" = 0 ] || show_last

# ---- escape-test --layer landlock: a subset of the catalogue, one probe or more of each way a ----
# probe is judged there (its own walls; a documented limit, "not applicable" with the limit; the
# sweep's quarantine; a policy the layer refuses; the kernel probes' batch), in this world.
ids=(sandbox-status seed-read-credentials seed-env-secrets seed-git-hook persist-hookspath persist-exguardian-binary
     persist-home-bashrc proc-host-processes proc-pid1 proc-host-kill sys-class-net move-parent-of-denywrite
     move-parent-of-denyread net-direct-tcp net-socks-metadata-name net-allowed-control host-unix-socket
     secrets-credential-files work-write work-git-commit work-tmp limit-timeout kernel-mount-tmpfs kernel-chmod-setuid
     kernel-socket-inet-raw kernel-socket-inet-udp-allowed kernel-tiocsti kernel-ioctl-winsize-allowed
     kernel-chmod-plain-allowed kernel-ptrace-attach sibling-tmp-read planted-snapshot-worktree)
# (as the user: escape-test builds its network world, the servers its network probes aim at, in a
# user namespace, which this world refuses; the root runner's world has them, and the attacks
# above try the network as this user)
[ "$EXG_LL_AS" = user ] && ids=($(printf '%s\n' "${ids[@]}" | grep -v '^net-'))
only=()
for i in "${ids[@]}"; do only+=(--only "$i"); done
( cd "$T" && timeout 200 "$EXG" escape-test --layer landlock "${only[@]}" --json "$T/escape.json" ) >"$T/escape.out" 2>&1
esc=$?
note "escape-test --layer landlock: exit $esc; $(grep -E '^[0-9]+ held' "$T/escape.out" | sed 's/ (.*//')"
check "$who: escape-test --layer landlock exits 0 (nothing escaped or failed)" test "$esc" = 0
[ "$esc" = 0 ] || sed 's/^/#      /' "$T/escape.out" | grep -iE "escaped|failed|result" | head -20
check "$who: ... every selected probe ran on the landlock layer, each held or not applicable with its documented limit" \
    python3 - "$T/escape.json" "${ids[@]}" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
by = {p["id"]: p for p in r["probes"]}
bad = [f'{p["id"]}: {p["verdict"]} {p["evidence"][:120]}' for p in r["probes"]
       if p["layer"] != "landlock" or p["verdict"] in ("ESCAPED", "FAILED")
       or (p["verdict"] == "skipped" and not p["evidence"].startswith("not applicable: "))]
missing = [i for i in ["sandbox-in-place"] + sys.argv[2:] if i not in by]
def na(i, words):
    p = by.get(i, {})
    return p.get("verdict") == "skipped" and p["evidence"].startswith("not applicable: a documented limit of the landlock layer") and words in p["evidence"]
want = {
    "proc-host-processes": na("proc-host-processes", "host processes are visible"),
    "proc-pid1": na("proc-pid1", "no pid namespace"),
    "seed-git-hook": na("seed-git-hook", "quarantined by the end-of-run sweep"),
    "move-parent-of-denywrite": na("move-parent-of-denywrite", "cannot deny writing"),
}
# A sibling's files in the host's /tmp, /var/tmp and /dev/shm: refused by Landlock, said so; a fabricated
# snapshot git directory whose core.worktree is HOME: its config quarantined by the sweep.
want["sibling-tmp-read"] = by.get("sibling-tmp-read", {}).get("verdict") == "held" and \
    by["sibling-tmp-read"]["evidence"].startswith("refused by Landlock")
want["planted-snapshot-worktree"] = by.get("planted-snapshot-worktree", {}).get("verdict") == "held" and \
    "/snap-x/config -> quarantine" in by["planted-snapshot-worktree"]["evidence"]
held = [i for i in ("sandbox-in-place", "seed-read-credentials", "proc-host-kill", "persist-exguardian-binary", "net-direct-tcp",
                    "net-socks-metadata-name", "kernel-mount-tmpfs", "kernel-chmod-setuid", "kernel-socket-inet-raw", "work-git-commit")
        if (i in by or not i.startswith("net-")) and by.get(i, {}).get("verdict") != "held"]
for l in bad + ["missing: " + m for m in missing] + [f"{k}: not the documented limit: {by.get(k, {}).get('evidence', '')[:160]}" for k, v in want.items() if not v] + ["not held: " + h for h in held]:
    print("#      " + l)
sys.exit(1 if bad or missing or held or not all(want.values()) else 0)
PY
check "$who: ... and the host's canaries and hooks are as they were (cleanup rows held)" \
    python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(0 if all(p["verdict"]=="held" for p in r["probes"] if p["category"]=="cleanup") else 1)' "$T/escape.json"

# ---- a kernel without Landlock: the layer refuses ---------------------------------------------------
no_landlock() {  # CMD...: under a seccomp filter answering ENOSYS to landlock_create_ruleset (444)
    python3 - "$@" <<'PY'
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
def ins(code, jt, jf, k): return struct.pack("HBBI", code, jt, jf, k)
prog = b"".join([
    ins(0x20, 0, 0, 0),                   # ld nr
    ins(0x15, 0, 1, 444),                 # jeq landlock_create_ruleset
    ins(0x06, 0, 0, 0x00050000 | 38),     # ret ERRNO(ENOSYS)
    ins(0x06, 0, 0, 0x7fff0000),          # ret ALLOW
])
buf = ctypes.create_string_buffer(prog)
fprog = struct.pack("HxxxxxxQ", len(prog) // 8, ctypes.addressof(buf))
fbuf = ctypes.create_string_buffer(fprog)
U = ctypes.c_ulong
if libc.prctl(38, U(1), U(0), U(0), U(0)) != 0 or libc.prctl(22, U(2), U(ctypes.addressof(fbuf)), U(0), U(0)) != 0:
    sys.exit("cannot install the filter")
os.execvp(sys.argv[1], sys.argv[1:])
PY
}
run no_landlock timeout 60 "$EXG" run --layer landlock -- echo hi
check "$who, no Landlock: --layer landlock refused (exit 125, status $STATUS), nothing ran" \
    bash -c '[ "$1" = 125 ] && [ -z "$2" ]' _ "$STATUS" "$OUT"
check "$who, no Landlock: it says why (no Landlock)" grep -q 'layer landlock: .*no Landlock' <<<"$ERR"
[ "$STATUS" = 125 ] || show_last
run no_landlock timeout 60 "$EXG" run --layer auto -- echo hi
check "$who, no Landlock: --layer auto finds no layer (exit 125), landlock among the reasons" \
    bash -c '[ "$1" = 125 ] && [ -z "$2" ] && grep -q "no Landlock" <<<"$3"' _ "$STATUS" "$OUT" "$ERR"

finish
