#!/usr/bin/env bash
# Egress from a microVM guest (`--layer microvm`), in the egress test world with its HTTPS
# echo upstreams (run.sh builds both: egress_world.sh, egress_world_secrets.sh). The guest has
# no network device: its 127.0.0.1:3128 and :1080 are carried over a virtio-serial port to the
# supervisor's proxy (src/microvm/guest/egress_mux.hpp). From inside one guest, unchanged tools
# reach an allowed host over plain HTTP, CONNECT and SOCKS5, a 50 MiB download through the
# channel's flow control arrives intact (as root), a denied host and the metadata address are refused
# (403, nothing reaches their servers, the audit log says why), a secret is injected on its
# way to its host while the guest holds and reads back only the placeholder, and nothing
# leaves any other way (no NIC). Transparent egress is carried into the guest too: its
# resolver (127.0.0.53) and every TCP connection out reach the proxy over the same port, so
# `curl --noproxy '*'` reaches an allowed name (an exact one from the guest's /etc/hosts, a
# wildcard one from the resolver), a denied name does not resolve, the metadata
# address, a private address and a literal without a CIDR rule are closed, an SNI of another
# name on an allowed name's address is refused, UDP other than the resolver's fails with
# EPERM, each with its audit line. One guest boot (TCG: 5-20 s); the full
# layer-parametrised egress script runs on microvm by hand:
#   bash tests/integration/run.sh root tests/integration/test_egress_sandbox.sh build/exguardian build microvm
# Skipped (77) without qemu-system-x86_64 or the guest image.
EXG_LAYER=microvm
source "$(dirname "$0")/lib.sh"

image=${EXG_BUILD_DIR:-}/microvm
if ! command -v qemu-system-x86_64 >/dev/null || [ ! -s "$image/vmlinux" ]; then
    echo "skip: the microvm layer needs qemu-system-x86_64 and the guest image in $image"; exit 77
fi
export EXG_MICROVM_IMAGE_DIR=$image

new_workspace
WD=$(dirname "$EGW_LOG")
SLOG=$WD/secrets.log
VALUE="exgreal-$(rnd)$(rnd)"
export API_TOKEN=$VALUE
audit=$T/audit.jsonl
cat > "$T/policy.json" <<'JSON'
{
  "network": {"allowedDomains": ["allowed.test", "meta.test", "denied.test", "api.secret.test", "plain.test", "*.wild.test"],
              "deniedDomains": ["denied.test"]},
  "filesystem": {"denyRead": [], "allowWrite": [], "denyWrite": []},
  "secrets": [{"name": "API_TOKEN", "from": "env:API_TOKEN", "hosts": ["api.secret.test"]}]
}
JSON
before=$(grep -c . "$EGW_LOG" 2>/dev/null || true)

