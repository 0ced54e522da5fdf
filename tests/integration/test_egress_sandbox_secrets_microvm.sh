#!/usr/bin/env bash
# Egress from a microVM guest (`--layer microvm`), in the egress test world with its HTTPS
# echo upstreams (run.sh builds both: egress_world.sh, egress_world_secrets.sh). The guest has
# no network device: its 127.0.0.1:3128 and :1080 are carried over a virtio-serial port to the
# supervisor's proxy (src/microvm/egress_mux.hpp). From inside one guest, unchanged tools
# reach an allowed host over plain HTTP, CONNECT and SOCKS5, a 50 MiB download through the
# channel's flow control arrives intact (as root), a denied host and the metadata address are refused
# (403, nothing reaches their servers, the audit log says why), a secret is injected on its
# way to its host while the guest holds and reads back only the placeholder, and nothing
# leaves any other way (no NIC, no direct TCP). One guest boot (TCG: 5-20 s); the full
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
rnd() { od -An -N8 -tx1 /dev/urandom | tr -d ' \n'; }
VALUE="exgreal-$(rnd)$(rnd)"
export API_TOKEN=$VALUE
audit=$T/audit.jsonl
cat > "$T/policy.json" <<'JSON'
{
  "network": {"allowedDomains": ["allowed.test", "meta.test", "denied.test", "api.secret.test"],
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
echo "DIRECT: $(python3 -c "
import socket
s = socket.socket(); s.settimeout(5)
try: s.connect((\"203.0.113.10\", 80)); print(\"CONNECTED\")
except OSError as e: print(\"refused\", e.errno)")"
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
check "no direct TCP out of the guest ($(line DIRECT))" grep -q "^refused" <<<"$(line DIRECT)"
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
check "the value is not in the audit log" bash -c "! grep -qF '$VALUE' '$audit'"
finish
