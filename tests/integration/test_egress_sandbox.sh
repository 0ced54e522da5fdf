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
# TCP connections the world's port-80 and banner servers accepted (egress_world.sh), bare ones too.
conn_log_count() { grep -cE -- "$1" "$(dirname "$EGW_LOG")/connections.log" 2>/dev/null || true; }

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

# Transparent egress (on by default): clients that ignore the proxy variables. The exact
# allowed names are in the sandbox's /etc/hosts with addresses of the proxy's own; the resolver
# answers the rest (here *.wild.test), allowed names only, with such addresses too; every TCP
# connection to any address reaches the proxy, which judges it as the explicit proxy does.
cat > "$T/tp.json" <<'JSON'
{"network": {"allowedDomains": ["allowed.test", "plain.test", "meta.test", "private.test", "*.wild.test"],
             "deniedDomains": ["denied.test"]}}
JSON
tpa=$T/tp-audit.jsonl
tp=(--policy "$T/tp.json" --audit-log "$tpa")
before=$(server_log_count)
c80=$(conn_log_count '^203\.0\.113\.10:80 ')
c22=$(conn_log_count '^203\.0\.113\.10:22 ')
# One sandbox for the lot: each line is "label result".
run sbx "${tp[@]}" -- bash -c '
C="curl -sS -m 10 --noproxy \*"
r() { printf "%s %s\n" "$1" "$(eval "$2" 2>&1 | tr "\n" " ")"; }
r allowed "$C http://allowed.test/"
r denied "$C http://denied.test/"
r meta-name "$C http://meta.test/"
r private-name "$C http://private.test/"
r hosts "grep -E \"^198.*(allowed|meta)[.]test\" /etc/hosts"
r wild "$C http://tp.wild.test/"
r meta-wild "$C http://meta.wild.test/"
r meta-ip "$C http://169.254.169.254/latest/meta-data/"
r private-ip "$C http://10.0.0.5/"
r denied-ip "$C http://203.0.113.11/"
r https "$C https://plain.test/tp-curl"
python3 - <<"PY"
import errno, socket, ssl
ctx = ssl.create_default_context()
def tls(label, name, sni=None, addr=None, port=443):
    try:
        a = addr or socket.gethostbyname(name)
        with socket.create_connection((a, port), timeout=10) as s:
            with ctx.wrap_socket(s, server_hostname=sni or name) as t:
                t.sendall(b"GET /tp-python HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (sni or name).encode())
                print(label, "OK", a, t.recv(200).split(b"\r\n")[0].decode())
    except Exception as e:
        print(label, "REFUSED", type(e).__name__, e)
tls("py-allowed", "plain.test")
tls("py-denied", "denied.test")
tls("py-mismatch", "plain.test", sni="api.secret.test")
tls("py-literal", "plain.test", addr="203.0.113.20")
# Mismatches on the address of allowed.test, port 80, where the world counts every connection.
tls("py-mismatch80", "allowed.test", sni="denied.test", port=80)
try:
    with socket.create_connection((socket.gethostbyname("allowed.test"), 80), timeout=10) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: denied.test\r\nConnection: close\r\n\r\n")
        d = s.recv(200)
        print("host-mismatch", "ANSWER %r" % d[:40] if d else "REFUSED closed")
except Exception as e:
    print("host-mismatch REFUSED", type(e).__name__, e)
# Server-first (an ssh-like banner on allowed.test:22): the client says nothing until it has it.
try:
    with socket.create_connection((socket.gethostbyname("allowed.test"), 22), timeout=10) as s:
        f = s.makefile("rb")
        b = f.readline().strip().decode()
        s.sendall(b"SSH-2.0-exgclient\r\n")
        print("banner OK", b, f.readline().strip().decode())
except Exception as e:
    print("banner FAILED", type(e).__name__, e)
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
check "transparent: the exact allowed names are in /etc/hosts with the proxy's own addresses" \
    got hosts "198\.18\.0\.1[[:space:]]+allowed\.test 198\.18\.0\.3[[:space:]]+meta\.test"
check "transparent: an allowed name whose address is link-local is refused at the proxy" got meta-name "curl: \((52|56)\)"
check "transparent: an allowed name whose address is private is refused at the proxy" got private-name "curl: \((52|56)\)"
check "transparent: a wildcard-allowed name resolves through the resolver and is reached" got wild "hello from 203\.0\.113\.10"
check "transparent: a wildcard-allowed name whose address is link-local does not resolve" got meta-wild "curl: \(6\)"
check "transparent: the metadata address is refused" got meta-ip "curl: \((52|56)\)"
check "transparent: a private address is refused" got private-ip "curl: \((52|56)\)"
check "transparent: a literal address without a CIDR rule is refused" got denied-ip "curl: \((52|56)\)"
check "transparent: curl https reaches an allowed name (its own certificate)" got https '\{"addr": "203\.0\.113\.20"'
check "transparent: python socket+ssl with SNI reaches an allowed name" got py-allowed "OK 198\.18\.[0-9.]+ HTTP/1\.[01] 200"
check "transparent: python: a denied name does not resolve" got py-denied "REFUSED gaierror"
check "transparent: an SNI of another name on an allowed name's address is refused" got py-mismatch "REFUSED"
check "transparent: python to a literal address without a CIDR rule is refused" got py-literal "REFUSED"
check "transparent: an SNI of denied.test on allowed.test's address (port 80) is refused" got py-mismatch80 "REFUSED"
check "transparent: a Host of denied.test on allowed.test's address is refused" got host-mismatch "REFUSED"
check "transparent: a server-first protocol works (banner first, then the client's line)" \
    got banner "OK SSH-2.0-exgworld got SSH-2.0-exgclient"
check "transparent: the mismatches reached no server, not even as a bare connection (203.0.113.10:80 accepted $c80 -> $(conn_log_count '^203\.0\.113\.10:80 '): the two allowed curls only)" \
    test "$(conn_log_count '^203\.0\.113\.10:80 ')" = "$((c80 + 2))"
check "transparent: the banner server accepted the one server-first connection" \
    test "$(conn_log_count '^203\.0\.113\.10:22 ')" = "$((c22 + 1))"
check "transparent: UDP other than the resolver is refused (EPERM)" got udp "refused EPERM"
# Closed before or after the client's request arrived: a clean close or a reset, both refusals.
check "transparent: the listener itself is no way out" got listener "(closed|\\[Errno 104\\])"
check "transparent: nothing refused arrived at the servers ($before -> $(server_log_count): the two allowed curls only)" \
    test "$(server_log_count)" = "$((before + 2))"
check "transparent: the metadata server never saw a request" bash -c "! grep -q '^169.254.169.254' '$EGW_LOG'"
check "transparent: the audit log has each decision" audit_has "$tpa" --answers-in 198.18. \
    '{"event": "dns", "host": "denied.test", "decision": "refused", "rcode": "NXDOMAIN"}' \
    '{"event": "dns", "host": "meta.wild.test", "decision": "refused"}' \
    '{"event": "dns", "host": "tp.wild.test", "decision": "allowed"}' \
    '{"protocol": "transparent", "host": "allowed.test", "port": 80, "decision": "allowed", "address": "203.0.113.10"}' \
    '{"protocol": "transparent", "host": "meta.test", "port": 80, "decision": "refused"}' \
    '{"protocol": "transparent", "host": "tp.wild.test", "port": 80, "decision": "allowed", "address": "203.0.113.10"}' \
    '{"protocol": "transparent", "host": "plain.test", "port": 443, "decision": "allowed", "address": "203.0.113.20"}' \
    '{"protocol": "transparent", "host": "169.254.169.254", "decision": "refused"}' \
    '{"protocol": "transparent", "host": "10.0.0.5", "decision": "refused"}' \
    '{"protocol": "transparent", "host": "203.0.113.20", "decision": "refused"}' \
    '{"protocol": "transparent", "host": "plain.test", "decision": "refused", "rule": "TLS server name mismatch"}' \
    '{"protocol": "transparent", "host": "allowed.test", "port": 80, "decision": "refused", "rule": "TLS server name mismatch"}' \
    '{"protocol": "transparent", "host": "allowed.test", "port": 80, "decision": "refused", "rule": "Host header mismatch"}' \
    '{"protocol": "transparent", "host": "allowed.test", "port": 22, "decision": "allowed", "address": "203.0.113.10"}' \
    '{"protocol": "transparent", "decision": "refused", "rule": "not redirected"}'
check "transparent: the exact allowed names never asked the resolver (their lookups read /etc/hosts)" \
    no_dns_for "$tpa" allowed.test plain.test meta.test
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

# ---- srt 0.0.83's proxy keys and request rules (issue 18) -----------------------------------
# One sandbox a policy, each running every request at once; what each got is checked after.
PW="pw$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
audit2=$T/audit-srt.jsonl
cat > "$T/srt.json" <<JSON
{
  "network": {
    "allowedDomains": ["allowed.test", "other.test", "denied.test", "private.test"],
    "deniedDomains": ["denied.test"],
    "deniedDomainReasons": {"denied.test": "denied.test is off limits; use allowed.test"},
    "allowedCidrs": ["10.0.0.0/8"],
    "deniedResolvedAddresses": ["10.0.0.0/24"],
    "stripResponseHeaders": ["Content-Type"],
    "requireHostMatch": true,
    "refuseOpaqueTunnels": true,
    "rules": [{"host": "allowed.test", "methods": ["GET"], "paths": ["/repos/"]},
              {"host": "allowed.test", "name": "no-admin", "action": "deny", "paths": ["/repos/admin"]}],
    "parentProxy": {"http": "http://me:$PW@198.51.100.2:3128", "noProxy": "other.test,private.test"}
  },
  "filesystem": {"denyRead": [], "allowWrite": [], "denyWrite": []}
}
JSON
run sbx --policy "$T/srt.json" --audit-log "$audit2" -- bash -c "
c() { echo \"== \$1\"; shift; $C -i \"\$@\" 2>&1; echo; }
c get http://allowed.test/repos/x
c post -d x http://allowed.test/repos/x
c admin http://allowed.test/repos/admin/x
c elsewhere http://allowed.test/user
c dots --path-as-is http://allowed.test/repos/../user
c connect -p http://allowed.test/repos/x
c socks --socks5-hostname 127.0.0.1:1080 http://allowed.test/repos/x
c opaque -p http://other.test/
c opaque_socks --socks5-hostname 127.0.0.1:1080 http://other.test/
c denied http://denied.test/
c private http://private.test/
c other http://other.test/
c misdirected -H 'Host: other.test' http://allowed.test/repos/x
c captured --noproxy '*' http://allowed.test/repos/x
echo \"== env\"; env"
# section NAME: the output of one request above.
section() { awk -v s="== $1" '$0 == s {on = 1; next} /^== / {on = 0} on' <<<"$OUT"; }
check "rule: GET /repos/x allowed, through the parent proxy" grep -q "hello from 203.0.113.10" <<<"$(section get)"
check "the parent proxy saw the CONNECT, with its credentials" \
    grep -q "CONNECT allowed.test:80 auth=Basic $(printf 'me:%s' "$PW" | base64)" "$EGW_PARENT_LOG"
check "the parent proxy's password is nowhere in the sandbox's environment" bash -c "! grep -q '$PW' <<<\"\$1\"" _ "$(section env)"
check "rule: POST refused 403 naming the rule" \
    grep -qi '^X-ExGuardian-Refused: network.rules\[0\] allowed.test' <<<"$(section post)"
check "deny rule: /repos/admin refused (no-admin)" grep -qi '^X-ExGuardian-Refused: no-admin' <<<"$(section admin)"
check "rule: a path outside the rule refused" grep -q '^HTTP/1.1 403' <<<"$(section elsewhere)"
check "rule: a dot segment is refused as ambiguous (400)" grep -q '^HTTP/1.1 400' <<<"$(section dots)"
# A tunnel to a host under a rule is terminated (its requests judged): plain HTTP in it fails.
check "rule: CONNECT to a host under a rule is terminated, not tunnelled" \
    bash -c '! grep -q "hello from" <<<"$1" && grep -q "^HTTP/1.1 200 Connection established" <<<"$1"' _ "$(section connect)"
check "rule: SOCKS5 to a host under a rule is terminated, not tunnelled" bash -c '! grep -q "hello from" <<<"$1"' _ "$(section socks)"
check "refuseOpaqueTunnels: CONNECT and SOCKS5 to a host without a rule refused" bash -c '
    grep -qi "^X-ExGuardian-Refused: refuseOpaqueTunnels" <<<"$1" && grep -q "(97)" <<<"$2"' _ "$(section opaque)" "$(section opaque_socks)"
check "deniedDomainReasons: the reason in the refusal" grep -q 'denied.test is off limits; use allowed.test' <<<"$(section denied)"
check "deniedResolvedAddresses beats allowedCidrs" \
    grep -qi '^X-ExGuardian-Refused: deniedResolvedAddresses\[0\]' <<<"$(section private)"
check "noProxy: other.test direct, Content-Type stripped" \
    bash -c 'grep -q "hello from 203.0.113.10" <<<"$1" && ! grep -qi "^Content-Type" <<<"$1"' _ "$(section other)"
check "requireHostMatch: a Host naming another host gets 421" grep -q '^HTTP/1.1 421' <<<"$(section misdirected)"
check "rule: captured plain HTTP to a host under a rule is refused (not judged request by request)" \
    bash -c '! grep -q "hello from" <<<"$1" && grep -q "curl: (52)" <<<"$1"' _ "$(section captured)"
check "the parent proxy saw CONNECTs to allowed.test only (refused requests never left, noProxy went direct)" \
    bash -c "! grep -qv ' CONNECT allowed.test:80 ' '$EGW_PARENT_LOG'"
check "only the allowed request reached allowed.test's /repos/ (no POST, no admin)" \
    bash -c "! grep -qE '^203.0.113.10 (POST|GET /repos/admin|GET /user)' '$EGW_LOG'"

# The user's proxies on this side (httpProxyPort, socksProxyPort, mitmProxy), then readOnly and
# refuseOpaqueTunnels.
mitm_log=$T/mitm.log
: > "$mitm_log"
python3 "$T/parent_proxy.py" "$mitm_log" /etc/hosts tcp:127.0.0.1:18080 "unix:$T/mitm.sock" </dev/null >/dev/null 2>&1 &
track_bg $!
wait_for 10 test -S "$T/mitm.sock"
cat > "$T/srt2.json" <<JSON
{"network": {"allowedDomains": ["allowed.test", "other.test"], "httpProxyPort": 18080, "socksProxyPort": 18080,
             "mitmProxy": {"socketPath": "$T/mitm.sock", "domains": ["other.test"]}}}
JSON
cat > "$T/srt3.json" <<'JSON'
{"network": {"allowedDomains": ["allowed.test"], "readOnly": true}}
JSON
run sbx --policy "$T/srt2.json" --audit-log "$audit2" -- bash -c "$C http://allowed.test/a; $C -p http://allowed.test/b;
    $C --socks5-hostname 127.0.0.1:1080 http://allowed.test/c; $C http://other.test/d"
check "httpProxyPort, socksProxyPort, mitmProxy: all four answered" test "$(grep -c 'hello from 203.0.113.10' <<<"$OUT")" = 4
check "the user's proxies saw them: CONNECT on the port, SOCKS5 on the port, CONNECT on the socket" bash -c "
    grep -q '^tcp:127.0.0.1:18080 CONNECT allowed.test:80' '$mitm_log' && grep -q '^tcp:127.0.0.1:18080 SOCKS allowed.test:80' '$mitm_log' &&
    grep -q '^unix:$T/mitm.sock CONNECT other.test:80' '$mitm_log'"
run sbx --policy "$T/srt3.json" --audit-log "$audit2" -- bash -c "
    $C -i http://allowed.test/ro; $C -i -X DELETE http://allowed.test/ro"
check "readOnly: GET answered" grep -q 'hello from 203.0.113.10' <<<"$OUT"
check "readOnly: DELETE refused naming network.readOnly" grep -qi '^X-ExGuardian-Refused: network.readOnly' <<<"$OUT"
check "audit lines name the rules and the proxies gone through" python3 - "$audit2" "$PW" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
assert sys.argv[2] not in text, "the parent proxy's password is in the audit log"
lines = [json.loads(l) for l in text.splitlines() if '"egress"' in l]
def has(pred, what):
    assert any(pred(l) for l in lines), (what, lines)
no = lambda l: l["decision"] == "refused"
has(lambda l: no(l) and l["rule"] == "network.rules[0] allowed.test" and "POST" in l["reason"], "POST refused by rule 0")
has(lambda l: no(l) and l["rule"] == "no-admin", "the deny rule")
has(lambda l: no(l) and l["protocol"] == "transparent" and l["rule"] == "network.rules[0] allowed.test", "captured")
has(lambda l: no(l) and l["rule"] == "network.readOnly" and "DELETE" in l["reason"], "readOnly")
has(lambda l: no(l) and l["rule"] == "refuseOpaqueTunnels", "refuseOpaqueTunnels")
has(lambda l: no(l) and l["reason"] == "denied.test is off limits; use allowed.test", "deniedDomainReasons")
has(lambda l: no(l) and l["rule"].startswith("deniedResolvedAddresses[0]"), "deniedResolvedAddresses")
has(lambda l: l.get("via") == "parentProxy http://***@198.51.100.2:3128" and l.get("request_rule") == "network.rules[0] allowed.test", "via the parent")
for via in ("httpProxyPort 18080", "socksProxyPort 18080", "mitmProxy "):
    has(lambda l, v=via: l.get("via", "").startswith(v), via)
PY
# An https:// parent proxy (TLS to it, its certificate verified): a throwaway CA trusted through
# parentProxy.caFile signed the certificate of a proxy for "localhost"; another proxy has one of
# its own. Plain HTTP and CONNECT go through the trusted one; the address (127.0.0.1 is not in
# its certificate) and the untrusted one are refused, each with why in the audit line.
tls_log=$T/parent-tls.log
audit3=$T/audit-tls.jsonl
: > "$tls_log"
newkey=(-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1)
openssl req -x509 "${newkey[@]}" -keyout "$T/pca.key" -out "$T/pca.pem" -subj "/CN=parent proxy test CA" 2>/dev/null
openssl req -new "${newkey[@]}" -keyout "$T/pp.key" -out "$T/pp.csr" -subj /CN=localhost 2>/dev/null
openssl x509 -req -in "$T/pp.csr" -CA "$T/pca.pem" -CAkey "$T/pca.key" -CAcreateserial -days 1 -out "$T/pp.pem" \
    -extfile <(printf 'subjectAltName=DNS:localhost\n') 2>/dev/null
openssl req -x509 "${newkey[@]}" -keyout "$T/self.key" -out "$T/self.pem" -subj /CN=localhost \
    -addext subjectAltName=DNS:localhost 2>/dev/null
for p in "pp 18443" "self 18444"; do
    set -- $p
    python3 "$T/parent_proxy.py" --tls "$T/$1.pem" "$T/$1.key" "$tls_log" /etc/hosts "tcp:127.0.0.1:$2" \
        </dev/null >"$T/parent-$1.err" 2>&1 &
    track_bg $!
done
wait_for 10 python3 -c 'import socket; [socket.create_connection(("127.0.0.1", p), 1).close() for p in (18443, 18444)]'
cat > "$T/tls.json" <<JSON
{"network": {"allowedDomains": ["allowed.test"],
             "parentProxy": {"http": "https://me:$PW@localhost:18443", "https": "https://localhost:18443",
                             "caFile": "$T/pca.pem"}}}
JSON
cat > "$T/tls-bad.json" <<JSON
{"network": {"allowedDomains": ["allowed.test"],
             "parentProxy": {"http": "https://127.0.0.1:18443", "https": "https://localhost:18444",
                             "caFile": "$T/pca.pem"}}}
JSON
run sbx --policy "$T/tls.json" --audit-log "$audit3" -- bash -c "$C http://allowed.test/a; $C -p http://allowed.test/b;
    $C -p http://allowed.test/big | sha256sum"
check "https:// parent proxy: plain HTTP and CONNECT answered through it" \
    test "$(grep -c 'hello from 203.0.113.10' <<<"$OUT")" = 2
check "https:// parent proxy: 50 MiB through CONNECT over its TLS intact" grep -q "$EGW_BIG_SHA" <<<"$OUT"
check "the https:// parent proxy saw the CONNECTs, the credentials inside its TLS" bash -c "
    grep -q '^tcp:127.0.0.1:18443 CONNECT allowed.test:80 auth=Basic $(printf 'me:%s' "$PW" | base64)' '$tls_log' &&
    test \$(grep -c '^tcp:127.0.0.1:18443 CONNECT allowed.test:80 auth=-' '$tls_log') = 2"
run sbx --policy "$T/tls-bad.json" --audit-log "$audit3" -- bash -c "$C -i http://allowed.test/c; $C -i -p http://allowed.test/d"
check "https:// parent proxy: a name its certificate does not hold and an untrusted certificate: 502, nothing through" \
    bash -c '! grep -q "hello from" <<<"$1" && test "$(grep -c "^HTTP/1.1 502" <<<"$1")" = 2' _ "$OUT"
check "neither refused parent proxy saw a request" bash -c "! grep -q '^tcp:127.0.0.1:18444 ' '$tls_log' &&
    test \$(grep -c . '$tls_log') = 3"
check "the audit lines say why the parent proxy was refused" python3 - "$audit3" "$PW" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
assert sys.argv[2] not in text, "the parent proxy's password is in the audit log"
lines = [json.loads(l) for l in text.splitlines() if '"egress"' in l]
def has(pred, what):
    assert any(pred(l) for l in lines), (what, lines)
has(lambda l: l.get("via") == "parentProxy https://***@localhost:18443" and "error" not in l, "through the TLS proxy")
has(lambda l: l.get("via") == "parentProxy https://127.0.0.1:18443" and "certificate not trusted: IP address mismatch" in l["error"], "name")
has(lambda l: l.get("via") == "parentProxy https://localhost:18444" and "certificate not trusted: self" in l["error"], "untrusted")
PY
run sbx --dry-run --policy "$T/tls.json" -- true
check "--dry-run says the parent proxy is reached over TLS, verified with caFile" \
    grep -q "network.parentProxy: .*https://: TLS to the proxy, .*$T/pca.pem" <<<"$OUT"

# srt's fallback: no parentProxy in the policy, the proxy variables exguardian was started with
# name it (HTTP_PROXY without a scheme, as curl and srt read it; NO_PROXY sends other.test direct).
before_env=$(grep -c . "$mitm_log")
echo '{"network": {"allowedDomains": ["allowed.test", "other.test"]}}' > "$T/envp.json"
HTTP_PROXY=127.0.0.1:18080 NO_PROXY=other.test run sbx -v --policy "$T/envp.json" -- bash -c \
    "$C http://allowed.test/env; $C -p http://allowed.test/env2; $C http://other.test/env3"
check "HTTP_PROXY from exguardian's environment: all three answered" \
    test "$(grep -c 'hello from 203.0.113.10' <<<"$OUT")" = 3
check "... allowed.test through that proxy (CONNECT), other.test direct (NO_PROXY)" \
    test "$(tail -n +$((before_env + 1)) "$mitm_log" | sort | uniq -c | awk '{$1=$1; print}')" = \
         "2 tcp:127.0.0.1:18080 CONNECT allowed.test:80 auth=-"
check "-v says where the parent proxy came from" \
    grep -q "network.parentProxy.http: from HTTP_PROXY: http://127.0.0.1:18080" <<<"$ERR"
HTTPS_PROXY=https://localhost:18444 run sbx --dry-run --policy "$T/envp.json" -- true
check "--dry-run says HTTPS_PROXY is taken for network.parentProxy.https" \
    grep -q "network.parentProxy.https: from HTTPS_PROXY: https://localhost:18444 (srt's fallback" <<<"$OUT"
# A parentProxy of only caFile: the proxy from the environment (HTTPS_PROXY), its CA from the policy.
echo "{\"network\": {\"allowedDomains\": [\"allowed.test\"], \"parentProxy\": {\"caFile\": \"$T/pca.pem\"}}}" > "$T/ca-only.json"
before_tls=$(grep -c . "$tls_log")
HTTPS_PROXY=https://localhost:18443 run sbx -v --policy "$T/ca-only.json" -- $C -p http://allowed.test/ca-only
check "parentProxy {caFile} with HTTPS_PROXY: CONNECT answered through the https:// proxy it verifies" \
    bash -c 'grep -q "hello from 203.0.113.10" <<<"$1" &&
             test "$(tail -n +$(($2 + 1)) "$3" | grep -c "^tcp:127.0.0.1:18443 CONNECT allowed.test:80 ")" = 1' \
    _ "$OUT" "$before_tls" "$tls_log"
check "-v says where each field came from (caFile: the policy; https: HTTPS_PROXY)" bash -c '
    grep -q "ca-only.json:[0-9:]*: network.parentProxy: no proxy URL of its own: .*caFile $2 trusted" <<<"$1" &&
    grep -q "network.parentProxy.https: from HTTPS_PROXY: https://localhost:18443 (srt.s fallback" <<<"$1"' _ "$ERR" "$T/pca.pem"
run sbx --dry-run --policy "$T/ca-only.json" -- true
check "parentProxy {caFile} with no proxy in the environment: refused, naming the key and why" bash -c '
    test "$1" != 0 && grep -q "ca-only.json:[0-9:]*: network.parentProxy: names no proxy: .*HTTP_PROXY" <<<"$2"' \
    _ "$STATUS" "$ERR"

run sbx --dry-run --policy "$T/srt.json" -- true
for k in network.parentProxy network.stripResponseHeaders network.requireHostMatch network.deniedDomainReasons \
         network.deniedResolvedAddresses no-admin; do
    check "--dry-run says what $k does" grep -q "$k: " <<<"$OUT"
done
check "--dry-run does not show the parent proxy's password" bash -c "! grep -q '$PW' <<<\"\$1\"" _ "$OUT"

finish