# Everything inside one guest; each line of output is LABEL: what it saw.
# The 50 MiB download (seconds of TCG) once, as root: the unit test covers the windows too.
BIG=0; [ "$EXG_AS" = root ] && BIG=1
run sbx --policy "$T/policy.json" --audit-log "$audit" --env BIG=$BIG -- bash -c '
C="curl -sS -m 30"
echo "PH: $API_TOKEN"
echo "HTTP: $($C http://allowed.test/)"
echo "CONNECT: $($C -p http://allowed.test/)"
echo "SOCKS: $($C --socks5-hostname 127.0.0.1:1080 http://allowed.test/)"
[ "$BIG" = 1 ] && echo "BIG: $($C -p http://allowed.test/big | sha256sum)"
echo "DENIED: $($C -i http://denied.test/ | head -1)"
echo "META-IP: $($C --noproxy "" -i http://169.254.169.254/latest/meta-data/ | head -1)"
echo "META-NAME: $($C -i http://meta.test/ | grep -i "^x-exguardian-refused" | tr -d "\r")"
echo "META-SOCKS: $($C --socks5 127.0.0.1:1080 http://169.254.169.254/ 2>&1 >/dev/null)"
echo "SECRET: $($C -H "Authorization: Bearer $API_TOKEN" https://api.secret.test/microvm-bearer)"
echo "RESOLV: $(grep "^nameserver" /etc/resolv.conf | tr "\n" " ")"
tp() { curl -sS -m 30 --noproxy "*" "$@" 2>&1; }
echo "TP-ALLOWED: $(tp http://allowed.test/tp-microvm)"
echo "TP-WILD: $(tp http://tp.wild.test/tp-microvm-wild)"
echo "TP-DENIED: $(tp http://denied.test/)"
echo "TP-META: $(tp http://169.254.169.254/latest/meta-data/)"
echo "TP-PRIVATE: $(tp http://10.0.0.5/)"
python3 - <<"PY"
import errno, socket, ssl
ctx = ssl.create_default_context()
def tls(label, name, sni):
    try:
        a = socket.gethostbyname(name)
        with socket.create_connection((a, 443), timeout=20) as s:
            with ctx.wrap_socket(s, server_hostname=sni) as t:
                t.sendall(b"GET /tp-microvm-py HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % sni.encode())
                print(label + ": OK", a, t.recv(200).split(b"\r\n")[0].decode())
    except Exception as e:
        print(label + ": REFUSED", type(e).__name__, e)
tls("TP-PY-ALLOWED", "plain.test", "plain.test")
tls("TP-PY-MISMATCH", "plain.test", "api.secret.test")
try:
    socket.gethostbyname("denied.test"); print("TP-PY-DENIED: RESOLVED")
except OSError as e:
    print("TP-PY-DENIED: REFUSED", type(e).__name__)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try: u.sendto(b"x", ("203.0.113.10", 53)); print("UDP: SENT")
except OSError as e: print("UDP: refused", errno.errorcode.get(e.errno))
s = socket.socket(); s.settimeout(20)
try:
    s.connect(("203.0.113.10", 80)); s.sendall(b"GET /direct HTTP/1.0\r\n\r\n")
    print("DIRECT:", s.recv(100) or "closed")
except OSError as e: print("DIRECT: refused", e)
PY
echo "IFACES: $(ls /sys/class/net | tr "\n" " ")"'
line() { sed -n "s/^$1: //p" <<<"$OUT" | head -1; }
if [ "$STATUS" -eq 0 ] && grep -q '^IFACES:' <<<"$OUT"; then ok "the guest ran the egress checks"
else fail "the guest's egress checks did not run (status $STATUS)"; show_last; finish; fi

check "HTTP proxy (absolute form) from the guest reaches allowed.test" grep -q "hello from 203.0.113.10" <<<"$(line HTTP)"
check "CONNECT from the guest reaches allowed.test" grep -q "hello from 203.0.113.10" <<<"$(line CONNECT)"
check "SOCKS5 from the guest reaches allowed.test" grep -q "hello from 203.0.113.10" <<<"$(line SOCKS)"
if [ "$BIG" = 1 ]; then
    check "50 MiB through CONNECT and the channel's flow control arrive intact" grep -q "$EGW_BIG_SHA" <<<"$(line BIG)"
fi
check "denied.test refused with 403" grep -q "^HTTP/1.1 403" <<<"$(line DENIED)"
check "169.254.169.254 refused with 403" grep -q "^HTTP/1.1 403" <<<"$(line META-IP)"
check "meta.test refused because of its link-local address" grep -qi "link-local" <<<"$(line META-NAME)"
# (SOCKS5 reply 2: connection not allowed by ruleset)
check "SOCKS5 to the metadata address refused ($(line META-SOCKS))" grep -q "^curl: (97) .*169.254.169.254. (2)" <<<"$(line META-SOCKS)"
check "the guest's resolv.conf names the resolver ($(line RESOLV))" test "$(line RESOLV)" = "nameserver 127.0.0.53 "
check "transparent: curl --noproxy reaches an allowed name" grep -q "hello from 203.0.113.10" <<<"$(line TP-ALLOWED)"
check "transparent: a wildcard-allowed name, through the resolver, is reached ($(line TP-WILD))" grep -q "hello from 203.0.113.10" <<<"$(line TP-WILD)"
check "transparent: a denied name does not resolve ($(line TP-DENIED))" grep -q "^curl: (6)" <<<"$(line TP-DENIED)"
check "transparent: the metadata address is refused ($(line TP-META))" grep -qE "^curl: \((52|56)\)" <<<"$(line TP-META)"
check "transparent: a private address is refused ($(line TP-PRIVATE))" grep -qE "^curl: \((52|56)\)" <<<"$(line TP-PRIVATE)"
check "transparent: python socket+ssl reaches an allowed name ($(line TP-PY-ALLOWED))" \
    grep -qE "^OK 198\.18\.[0-9.]+ HTTP/1\.[01] 200" <<<"$(line TP-PY-ALLOWED)"
check "transparent: an SNI of another name on an allowed name's address is refused" grep -q "^REFUSED" <<<"$(line TP-PY-MISMATCH)"
check "transparent: python: a denied name does not resolve" grep -q "^REFUSED gaierror" <<<"$(line TP-PY-DENIED)"
check "transparent: UDP other than the resolver is refused ($(line UDP))" test "$(line UDP)" = "refused EPERM"
check "transparent: direct TCP to a literal without a CIDR rule is closed ($(line DIRECT))" \
    grep -qE "^(closed|refused .*Errno 104)" <<<"$(line DIRECT)"
check "transparent: the allowed request arrived" bash -c "tail -n +$((before + 1)) '$EGW_LOG' | grep -q '^203\.0\.113\.10 GET /tp-microvm host=allowed'"
check "transparent: the direct request never arrived" bash -c "! tail -n +$((before + 1)) '$EGW_LOG' | grep -q ' /direct '"
check "the guest's only interface is lo ($(line IFACES))" test "$(line IFACES)" = "lo "
check "the allowed requests arrived" bash -c "tail -n +$((before + 1)) '$EGW_LOG' | grep -q '^203\.0\.113\.10 GET / host=allowed'"
check "nothing arrived for denied.test" bash -c "! tail -n +$((before + 1)) '$EGW_LOG' | grep -qi 'host=denied'"
check "the metadata server never saw a request" bash -c "! grep -q '^169.254.169.254' '$EGW_LOG'"

# The secret: a placeholder inside, the value at its host only, masked on the way back.
check "the guest's variable holds a placeholder ($(line PH))" grep -qE '^exg_ph_API_TOKEN_[0-9a-zA-Z]{16,}$' <<<"$(line PH)"
check "the upstream's echo came back with the placeholder in place of the value" \
    grep -qF '["Authorization", "Bearer exg_ph_API_TOKEN_' <<<"$(line SECRET)"
last_output_lacks "$VALUE" "the value is nowhere in what the guest saw"
check "api.secret.test received Authorization: Bearer <value> (injected by the proxy)" \
    grep -qF "[\"Authorization\", \"Bearer $VALUE\"]" <<<"$(grep -F '"path": "/microvm-bearer"' "$SLOG")"

check "audit: allowed, denied and link-local decisions logged" python3 -c "
import json
lines = [json.loads(l) for l in open('$audit') if '\"egress\"' in l]
ok = [l for l in lines if l['decision'] == 'allowed']
no = [l for l in lines if l['decision'] == 'refused']
assert any(l['host'] == 'allowed.test' and l.get('bytes_down', 0) > 0 for l in ok), ok
assert any(l['host'] == 'denied.test' and 'deniedDomains' in l['rule'] for l in no), no
assert any('link-local' in l['rule'] for l in no), no
assert any(l['host'] == 'api.secret.test' for l in ok), ok
"
check "audit: the guest's queries and captured connections" audit_has "$audit" --answers-in 198.18. \
    '{"event": "dns", "host": "denied.test", "decision": "refused", "rcode": "NXDOMAIN"}' \
    '{"event": "dns", "host": "tp.wild.test", "decision": "allowed"}' \
    '{"protocol": "transparent", "host": "allowed.test", "port": 80, "decision": "allowed", "address": "203.0.113.10"}' \
    '{"protocol": "transparent", "host": "plain.test", "port": 443, "decision": "allowed", "address": "203.0.113.20"}' \
    '{"protocol": "transparent", "host": "169.254.169.254", "decision": "refused"}' \
    '{"protocol": "transparent", "host": "10.0.0.5", "decision": "refused"}' \
    '{"protocol": "transparent", "host": "203.0.113.10", "decision": "refused"}' \
    '{"protocol": "transparent", "host": "plain.test", "decision": "refused", "rule": "TLS server name mismatch"}'
check "transparent: the guest's lookups of the exact allowed names read its /etc/hosts, not the resolver" \
    no_dns_for "$audit" allowed.test plain.test
check "the value is not in the audit log" bash -c "! grep -qF '$VALUE' '$audit'"
finish
