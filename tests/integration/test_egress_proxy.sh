#!/usr/bin/env bash
# The egress proxy on its own, in the test world of egress_world.sh: allowed names via HTTP,
# CONNECT and SOCKS5; denied and unlisted names; names that resolve to forbidden ranges;
# odd IPv4 spellings; Host header mismatch; malformed input; SOCKS BIND/UDP; the audit log;
# a 50 MiB download intact; the token on TCP listeners (407 / SOCKS 0xFF without it) and a
# unix-socket listener that needs none. Every refusal is checked at both ends: the client's answer and
# the servers' request log (nothing may arrive).
source "$(dirname "$0")/lib.sh"

if [ "$EXG_AS" != root ]; then
    # The world needs root (network namespaces, veth). The sandbox-integrated egress tests
    # cover the unprivileged case.
    echo "# skip - standalone proxy tests run as root"
    exit 0
fi

# egress_world.sh: next to this script when run from the tree; run.sh copies only lib.sh
# and the script, so otherwise find the source tree through the build directory.
world_lib=$(dirname "$0")/egress_world.sh
if [ ! -f "$world_lib" ] && [ -n "${EXG_BUILD_DIR:-}" ] && [ -f "$EXG_BUILD_DIR/CMakeCache.txt" ]; then
    src=$(sed -n 's/^exguardian_SOURCE_DIR:STATIC=//p' "$EXG_BUILD_DIR/CMakeCache.txt")
    world_lib=$src/tests/integration/egress_world.sh
fi
if [ ! -f "$world_lib" ]; then
    echo "# skip - egress_world.sh not found"
    exit 0
fi
source "$world_lib"

# The proxy: EXG_PROXY_CMD (for runs by hand), `exguardian proxy` once it is wired in, or
# the test driver (tests/helpers/exg_proxy_driver.cpp) when it was linked with the core.
PROXY=()
if [ -n "${EXG_PROXY_CMD:-}" ]; then
    read -ra PROXY <<<"$EXG_PROXY_CMD"
elif "$EXG" proxy --help >/dev/null 2>&1; then
    PROXY=("$EXG" proxy)
elif [ -x "${EXG_BUILD_DIR:-}/exg_proxy_driver" ]; then
    "$EXG_BUILD_DIR/exg_proxy_driver" >/dev/null 2>&1
    [ $? -ne 77 ] && PROXY=("$EXG_BUILD_DIR/exg_proxy_driver")
