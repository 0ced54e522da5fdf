#!/usr/bin/env bash
# Egress from inside the sandbox, through ExGuardian's own proxy, in a test world of network
# namespaces (run.sh builds it: tests/integration/egress_world.sh). Allowed names work with
# unchanged tools; everything else is refused by the proxy, explicitly, logged, and nothing
# reaches the world's servers; the sandbox has no other way out.
source "$(dirname "$0")/lib.sh"

new_workspace
require_sandbox || finish

server_log_has() { grep -qE -- "$1" "$EGW_LOG" 2>/dev/null; }
server_log_count() { grep -c . "$EGW_LOG" 2>/dev/null || true; }

audit="$T/audit.jsonl"
cat > "$T/policy.json" <<'JSON'
{
  "network": {
    "allowedDomains": ["allowed.test", "mixed.test", "rebind.test", "meta.test", "private.test", "denied.test"],
    "deniedDomains": ["denied.test"]
  },
  "filesystem": {"denyRead": [], "allowWrite": [], "denyWrite": []}
}
JSON
pol=(--policy "$T/policy.json" --audit-log "$audit")
C="curl -sS -m 10"

# Allowed, with the tools as they are: proxy variables are set inside.
expect_output_contains "hello from 203.0.113.10" sbx "${pol[@]}" -- $C http://allowed.test/
expect_output_contains "hello from 203.0.113.10" sbx "${pol[@]}" -- $C -p http://allowed.test/       # CONNECT
expect_output_contains "hello from 203.0.113.10" sbx "${pol[@]}" -- $C --socks5-hostname 127.0.0.1:1080 http://allowed.test/
expect_output_contains "hello from 203.0.113.10" sbx "${pol[@]}" -- python3 -c \
    'import urllib.request; print(urllib.request.urlopen("http://allowed.test/", timeout=10).read().decode())'
expect_output_contains "hello from 203.0.113.10" sbx "${pol[@]}" -- $C http://ALLOWED.TEST./         # case, trailing dot
expect_output_contains "hello from 203.0.113.10" sbx "${pol[@]}" -- $C http://mixed.test/            # only the good address
check "the allowed requests arrived" server_log_has '^203\.0\.113\.10 GET / host=allowed'

# Large download through a tunnel arrives intact.
run sbx "${pol[@]}" -- bash -c "$C -p http://allowed.test/big | sha256sum"
check "50 MiB through CONNECT intact" grep -q "$EGW_BIG_SHA" <<<"$OUT"

# Refused: explicit to the client, nothing at the servers.
before=$(server_log_count)
run sbx "${pol[@]}" -- $C -i http://denied.test/
check "denied.test: 403" grep -q "^HTTP/1.1 403" <<<"$OUT"
check "denied.test: X-ExGuardian-Refused names the rule" grep -qi '^X-ExGuardian-Refused: .*deniedDomains' <<<"$OUT"
run sbx "${pol[@]}" -- $C -i http://other.test/
check "other.test (not listed, same address as an allowed one): 403" grep -q "^HTTP/1.1 403" <<<"$OUT"
for url in http://meta.test/ http://169.254.169.254/latest/meta-data/ http://rebind.test/ http://private.test/ \
           http://0xa9fea9fe/ http://2852039166/ http://0251.0376.0251.0376/ http://169.254.43518/ \
           http://127.1/ http://[::ffff:169.254.169.254]/ http://localhost/; do
    # (--noproxy '': loopback names normally bypass the proxy and reach the sandbox's own
    # loopback; here they are sent to the proxy, which must not reach the host's.)
    run sbx "${pol[@]}" -- $C --noproxy '' -i "$url"
    check "$url refused with 403" grep -q "^HTTP/1.1 403" <<<"$OUT"
done
# localhost inside is the sandbox's own loopback: nothing listens there.
expect_refused 'curl: \(7\) Failed to connect to localhost port 80' '' "${pol[@]}" -- $C http://localhost/
run sbx "${pol[@]}" -- $C -i http://meta.test/
check "meta.test refused because of its address (link-local)" grep -qi '^X-ExGuardian-Refused: .*link-local' <<<"$OUT"
expect_refused '^X-ExGuardian-Refused: deniedDomains' '' "${pol[@]}" -- $C -p -i http://denied.test/   # (CONNECT)
# SOCKS5 reply 2: connection not allowed by ruleset.
expect_refused "curl: \\(97\\) Can't complete SOCKS5 connection to meta.test. \\(2\\)" '' \
    "${pol[@]}" -- $C --socks5-hostname 127.0.0.1:1080 http://meta.test/
expect_refused "curl: \\(97\\) Can't complete SOCKS5 connection to 169.254.169.254. \\(2\\)" '' \
    "${pol[@]}" -- $C --socks5 127.0.0.1:1080 http://169.254.169.254/
check "nothing arrived at the servers for refused requests ($before -> $(server_log_count))" \
    test "$(server_log_count)" = "$before"