fi
if [ ${#PROXY[@]} -eq 0 ]; then
    echo "# skip - no proxy to test: neither 'exguardian proxy' nor a linked exg_proxy_driver"
    exit 0
fi
note "proxy: ${PROXY[*]}"

world_up || { fail "the test world could not be built"; finish; }
ok "test world up ($EGW_NS_C, $EGW_NS_S)"

POLICY=$T/egress-policy.json
AUDIT=$T/egress-audit.log
cat > "$POLICY" <<'JSON'
{
  "network": {
    "allowedDomains": ["allowed.test", "other.test", "denied.test", "meta.test", "rebind.test",
                       "private.test", "mixed.test"],
    "deniedDomains": ["denied.test"]
  }
}
JSON
: > "$AUDIT"
HTTP_PROXY_ADDR=127.0.0.1:3128
SOCKS_ADDR=127.0.0.1:1080
TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s\n' "$TOKEN" > "$T/token"
chmod 600 "$T/token"
AUTH_B64=$(printf 'exguardian:%s' "$TOKEN" | base64 -w0)
AUTH_HDR="Proxy-Authorization: Basic $AUTH_B64\\r\\n"   # for raw.py (its escapes)

# No token on a TCP listener: refuses to start, one line, exit 125.
run in_client env -u EXGUARDIAN_PROXY_TOKEN "${PROXY[@]}" --listen 127.0.0.1:3999 --policy "$POLICY"
check "TCP listener without a token: exit 125 (got $STATUS)" test "$STATUS" = 125
check "  one-line error naming the token" bash -c 'grep -q "token" <<<"$1" && [ "$(grep -c . <<<"$1")" = 1 ]' _ "$ERR"

in_client_bg "${PROXY[@]}" --listen "$HTTP_PROXY_ADDR" --socks "$SOCKS_ADDR" --policy "$POLICY" \
    --audit-log "$AUDIT" --token-file "$T/token" </dev/null >"$T/proxy.out" 2>"$T/proxy.err"
proxy_pid=$EGW_BG_PID
proxy_up() { in_client bash -c "exec 3<>/dev/tcp/127.0.0.1/3128 && exec 4<>/dev/tcp/127.0.0.1/1080" 2>/dev/null; }
if wait_for 10 proxy_up; then ok "proxy listening"
else fail "proxy did not come up"; sed 's/^/#      /' "$T/proxy.err"; finish; fi

# A raw client: sends its argument (with \r \n \xNN escapes) and prints the answer.
cat > "$T/raw.py" <<'PY'
import socket, sys
host, port, data = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode().decode("unicode_escape").encode("latin-1")
s = socket.create_connection((host, port), timeout=5)
s.sendall(data)
out = b""
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        out += b
except socket.timeout:
    out += b"<timeout>"
sys.stdout.write(out.decode("latin-1"))
PY
# A SOCKS5 client: METHODS (hex) CMD HOST PORT [PASSWORD]; prints the method reply, the
# username/password reply (method 02) and the request reply in hex.
cat > "$T/socks.py" <<'PY'
import socket, sys
methods, cmd, host, port = bytes.fromhex(sys.argv[1]), int(sys.argv[2]), sys.argv[3].encode(), int(sys.argv[4])
pw = sys.argv[5].encode() if len(sys.argv) > 5 else b""
s = socket.create_connection(("127.0.0.1", 1080), timeout=5)
s.sendall(b"\x05" + bytes([len(methods)]) + methods)
m = s.recv(2)
print("method", m.hex())
if m == b"\x05\x02":
    s.sendall(b"\x01\x0aexguardian" + bytes([len(pw)]) + pw)
    a = s.recv(2)
    print("auth", a.hex())
    if a != b"\x01\x00":
        sys.exit(0)
elif m != b"\x05\x00":
    sys.exit(0)
s.sendall(b"\x05" + bytes([cmd, 0, 3, len(host)]) + host + port.to_bytes(2, "big"))
r = s.recv(262)
print("reply", r.hex())
PY

# curl through the HTTP proxy: -i so status line and headers are in OUT.
hcurl() { in_client curl -sS -i -m 10 -x "http://$HTTP_PROXY_ADDR" --proxy-user "exguardian:$TOKEN" "$@"; }
# curl's proxy arguments with the token.
PX=(-x "http://$HTTP_PROXY_ADDR" --proxy-user "exguardian:$TOKEN")
SX=(-x "socks5h://exguardian:$TOKEN@$SOCKS_ADDR")
SX4=(-x "socks5://exguardian:$TOKEN@$SOCKS_ADDR")
# Status code of the last response in OUT.
status_of() { sed -n 's/^HTTP\/1\.[01] \([0-9][0-9][0-9]\).*/\1/p' <<<"$OUT" | tail -n 1; }

expect_http() {  # CODE DESC CURL-ARGS...
    local want=$1 desc=$2; shift 2
    run hcurl "$@"
    local got
    got=$(status_of)
    if [ "$got" = "$want" ]; then ok "$desc: HTTP $want"
    else fail "$desc: HTTP $want expected, got '${got:-none}'"; show_last; fi
}

# (curl on the client side, no sandbox: the proxy's 403 and the rule it names)
expect_proxy_refused() {  # DESC RULE-SUBSTRING CURL-ARGS...
    local desc=$1 rule=$2; shift 2
    expect_http 403 "$desc" "$@"
    if grep -qi "^X-ExGuardian-Refused: .*$rule" <<<"$OUT"; then ok "$desc: X-ExGuardian-Refused names '$rule'"
    else fail "$desc: no X-ExGuardian-Refused header naming '$rule'"; show_last; fi
}

# ---- allowed: HTTP absolute-form, CONNECT, SOCKS5 -----------------------------------------------
expect_http 200 "allowed.test via absolute-form" http://allowed.test/abs-1
check "  body says hello from 203.0.113.10" grep -q "hello from 203.0.113.10" <<<"$OUT"
check "  the origin saw origin-form /abs-1 with Host allowed.test" server_log_has '^203\.0\.113\.10 GET /abs-1 host=allowed\.test$'
check "  Connection: close to the client" grep -qi '^Connection: close' <<<"$OUT"
expect_http 200 "other.test (same address) via absolute-form" http://other.test/abs-2
run in_client curl -sS -m 10 -p "${PX[@]}" http://allowed.test/connect-1
check "allowed.test via CONNECT: hello" grep -q "hello from 203.0.113.10" <<<"$OUT"
check "  the origin saw /connect-1" server_log_has '^203\.0\.113\.10 GET /connect-1 '
run in_client curl -sS -m 10 "${SX[@]}" http://allowed.test/socks-1
check "allowed.test via SOCKS5 (domain): hello" grep -q "hello from 203.0.113.10" <<<"$OUT"
check "  the origin saw /socks-1" server_log_has '^203\.0\.113\.10 GET /socks-1 '
run in_client curl -sS -m 10 "${PX[@]}" -d 'a=1&b=2' http://allowed.test/post-1
check "POST with a body via absolute-form (got '$OUT')" grep -q "got 7 bytes" <<<"$OUT"
run in_client curl -sS -m 10 "${PX[@]}" -H 'Transfer-Encoding: chunked' -d 'chunky' http://allowed.test/post-2
check "POST with a chunked body: request forwarded (origin saw /post-2)" server_log_has '^203\.0\.113\.10 POST /post-2 '
run in_client curl -sS -m 10 -x "http://$HTTP_PROXY_ADDR" -H "Proxy-Authorization: Bearer $TOKEN" \
    -H 'Connection: X-Hop' -H 'X-Hop: drop-me' http://allowed.test/hop-1
check "request with hop-by-hop headers forwarded" grep -q "hello" <<<"$OUT"

# ---- refused by name ----------------------------------------------------------------------------
before=$(server_log_count)
expect_proxy_refused "denied.test (denied beats allowed)" "deniedDomains" http://denied.test/denied-1
run in_client curl -sS -m 10 -p "${PX[@]}" http://denied.test/denied-2
check "denied.test via CONNECT refused with 403 (got: $ERR)" grep -q 'CONNECT tunnel failed, response 403' <<<"$ERR"
run in_client curl -sS -m 10 "${SX[@]}" http://denied.test/denied-3
check "denied.test via SOCKS5 fails with reply 2 (got: $ERR)" grep -q "(2)" <<<"$ERR"
expect_proxy_refused "unlisted name" "default deny" http://notlisted.test/
check "nothing arrived at denied.test's server" bash -c "! grep -q '^203\.0\.113\.11 ' '$EGW_LOG'"

# ---- names that resolve to forbidden ranges, and IP literals ------------------------------------
expect_proxy_refused "meta.test -> 169.254.169.254" "link-local" http://meta.test/meta-1
expect_proxy_refused "169.254.169.254 literal" "" http://169.254.169.254/latest/meta-data/
expect_proxy_refused "rebind.test -> 127.0.0.1" "loopback" http://rebind.test/rebind-1
expect_proxy_refused "private.test -> 10.0.0.5" "private" http://private.test/private-1
expect_proxy_refused "0xa9.0xfe.0xa9.0xfe" "" http://0xa9.0xfe.0xa9.0xfe/
expect_proxy_refused "2852039166" "" http://2852039166/
expect_proxy_refused "127.1" "" http://127.1/
expect_proxy_refused "0177.0.0.1" "" http://0177.0.0.1/
expect_proxy_refused "[::1]" "" 'http://[::1]/'
expect_proxy_refused "[::ffff:169.254.169.254]" "" 'http://[::ffff:169.254.169.254]/'
expect_proxy_refused "198.51.100.1 (the world's own interface)" "" http://198.51.100.1/
run in_client curl -sS -m 10 -p "${PX[@]}" http://meta.test/meta-2
check "meta.test via CONNECT refused with 403 (got: $ERR)" grep -q 'CONNECT tunnel failed, response 403' <<<"$ERR"
run in_client curl -sS -m 10 "${SX[@]}" http://meta.test/meta-3
check "meta.test via SOCKS5 fails with reply 2 (got: $ERR)" grep -q "(2)" <<<"$ERR"
run in_client curl -sS -m 10 "${SX4[@]}" http://169.254.169.254/meta-4
check "169.254.169.254 via SOCKS5 (IPv4 address type) fails with reply 2 (got: $ERR)" grep -q "(2)" <<<"$ERR"
run in_client curl -sS -m 10 "${SX[@]}" http://rebind.test/rebind-2
check "rebind.test via SOCKS5 fails with reply 2 (got: $ERR)" grep -q "(2)" <<<"$ERR"
expect_http 200 "mixed.test (127.0.0.1 and 203.0.113.10): only the good address used" http://mixed.test/mixed-1
check "  mixed.test reached 203.0.113.10" server_log_has '^203\.0\.113\.10 GET /mixed-1 '
for a in '169\.254\.169\.254' '10\.0\.0\.5' '127\.0\.0\.1' '203\.0\.113\.11'; do
    check "nothing arrived at the server on ${a//\\/}" bash -c "! grep -q '^$a ' '$EGW_LOG'"
done

# ---- Host header, malformed and oversized requests -------------------------------------------------
expect_proxy_refused "Host header names another host" "Host header mismatch" -H 'Host: denied.test' http://allowed.test/mismatch-1
check "  nothing arrived for the mismatched request" bash -c "! grep -q mismatch-1 '$EGW_LOG'"
run in_client "$EGW_PYTHON" "$T/raw.py" 127.0.0.1 3128 '\x16\x03\x01\x02\x00garbage\r\n\r\n'
check "binary garbage -> 400 (got '$(head -n1 <<<"$OUT")')" grep -q '^HTTP/1.1 400' <<<"$OUT"
run in_client "$EGW_PYTHON" "$T/raw.py" 127.0.0.1 3128 "GET / HTTP/1.1\r\n${AUTH_HDR}Host: allowed.test\r\n\r\n"
check "origin-form request -> 400" grep -q '^HTTP/1.1 400' <<<"$OUT"
run in_client "$EGW_PYTHON" "$T/raw.py" 127.0.0.1 3128 'GET http://allowed.test/ HTTP/1.1\r\n folded: x\r\n\r\n'
check "folded header -> 400" grep -q '^HTTP/1.1 400' <<<"$OUT"
run in_client "$EGW_PYTHON" "$T/raw.py" 127.0.0.1 3128 "POST http://allowed.test/smuggle HTTP/1.1\r\n${AUTH_HDR}Host: allowed.test\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
check "Content-Length with Transfer-Encoding -> 400" grep -q '^HTTP/1.1 400' <<<"$OUT"
run in_client "$EGW_PYTHON" "$T/raw.py" 127.0.0.1 3128 "GET http://allowed.test/pipe-1 HTTP/1.1\r\n${AUTH_HDR}Host: allowed.test\r\n\r\nGET http://denied.test/pipe-2 HTTP/1.1\r\nHost: denied.test\r\n\r\n"
check "pipelined second request is not forwarded" bash -c "grep -q pipe-1 '$EGW_LOG' && ! grep -q pipe-2 '$EGW_LOG'"
run in_client "$EGW_PYTHON" "$T/raw.py" 127.0.0.1 3128 "GET http://allowed.test/ HTTP/1.1\\r\\nX-Big: $(head -c 40000 /dev/zero | tr '\0' a)\\r\\n\\r\\n"
check "request head over 32 KiB -> 431" grep -q '^HTTP/1.1 431' <<<"$OUT"
run in_client "$EGW_PYTHON" "$T/raw.py" 127.0.0.1 3128 "CONNECT allowed.test HTTP/1.1\r\n$AUTH_HDR\r\n"
check "CONNECT without a port -> 400" grep -q '^HTTP/1.1 400' <<<"$OUT"

# ---- SOCKS5 handshake -----------------------------------------------------------------------------
run in_client "$EGW_PYTHON" "$T/socks.py" 02 2 allowed.test 80 "$TOKEN"
check "SOCKS5 BIND -> reply 0x07 (got '$OUT')" grep -q '^reply 0507' <<<"$OUT"
run in_client "$EGW_PYTHON" "$T/socks.py" 02 3 allowed.test 80 "$TOKEN"
check "SOCKS5 UDP ASSOCIATE -> reply 0x07 (got '$OUT')" grep -q '^reply 0507' <<<"$OUT"
run in_client "$EGW_PYTHON" "$T/socks.py" 00 1 allowed.test 80
check "SOCKS5 no-auth only while a token is set -> 0xFF (got '$OUT')" grep -q '^method 05ff' <<<"$OUT"
run in_client "$EGW_PYTHON" "$T/socks.py" 0002 1 allowed.test 80 wrong-token
check "SOCKS5 wrong password -> auth reply 0x01 0x01, no request (got '$OUT')" bash -c 'grep -q "^method 0502" <<<"$1" && grep -q "^auth 0101" <<<"$1" && ! grep -q "^reply" <<<"$1"' _ "$OUT"
run in_client "$EGW_PYTHON" "$T/socks.py" 02 1 allowed.test 80 "$TOKEN"
check "SOCKS5 right password -> auth 0x01 0x00, reply 0x00 (got '$OUT')" bash -c 'grep -q "^auth 0100" <<<"$1" && grep -q "^reply 0500" <<<"$1"' _ "$OUT"
run in_client "$EGW_PYTHON" "$T/socks.py" 02 1 nosuch.test 80 "$TOKEN"
check "SOCKS5 unlisted name -> reply 0x02 (got '$OUT')" grep -q '^reply 0502' <<<"$OUT"
run in_client "$EGW_PYTHON" "$T/socks.py" 02 1 allowed.test 81 "$TOKEN"
check "SOCKS5 connection refused by the origin -> reply 0x05 (got '$OUT')" grep -q '^reply 0505' <<<"$OUT"

# ---- the token: HTTP ---------------------------------------------------------------------------
before=$(server_log_count)
run in_client curl -sS -i -m 10 -x "http://$HTTP_PROXY_ADDR" http://allowed.test/noauth-1
check "no token, absolute-form -> 407 (got '$(status_of)')" test "$(status_of)" = 407
check "  Proxy-Authenticate: Basic realm=\"exguardian\"" grep -qi '^Proxy-Authenticate: Basic realm="exguardian"' <<<"$OUT"
run in_client curl -sS -i -m 10 -x "http://$HTTP_PROXY_ADDR" --proxy-user "exguardian:wrong$TOKEN" http://allowed.test/noauth-2
check "wrong token -> 407 (got '$(status_of)')" test "$(status_of)" = 407
run in_client curl -sS -i -m 10 -x "http://$HTTP_PROXY_ADDR" --proxy-user "admin:$TOKEN" http://allowed.test/noauth-3
check "right token, wrong user -> 407 (got '$(status_of)')" test "$(status_of)" = 407
run in_client curl -sS -m 10 -p -x "http://$HTTP_PROXY_ADDR" http://allowed.test/noauth-4
check "no token, CONNECT fails (got: $ERR)" bash -c 'test "$1" -ne 0 && grep -q 407 <<<"$2"' _ "$STATUS" "$ERR"
run in_client curl -sS -m 10 -x "socks5h://$SOCKS_ADDR" http://allowed.test/noauth-5
check "no token, SOCKS5 refused: no acceptable method (got: $ERR)" grep -q 'No authentication method was acceptable' <<<"$ERR"
check "  nothing arrived without the token" bash -c "! grep -q noauth '$EGW_LOG'"
run in_client curl -sS -m 10 -p -x "http://$HTTP_PROXY_ADDR" --proxy-header "Proxy-Authorization: Bearer $TOKEN" http://allowed.test/bearer-1
check "Bearer token via CONNECT: hello" grep -q "hello from 203.0.113.10" <<<"$OUT"

# ---- bulk: 50 MiB through CONNECT and through absolute-form, intact ------------------------------
run in_client bash -c "curl -sS -m 60 -p -x http://$HTTP_PROXY_ADDR --proxy-user exguardian:$TOKEN http://allowed.test/big | sha256sum"
check "50 MiB via CONNECT arrives intact" test "${OUT%% *}" = "$EGW_BIG_SHA"
run in_client bash -c "curl -sS -m 60 -x http://$HTTP_PROXY_ADDR --proxy-user exguardian:$TOKEN http://allowed.test/big | sha256sum"
check "50 MiB via absolute-form arrives intact" test "${OUT%% *}" = "$EGW_BIG_SHA"
run in_client bash -c "curl -sS -m 60 -x socks5h://exguardian:$TOKEN@$SOCKS_ADDR http://allowed.test/big | sha256sum"
check "50 MiB via SOCKS5 arrives intact" test "${OUT%% *}" = "$EGW_BIG_SHA"

# ---- concurrency: 200 tunnels at once -------------------------------------------------------------
cat > "$T/many.py" <<'PY'
import concurrent.futures, socket, sys
n, auth = int(sys.argv[1]), sys.argv[2].encode()
def one(i):
    s = socket.create_connection(("127.0.0.1", 3128), timeout=20)
    s.sendall(b"CONNECT allowed.test:80 HTTP/1.1\r\nHost: allowed.test:80\r\nProxy-Authorization: Basic " + auth + b"\r\n\r\n")
    buf = b""
    while b"\r\n\r\n" not in buf:
        b = s.recv(4096)
        if not b: return False
        buf += b
    if not buf.startswith(b"HTTP/1.1 200"): return False
    return s
socks = []
with concurrent.futures.ThreadPoolExecutor(64) as ex:
    socks = list(ex.map(one, range(n)))
good = [s for s in socks if s]
for i, s in enumerate(good):
    s.sendall(b"GET /many HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n")
ok = 0
for s in good:
    data = b""
    while True:
        b = s.recv(4096)
        if not b: break
        data += b
    ok += b"hello from 203.0.113.10" in data
    s.close()
print(ok)
PY
run in_client "$EGW_PYTHON" "$T/many.py" 200 "$AUTH_B64"
check "200 concurrent CONNECT tunnels all answered (got '$OUT')" test "$OUT" = 200

# ---- a unix-socket listener: no token ------------------------------------------------------------
cat > "$T/unix_connect.py" <<'PY'
import os, socket, stat, sys
path = sys.argv[1]
print("mode", oct(stat.S_IMODE(os.stat(path).st_mode)))
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(10)
s.connect(path)
s.sendall(b"CONNECT allowed.test:80 HTTP/1.1\r\nHost: allowed.test:80\r\n\r\n")
buf = b""
while b"\r\n\r\n" not in buf:
    b = s.recv(4096)
    if not b: break
    buf += b
print("status", buf.split(b"\r\n")[0].decode("latin-1"))
head, _, rest = buf.partition(b"\r\n\r\n")
s.sendall(b"GET /unix-1 HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n")
data = rest
while True:
    b = s.recv(65536)
    if not b: break
    data += b
print("hello" if b"hello from 203.0.113.10" in data else "no hello")
PY
USOCK=$T/exg-proxy.sock
in_client_bg env -u EXGUARDIAN_PROXY_TOKEN "${PROXY[@]}" --listen "unix:$USOCK" --policy "$POLICY" </dev/null \
    >"$T/proxy-unix.out" 2>"$T/proxy-unix.err"
unix_pid=$EGW_BG_PID
if wait_for 10 test -S "$USOCK"; then
    run in_client "$EGW_PYTHON" "$T/unix_connect.py" "$USOCK"
    check "unix listener: mode 0600 (got '$(head -n1 <<<"$OUT")')" grep -q '^mode 0o600' <<<"$OUT"
    check "unix listener: CONNECT without a token -> 200" grep -q '^status HTTP/1.1 200' <<<"$OUT"
    check "unix listener: the tunnel works" grep -q '^hello' <<<"$OUT"
    check "  the origin saw /unix-1" server_log_has '^203\.0\.113\.10 GET /unix-1 '
else
    fail "unix listener did not come up"; sed 's/^/#      /' "$T/proxy-unix.err"
fi
kill -TERM "$unix_pid" 2>/dev/null
wait "$unix_pid" 2>/dev/null

# ---- the audit log --------------------------------------------------------------------------------
sleep 0.3  # tunnels log when they close
cat > "$T/audit_check.py" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
need = {"time", "event", "protocol", "decision", "rule", "bytes_up", "bytes_down", "duration_ms"}
bad = [l for l in lines if l.get("event") == "egress" and not need <= set(l)]
def find(**kw):
    return [l for l in lines if all(l.get(k) == v for k, v in kw.items())]
errs = []
if bad: errs.append("lines lacking fields: %s" % bad[:2])
a = find(protocol="http", host="allowed.test", decision="allowed")
if not a or a[0].get("address") != "203.0.113.10": errs.append("no allowed http line for allowed.test with its address")
if not find(protocol="connect", host="allowed.test", decision="allowed"): errs.append("no connect line")
if not find(protocol="socks5", host="allowed.test", decision="allowed"): errs.append("no socks5 line")
m = find(host="meta.test", decision="refused", protocol="http")
if not m or m[0].get("address") != "169.254.169.254" or "link-local" not in m[0]["rule"]: errs.append("meta.test refusal line: %s" % m[:1])
if not find(host="denied.test", decision="refused"): errs.append("no denied.test refusal")
big = [l for l in find(protocol="connect", decision="allowed") if l["bytes_down"] >= 50 * 1024 * 1024]
if not big: errs.append("no connect line with >= 50 MiB down")
mixed = find(host="mixed.test", decision="allowed")
if not mixed or mixed[0].get("address") != "203.0.113.10": errs.append("mixed.test line: %s" % mixed[:1])
print("%d lines" % len(lines))
for e in errs: print("ERR", e)
PY
run "$EGW_PYTHON" "$T/audit_check.py" "$AUDIT"
check "audit log: one line per decision with the fields ($(head -n1 <<<"$OUT"))" bash -c "! grep -q ERR <<<\"\$1\"" _ "$OUT"
grep ERR <<<"$OUT" | sed 's/^/#      /'
# ---- stop ------------------------------------------------------------------------------------------
kill -TERM "$proxy_pid" 2>/dev/null
wait "$proxy_pid" 2>/dev/null
check "proxy exits on SIGTERM with a summary" grep -q "allowed, .* refused" "$T/proxy.err"
note "$(tail -n1 "$T/proxy.err")"
# One audit line per decision: the lines add up to the proxy's own counts.
summary=$(tail -n1 "$T/proxy.err")
decisions=$(sed -E 's/.*egress: ([0-9]+) allowed, ([0-9]+) refused.*, ([0-9]+) malformed.*/\1 + \2 + \3/' <<<"$summary")
lines=$(grep -c . "$AUDIT")
check "audit lines ($lines) = allowed + refused + malformed ($decisions)" test "$lines" = "$(( decisions ))"
check "audit log has a line for each of the 200 concurrent tunnels" test "$(grep -c '"protocol":"connect"' "$AUDIT")" -ge 200

finish