check "the metadata server never saw a request" bash -c "! grep -q '^169.254.169.254' '$EGW_LOG'"
check "the client's loopback service never saw a request" bash -c "! grep -q '^127.0.0.1' '$EGW_LOG'"

# An explicit CIDR rule opens exactly that range.
sed 's/"allowedDomains"/"allowedCidrs": ["10.0.0.5\/32"], "allowedDomains"/' "$T/policy.json" > "$T/cidr.json"
expect_output_contains "hello from 10.0.0.5" sbx --policy "$T/cidr.json" -- $C http://private.test/
run sbx --policy "$T/cidr.json" -- $C -i http://meta.test/
check "the CIDR rule does not open the metadata address" grep -q "^HTTP/1.1 403" <<<"$OUT"

# Transparent egress (on by default): clients that ignore the proxy variables. The resolver
# answers allowed names only, with addresses of its own; every TCP connection to any address
# reaches the proxy, which judges it as the explicit proxy does.
cat > "$T/tp.json" <<'JSON'
{"network": {"allowedDomains": ["allowed.test", "plain.test", "meta.test", "private.test"],
             "deniedDomains": ["denied.test"]}}
JSON
tpa=$T/tp-audit.jsonl
tp=(--policy "$T/tp.json" --audit-log "$tpa")
before=$(server_log_count)
# One sandbox for the lot: each line is "label result".
run sbx "${tp[@]}" -- bash -c '
C="curl -sS -m 10 --noproxy \*"
r() { printf "%s %s\n" "$1" "$(eval "$2" 2>&1 | tr "\n" " ")"; }
r allowed "$C http://allowed.test/"
r denied "$C http://denied.test/"
r meta-name "$C http://meta.test/"
r private-name "$C http://private.test/"
r meta-ip "$C http://169.254.169.254/latest/meta-data/"
r private-ip "$C http://10.0.0.5/"
r denied-ip "$C http://203.0.113.11/"
r https "$C https://plain.test/tp-curl"
python3 - <<"PY"
import errno, socket, ssl
ctx = ssl.create_default_context()
def tls(label, name, sni=None, addr=None):
    try:
        a = addr or socket.gethostbyname(name)
        with socket.create_connection((a, 443), timeout=10) as s:
            with ctx.wrap_socket(s, server_hostname=sni or name) as t:
                t.sendall(b"GET /tp-python HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (sni or name).encode())
                print(label, "OK", a, t.recv(200).split(b"\r\n")[0].decode())
    except Exception as e:
        print(label, "REFUSED", type(e).__name__, e)
tls("py-allowed", "plain.test")
tls("py-denied", "denied.test")
tls("py-mismatch", "plain.test", sni="api.secret.test")
tls("py-literal", "plain.test", addr="203.0.113.20")
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try: u.sendto(b"x", ("203.0.113.10", 53)); print("udp SENT")
except OSError as e: print("udp refused", errno.errorcode.get(e.errno))
s = socket.socket(); s.settimeout(5)
try: s.connect(("127.0.0.1", 15001)); s.sendall(b"GET / HTTP/1.0\r\n\r\n"); print("listener", s.recv(100) or "closed")
except OSError as e: print("listener", e)
PY
'
got() { grep -qE -- "^$1 $2" <<<"$OUT" || { echo "#  want '$1 $2', got: $(grep "^$1 " <<<"$OUT")"; return 1; }; }
check "transparent: curl --noproxy reaches an allowed name" got allowed "hello from 203\.0\.113\.10"
check "transparent: a denied name does not resolve" got denied "curl: \(6\)"
check "transparent: a name whose address is link-local does not resolve" got meta-name "curl: \(6\)"
check "transparent: a name whose address is private does not resolve" got private-name "curl: \(6\)"
check "transparent: the metadata address is refused" got meta-ip "curl: \((52|56)\)"
check "transparent: a private address is refused" got private-ip "curl: \((52|56)\)"
check "transparent: a literal address without a CIDR rule is refused" got denied-ip "curl: \((52|56)\)"
check "transparent: curl https reaches an allowed name (its own certificate)" got https '\{"addr": "203\.0\.113\.20"'
check "transparent: python socket+ssl with SNI reaches an allowed name" got py-allowed "OK 198\.18\.[0-9.]+ HTTP/1\.[01] 200"
check "transparent: python: a denied name does not resolve" got py-denied "REFUSED gaierror"
check "transparent: an SNI of another name on an allowed name's address is refused" got py-mismatch "REFUSED"
check "transparent: python to a literal address without a CIDR rule is refused" got py-literal "REFUSED"
check "transparent: UDP other than the resolver is refused (EPERM)" got udp "refused EPERM"
check "transparent: the listener itself is no way out" got listener "closed"
check "transparent: nothing refused arrived at the servers ($before -> $(server_log_count))" \
    test "$(server_log_count)" = "$((before + 1))"
check "transparent: the metadata server never saw a request" bash -c "! grep -q '^169.254.169.254' '$EGW_LOG'"
check "transparent: the audit log has each decision" python3 - "$tpa" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
dns = [l for l in lines if l["event"] == "dns"]
tp = [l for l in lines if l.get("protocol") == "transparent"]
def has(ls, **kw):
    assert any(all(l.get(k) == v for k, v in kw.items()) for l in ls), (kw, ls)
has(dns, host="denied.test", decision="refused", rcode="NXDOMAIN")
has(dns, host="meta.test", decision="refused")
has(dns, host="allowed.test", decision="allowed")
assert all(a.startswith("198.18.") for l in dns for a in l["answers"]), dns
has(tp, host="allowed.test", port=80, decision="allowed", address="203.0.113.10")
has(tp, host="plain.test", port=443, decision="allowed", address="203.0.113.20")
has(tp, host="169.254.169.254", decision="refused")
has(tp, host="10.0.0.5", decision="refused")
has(tp, host="203.0.113.20", decision="refused")
has(tp, host="plain.test", decision="refused", rule="TLS server name mismatch")
has(tp, decision="refused", rule="not redirected")
PY
# An explicit CIDR rule opens that address to transparent clients too.
sed 's/"allowedDomains"/"allowedCidrs": ["10.0.0.5\/32"], "allowedDomains"/' "$T/tp.json" > "$T/tp-cidr.json"
expect_output_contains "hello from 10.0.0.5" sbx --policy "$T/tp-cidr.json" -- $C --noproxy '*' http://10.0.0.5/

# Transparent egress off (the policy says so): no way around the proxy: only loopback
# inside, no route, no DNS server, no UDP out.
sed 's/"network": {/"network": {"transparent": false, /' "$T/policy.json" > "$T/off.json"
run sbx --policy "$T/off.json" --dry-run -- true
check "--dry-run says transparent egress is off" grep -q "transparent: off (network.transparent: false)" <<<"$OUT$ERR"
expect_refused 'curl: \(7\) Failed to connect to 203.0.113.10 port 80' '' --policy "$T/off.json" -- $C --noproxy '*' http://203.0.113.10/
# Each attempt answered ENETUNREACH (101: no route, only lo); the script exits 1 when all were.
expect_refused "^refused \\('203.0.113.10', 80\\) 101$" CONNECTED --policy "$T/off.json" -- python3 -c '
import socket, sys
out = False
for fam, addr in ((socket.AF_INET, ("203.0.113.10", 80)), (socket.AF_INET, ("198.51.100.2", 80))):
    s = socket.socket(fam, socket.SOCK_STREAM); s.settimeout(3)
    try: s.connect(addr); print("CONNECTED", addr); out = True
    except OSError as e: print("refused", addr, e.errno)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try: u.sendto(b"x", ("203.0.113.10", 53)); print("UDP SENT"); out = True
except OSError as e: print("udp refused", e.errno)
sys.exit(0 if out else 1)'
last_refused "^refused \\('198.51.100.2', 80\\) 101$" CONNECTED "no direct TCP to 198.51.100.2:80 out of the sandbox"
last_refused '^udp refused 101$' "UDP SENT" "no UDP out of the sandbox"
# (gVisor has no /sys/class/net: there the list comes from if_nameindex())
if_list='ls /sys/class/net 2>/dev/null || python3 -c "import socket; print(\" \".join(n for _, n in socket.if_nameindex()))"'
expect_output_contains "lo" sbx -- bash -c "$if_list"
run sbx -- bash -c "$if_list"
check "the sandbox's only interface is lo" test "$(tr -d '[:space:]' <<<"$OUT")" = lo

# The proxy's ports exist only inside the sandbox: nothing listens on the host side.
(cd "$WS" && exec "${EXG_RUN[@]}" "${pol[@]}" -- sleep 3) >/dev/null 2>&1 &
bg=$!
track_bg "$bg"
sleep 1
check "no proxy port on the host side (3128, 1080)" python3 -c '
import socket, sys
for p in (3128, 1080):
    s = socket.socket(); s.settimeout(1)
    if s.connect_ex(("127.0.0.1", p)) == 0: sys.exit(1)'
wait "$bg"

# Audit: one JSON line per decision, allowed and refused, with the fields.
check "audit log written" test -s "$audit"
check "audit lines carry the decision fields" python3 -c "
import json
lines = [json.loads(l) for l in open('$audit') if '\"egress\"' in l]
assert lines, 'no egress lines'
for l in lines:
    for k in ('time', 'sandbox', 'protocol', 'host', 'port', 'decision', 'rule'):
        assert k in l, (k, l)
ok = [l for l in lines if l['decision'] == 'allowed']
no = [l for l in lines if l['decision'] == 'refused']
assert ok and no, (len(ok), len(no))
assert any(l['host'] == 'allowed.test' and l.get('address') == '203.0.113.10' and l.get('bytes_down', 0) > 0 for l in ok), ok[:3]
assert any(l['host'] == 'denied.test' for l in no)
assert any('link-local' in l['rule'] for l in no)
"
run sbx -v "${pol[@]}" -- $C -s http://denied.test/ -o /dev/null
check "-v summarises the egress refusals" grep -q "egress: .*refused" <<<"$ERR"

finish
