#!/usr/bin/env bash
# The real secret must not come back through the secret's own host (issue 12.5). The HTTPS
# echo upstream of the test world (tests/integration/egress_world_secrets.sh, paths /mis/...)
# misbehaves with the Authorization header it received: compresses although the proxy asked
# for identity, puts the value in the reason phrase, a 1xx line, a trailer, a header name,
# JSON-escapes it (\/ as PHP does, \uXXXX), percent-encodes it (both hex cases), HTML-escapes
# it, hex- and base64-encodes it (three alignments, url-safe, line-wrapped), spreads it over
# one-byte chunks written one by one; and (issue 39.8) base32 and base32hex (the five
# alignments, padded or not, either case), hex with ':' '-' ' ' between bytes, UTF-16 and
# UTF-32 of either byte order, those forms again in one-byte chunks. From inside, a raw TLS client reads every byte of each
# answer; the test greps those bytes for the value and each encoding of it, checks the
# placeholder is where the value was, that an undecodable coding is refused (502, audit) and
# that the audit says what was masked. Then a secret limited to one request header (issue 45):
# put in that header only; its placeholder elsewhere on its own host (the body of an agent's
# next turn, carrying a tool's `env` output back to the model) goes on as the placeholder,
# audited; to a host it is not meant for, refused with a message that says what is true.
source "$(dirname "$0")/lib.sh"

new_workspace
require_sandbox || finish

WD=$(dirname "$EGW_LOG")
SLOG=$WD/secrets.log
# '/', '+', '=' and '~': what JSON, percent and HTML escaping touch.
VALUE="exg/real+$(rnd)/$(rnd)=~"
NAMEVAL="exgname-$(rnd)$(rnd)"   # header-name safe (a token), for the header-name case
KEYVAL="exgkey-$(rnd)$(rnd)"
OTHERVAL="exgother-$(rnd)$(rnd)"
export API_TOKEN=$VALUE NAME_TOKEN=$NAMEVAL KEY_TOKEN=$KEYVAL OTHER_TOKEN=$OTHERVAL
audit=$T/audit.jsonl
POL=$T/policy.json
cat > "$POL" <<'JSON'
{
  "network": {"allowedDomains": ["api.secret.test", "other.secret.test"]},
  "secrets": [{"name": "API_TOKEN", "from": "env:API_TOKEN", "hosts": ["api.secret.test"]},
              {"name": "NAME_TOKEN", "from": "env:NAME_TOKEN", "hosts": ["api.secret.test"]},
              {"name": "KEY_TOKEN", "from": "env:KEY_TOKEN", "hosts": ["api.secret.test"], "headers": ["x-api-key"]},
              {"name": "OTHER_TOKEN", "from": "env:OTHER_TOKEN", "hosts": ["other.secret.test"]}]
}
JSON
pol=(--policy "$POL" --audit-log "$audit")

# A raw client: CONNECT through the sandbox's proxy, TLS (trusting the sandbox's CA as every
# client inside does), one request per path, every byte of the answer to stdout.
cat > "$WS/rawget.py" <<'PY'
import os, socket, ssl, sys, urllib.parse
p = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
method, token, paths = sys.argv[1], os.environ[sys.argv[2]], sys.argv[3:]
for path in paths:
    s = socket.create_connection((p.hostname, p.port), timeout=20)
    s.sendall(b"CONNECT api.secret.test:443 HTTP/1.1\r\nHost: api.secret.test:443\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    assert head.startswith(b"HTTP/1.1 200"), head
    t = ssl.create_default_context().wrap_socket(s, server_hostname="api.secret.test")
    t.sendall(("%s %s HTTP/1.1\r\nHost: api.secret.test\r\nAuthorization: Bearer %s\r\n"
               "Connection: close\r\n\r\n" % (method, path, token)).encode())
    out = b""
    while True:
        try:
            b = t.recv(65536)
        except (ssl.SSLError, OSError):
            break
        if not b:
            break
        out += b
    sys.stdout.buffer.write(b"=== " + path.encode() + b"\n" + out + b"\n")
    with open("raw.bin", "ab") as f:  # every byte (NULs of UTF-16/32 too, which $OUT cannot hold)
        f.write(b"=== " + path.encode() + b"\n" + out + b"\n")
PY

# leaks FILE VALUE...: prints every form of a value found in FILE (the forms a client could
# decode back), also inside gzip streams and with line breaks removed; nothing when clean.
cat > "$T/leaks.py" <<'PY'
import base64, re, sys, zlib
data = open(sys.argv[1], "rb").read()
texts = [data, re.sub(rb"\r?\n", b"", data)]
for m in re.finditer(rb"\x1f\x8b\x08", data):
    try:
        texts.append(zlib.decompressobj(31).decompress(data[m.start():]))
    except zlib.error:
        pass
for v in sys.argv[2:]:
    vb = v.encode()
    forms = {"plain": vb, "json \\/": vb.replace(b"/", b"\\/"),
             "json \\u": "".join("\\u%04x" % c for c in vb).encode(),
             "json \\U": "".join("\\u%04X" % c for c in vb).encode(),
             "percent": "".join("%%%02X" % c for c in vb).encode(),
             "percent lower": "".join("%%%02x" % c for c in vb).encode(),
             "percent reserved": re.sub(rb"[^A-Za-z0-9_.~-]", lambda m: b"%%%02X" % m.group()[0], vb),
             "html": "".join("&#%d;" % c for c in vb).encode(),
             "hex": vb.hex().encode(), "HEX": vb.hex().upper().encode()}
    for a in range(3):
        enc = base64.b64encode(b"\0" * a + vb + b"\0\0")
        core = enc[(8 * a + 5) // 6:8 * (a + len(vb)) // 6]
        forms["base64 %d" % a] = core
        forms["base64url %d" % a] = core.replace(b"+", b"-").replace(b"/", b"_")
    for a in range(5):  # the characters only the value's bits decide, at each alignment
        for name, enc32 in (("base32", base64.b32encode), ("base32hex", base64.b32hexencode)):
            core = enc32(b"\0" * a + vb)[(8 * a + 4) // 5:8 * (a + len(vb)) // 5]
            forms["%s %d" % (name, a)] = core
            forms["%s %d lower" % (name, a)] = core.lower()
    for sep in ":- ":
        forms["hex '%s'" % sep] = vb.hex(sep).encode()
        forms["HEX '%s'" % sep] = vb.hex(sep).upper().encode()
    for enc in ("utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"):
        forms[enc] = v.encode(enc)
    for name, f in forms.items():
        for t in texts:
            if f in t:
                print("%s: %s" % (v[:12], name))
                break
PY
leak_free() {  # FILE VALUE...
    local found
    found=$(python3 "$T/leaks.py" "$@")
    [ -z "$found" ] || { note "leaked: $found"; return 1; }
}
# section NAME: the raw bytes of one answer in $T/raw.
section() { awk -v p="=== /mis/$1" '$0 == p {on = 1; next} /^=== / {on = 0} on' "$T/raw"; }
masked_in_audit() {  # FORM WHERE
    python3 - "$audit" "$1" "$2" <<'PY'
import json, sys
path, form, where = sys.argv[1:]
ms = [m for l in open(path) if '"intercepted"' in l for m in json.loads(l).get("masked", [])]
assert any(m["secret"] == "API_TOKEN" and m["form"] == form and m["where"] == where for m in ms), ms
PY
}

PATHS=(gzip deflate gzip-chunked br reason 1xx trailer json-php json-u percent-upper percent-lower html hex
       base64-0 base64-1 base64-2 base64url base64-wrapped split
       base32-0 base32-1 base32-2 base32-3 base32-4 base32-lower base32hex-0 base32hex-3-lower
       hex-colon hex-dash-upper hex-space utf-16le utf-16be utf-32le utf-32be split-forms)
rm -f "$WS/raw.bin"
run sbx "${pol[@]}" -- python3 rawget.py GET API_TOKEN "${PATHS[@]/#//mis/}"
printf '%s\n' "$OUT" > "$T/raw"
cp "$WS/raw.bin" "$T/raw.bin"
check "the raw client read all ${#PATHS[@]} answers (status $STATUS)" \
    test "$(grep -c '^=== /mis/' "$T/raw")" = "${#PATHS[@]}"
check "the upstream received the real value (so it had something to echo)" \
    grep -qF "[\"Authorization\", \"Bearer $VALUE\"]" "$SLOG"
check "no answer holds the value in any form (plain, JSON, percent, HTML, hex, base64, base32, UTF-16/32, in gzip)" \
    leak_free "$T/raw.bin" "$VALUE"
check "(the same on the text as the test read it)" leak_free "$T/raw" "$VALUE"
last_output_lacks "$VALUE" "the value is not in the raw bytes as is"
for p in gzip deflate gzip-chunked reason 1xx json-php json-u percent-upper percent-lower html split; do
    check "/mis/$p: the placeholder where the value was" grep -q "exg_ph_API_TOKEN_" <<<"$(section "$p")"
done
check "gzip despite identity: decoded, sent plain (no Content-Encoding)" \
    bash -c "! grep -qi '^content-encoding' <<<\"\$1\" && grep -q 'Bearer exg_ph_API_TOKEN_' <<<\"\$1\"" _ "$(section gzip)"
check "a chunked gzip body (7-byte chunks) arrives decoded: 50 masked echoes" \
    test "$(grep -o 'Bearer exg_ph_API_TOKEN_' <<<"$(section gzip-chunked)" | wc -l)" = 50
check "br (cannot be decoded): 502, X-ExGuardian-Refused: response encoding" \
    bash -c "grep -q '^HTTP/1.1 502' <<<\"\$1\" && grep -qi '^X-ExGuardian-Refused: response encoding' <<<\"\$1\"" _ \
    "$(section br)"
check "the reason phrase is masked" grep -qE "^HTTP/1.1 200 Bearer exg_ph_API_TOKEN_" <<<"$(section reason)"
check "the 103's reason phrase is masked (its headers are not passed on)" \
    grep -qE "^HTTP/1.1 103 Bearer exg_ph_API_TOKEN_" <<<"$(section 1xx)"
check "the trailer and chunk extensions are dropped (the body re-framed)" \
    bash -c "grep -q '^ok' <<<\"\$1\" && ! grep -qiE 'X-Echo|ext=' <<<\"\$1\"" _ "$(section trailer)"
check "base64 forms are covered with '*' (the neighbouring characters too)" \
    bash -c "for p in base64-0 base64-1 base64-2 base64url base64-wrapped; do grep -q '\*\*\*\*' <<<\"\$(awk -v p=\"=== /mis/\$p\" '\$0 == p {on = 1; next} /^=== / {on = 0} on' '$T/raw')\" || exit 1; done"
check "one-byte chunks, each written on its own: masked" grep -q '"Bearer exg_ph_API_TOKEN_' <<<"$(section split)"
check "base32 forms are covered with '*' (the neighbouring characters too)" \
    bash -c "for p in base32-0 base32-1 base32-2 base32-3 base32-4 base32-lower base32hex-0 base32hex-3-lower; do grep -q '\*\*\*\*\*\*' <<<\"\$(awk -v p=\"=== /mis/\$p\" '\$0 == p {on = 1; next} /^=== / {on = 0} on' '$T/raw')\" || exit 1; done"
check "hex with separators: the placeholder's hex, with the same separator" bash -c '
    ph=$(printf "Bearer exg_ph_API_TOKEN_" | od -An -tx1 | tr -d " \n")
    grep -q "$(sed "s/../&:/g; s/:$//" <<<"$ph")" <<<"$1" && grep -q "$(sed "s/../&-/g; s/-$//" <<<"$ph")" <<<"$2" &&
    grep -q "$(sed "s/../& /g; s/ $//" <<<"$ph")" <<<"$3"' _ "$(section hex-colon)" "$(section hex-dash-upper)" "$(section hex-space)"
check "UTF-16/32: the placeholder in the same encoding where the value was" python3 -c "
import sys
data = open('$T/raw.bin', 'rb').read()
for enc in ('utf-16-le', 'utf-16-be', 'utf-32-le', 'utf-32-be'):
    assert ('value=Bearer exg_ph_API_TOKEN_').encode(enc) in data, enc"
# (base64url is named so when the value's own characters differ between the alphabets)
for f in "json body" "percent body" "html body" "hex body" "base64 body" "plain reason" \
         "plain 1xx reason" "base32 body" "base32hex body" "utf-16le body" "utf-16be body" "utf-32le body" \
         "utf-32be body"; do
    check "audit: masked $f" masked_in_audit "${f%% *}" "${f#* }"
done
check "audit: the br answer refused (response encoding), never the value" python3 -c "
import json, sys
text = open('$audit').read()
assert sys.argv[1] not in text
ls = [json.loads(l) for l in text.splitlines()]
assert any(l.get('host') == 'api.secret.test' and l.get('decision') == 'refused' and l.get('rule') == 'response encoding'
           and 'br' in l.get('reason', '') for l in ls), ls" "$VALUE"

# The value in a header name (a token-safe value), HEAD, and keep-alive with several answers.
run sbx "${pol[@]}" -- python3 rawget.py GET NAME_TOKEN /mis/header-name
printf '%s\n' "$OUT" > "$T/raw-name"
check "a header name holding the value: masked" \
    bash -c "grep -qi '^X-Echo-exg_ph_NAME_TOKEN_' '$T/raw-name' && ! python3 '$T/leaks.py' '$T/raw-name' '$NAMEVAL' | grep -q ."
run sbx "${pol[@]}" -- python3 rawget.py HEAD API_TOKEN /head
printf '%s\n' "$OUT" > "$T/raw-head"
check "HEAD: the header echoing the value is masked" grep -qi '^X-Echo: Bearer exg_ph_API_TOKEN_' "$T/raw-head"
check "HEAD: no form of the value" leak_free "$T/raw-head" "$VALUE"
run sbx "${pol[@]}" -- bash -c 'curl -sS -m 20 -i --raw -H "Authorization: Bearer $API_TOKEN" \
    https://api.secret.test/mis/json-php https://api.secret.test/mis/gzip https://api.secret.test/mis/split \
    https://api.secret.test/mis/base64-1 -w "connects=%{num_connects}\n"'
printf '%s\n' "$OUT" > "$T/raw-ka"
check "keep-alive: four misbehaving answers on one connection ($(grep -o 'connects=[0-9]*' "$T/raw-ka" | tr '\n' ' '))" \
    test "$(grep -c 'connects=1' "$T/raw-ka")" = 1
check "keep-alive: every answer masked, no form of the value" leak_free "$T/raw-ka" "$VALUE"
check "keep-alive: three placeholders and one covered base64 span" \
    bash -c "test \$(grep -o 'exg_ph_API_TOKEN_' '$T/raw-ka' | wc -l) -ge 3 && grep -q '\*\*\*\*' '$T/raw-ka'"

# ---- a secret limited to one request header (issue 45) ------------------------------------------
# An agent's two turns on one kept-alive connection, as Claude Code makes them: the key in
# x-api-key each time; the second turn's body carries a tool's output back to the model, here
# `env`, so the key's placeholder. Then the placeholder in the URL and in another header, also to
# its own host; then to other.secret.test (allowed, intercepted for its own secret), where
# KEY_TOKEN is not meant to go: in a body and in x-api-key.
cat > "$WS/turns.py" <<'PY'
import json, os, subprocess, requests
key = os.environ["KEY_TOKEN"]
print("PLACEHOLDER", key)
s = requests.Session()
s.headers["x-api-key"] = key
msgs = [{"role": "user", "content": "run env"}]
r1 = s.post("https://api.secret.test/v1/messages?turn=1", json={"messages": msgs}, timeout=15)
# (OTHER_TOKEN left out: its placeholder is meant for other.secret.test and would be refused
# here, as below for KEY_TOKEN's on its way there.)
env = subprocess.run(["env"], capture_output=True, text=True,
                     env={k: v for k, v in os.environ.items() if k != "OTHER_TOKEN"}).stdout
msgs.append({"role": "user", "content": [{"type": "tool_result", "content": env}]})
r2 = s.post("https://api.secret.test/v1/messages?turn=2", json={"messages": msgs}, timeout=15)
r3 = s.get("https://api.secret.test/key-url?k=" + key, headers={"Authorization": "Bearer " + key}, timeout=15)
print("TURNS", r1.status_code, r2.status_code, r3.status_code)
print("ECHO2", r2.text)
for what, kw in (("body", {"data": "k=" + key}), ("header", {"headers": {"x-api-key": key}})):
    r = requests.post("https://other.secret.test/key-elsewhere-" + what, timeout=15, **kw)
    print("ELSEWHERE", what, r.status_code, r.headers.get("X-ExGuardian-Refused"), json.dumps(r.text))
PY
run sbx "${pol[@]}" -- python3 turns.py
grep -q '^TURNS 200 200 200$' <<<"$OUT" || { show_last; grep -F /v1/messages "$SLOG" | cut -c1-600 | sed 's/^/#      upstream: /'; }
KEYPH=$(sed -n 's/^PLACEHOLDER //p' <<<"$OUT")
check "inside, KEY_TOKEN is a placeholder ($KEYPH)" grep -qE '^exg_ph_KEY_TOKEN_[0-9a-zA-Z]{16,}$' <<<"$KEYPH"
check "both turns and the request with the placeholder in its URL and Authorization were answered" \
    grep -qx 'TURNS 200 200 200' <<<"$OUT"
turn1=$(grep -F '/v1/messages?turn=1' "$SLOG")
turn2=$(grep -F '/v1/messages?turn=2' "$SLOG")
check "turn 1: the upstream received the real key in x-api-key" grep -qiF "[\"x-api-key\", \"$KEYVAL\"]" <<<"$turn1"
check "turn 2: the upstream received the real key in x-api-key" grep -qiF "[\"x-api-key\", \"$KEYVAL\"]" <<<"$turn2"
check "turn 2: the body arrived with the tool's env output, the placeholder unchanged in it" python3 -c "
import json, sys
rec = json.loads(sys.stdin.read())
body = json.loads(rec['body'])
env = body['messages'][1]['content'][0]['content']
assert 'KEY_TOKEN=$KEYPH\n' in env, env
assert '$KEYVAL' not in rec['body']" <<<"$turn2"
check "the echo of turn 2 reached the sandbox, x-api-key masked back to the placeholder" \
    grep -qiF "[\"x-api-key\", \"$KEYPH\"]" <<<"$(sed -n 's/^ECHO2 //p' <<<"$OUT")"
keyurl=$(grep -F '/key-url?k=' "$SLOG")
check "to its own host in the URL and in Authorization: the placeholder arrives as it is" \
    bash -c 'grep -qF "/key-url?k=$2" <<<"$1" && grep -qF "[\"Authorization\", \"Bearer $2\"]" <<<"$1"' _ "$keyurl" "$KEYPH"
check "the real key went nowhere but x-api-key" python3 -c "
import json, sys
for l in open('$SLOG'):
    rec = json.loads(l)
    if '$KEYVAL' in l:
        assert [k for k, v in rec['headers'] if '$KEYVAL' in v] and all(
            k.lower() == 'x-api-key' for k, v in rec['headers'] if '$KEYVAL' in v), l
        assert '$KEYVAL' not in rec['body'] and '$KEYVAL' not in rec['path'], l"
check "audit: placeholder_passed for KEY_TOKEN to api.secret.test in the body, the URL and Authorization" python3 -c "
import json
ls = [json.loads(l) for l in open('$audit') if '\"placeholder_passed\"' in l]
w = {l['where'] for l in ls if l.get('secret') == 'KEY_TOKEN' and l.get('host') == 'api.secret.test'
     and l.get('secret_headers') == ['x-api-key']}
assert {'body', 'url', 'header Authorization'} <= w, ls
assert not [l for l in ls if l.get('where') == 'header x-api-key' and l.get('secret') == 'KEY_TOKEN'], ls
assert not [l for l in open('$audit') if '\"exfiltration\"' in l and 'api.secret.test' in l]"
# To a host it is not meant for: refused, the message true (which secret, where, which host,
# which hosts it is meant for), nothing sent.
check "to other.secret.test in a body: 403 exfiltration, saying which secret goes where" grep -qxF \
    'ELSEWHERE body 403 exfiltration "exguardian: the placeholder of secret KEY_TOKEN (in the body) was refused on its way to other.secret.test: it is meant only for api.secret.test (header x-api-key)\n"' \
    <<<"$OUT"
check "to other.secret.test in x-api-key: 403 exfiltration, saying so" grep -qxF \
    'ELSEWHERE header 403 exfiltration "exguardian: the placeholder of secret KEY_TOKEN (in the header x-api-key) was refused on its way to other.secret.test: it is meant only for api.secret.test (header x-api-key)\n"' \
    <<<"$OUT"
check "no placeholder reached other.secret.test (of the body's request, at most its head did)" \
    bash -c "! grep -F key-elsewhere '$SLOG' | grep -q exg_ph_"
check "audit: KEY_TOKEN's exfiltration to other.secret.test in the body and x-api-key" python3 -c "
import json
ls = [json.loads(l) for l in open('$audit') if '\"exfiltration\"' in l]
w = {l['where'] for l in ls if l.get('secret') == 'KEY_TOKEN' and l.get('host') == 'other.secret.test'}
assert {'body', 'header x-api-key'} <= w, ls"
last_output_lacks "$KEYVAL" "the limited secret's value is not in what the sandbox read"

# ---- request rules and srt's switches on a terminated host (issue 18) --------------------------
cat > "$T/rules.json" <<'JSON'
{
  "network": {"allowedDomains": ["api.secret.test", "plain.test"],
              "rules": [{"host": "api.secret.test", "methods": ["GET"], "paths": ["/repos/"]},
                        {"host": "plain.test", "readOnly": true}],
              "stripResponseHeaders": ["content_type"], "requireHostMatch": true,
              "tlsTerminate": {"maxTunnels": 1}},
  "secrets": [{"name": "API_TOKEN", "from": "env:API_TOKEN", "hosts": ["api.secret.test"]}]
}
JSON
# hold.py: one terminated connection kept open while curl tries a second (maxTunnels 1); then a
# TLS server name naming another host than the CONNECT (requireHostMatch).
cat > "$WS/hold.py" <<'PY'
import os, socket, ssl, subprocess, urllib.parse
p = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
def tunnel(sni, verify=True):
    s = socket.create_connection((p.hostname, p.port), timeout=20)
    s.sendall(b"CONNECT api.secret.test:443 HTTP/1.1\r\nHost: api.secret.test:443\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    assert head.startswith(b"HTTP/1.1 200"), head
    ctx = ssl.create_default_context()
    if not verify:
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    return ctx.wrap_socket(s, server_hostname=sni)
held = tunnel("api.secret.test")
print("== second", flush=True)
subprocess.run(["curl", "-sS", "-m", "15", "-i", "https://api.secret.test/repos/held"])
held.close()
t = tunnel("other.secret.test", verify=False)
t.sendall(b"GET /repos/sni HTTP/1.1\r\nHost: api.secret.test\r\nConnection: close\r\n\r\n")
print("== sni", t.recv(4096).split(b"\r\n")[0].decode(), flush=True)
PY
run sbx --policy "$T/rules.json" --audit-log "$audit" -- bash -c 'C="curl -sS -m 15 -i"; echo "== get";
    $C https://api.secret.test/repos/a; echo "== post"; $C -d x https://api.secret.test/repos/a;
    echo "== user"; $C https://api.secret.test/user; echo "== plain"; $C https://plain.test/ro;
    $C -X PUT https://plain.test/ro; python3 hold.py'
section() { awk -v s="== $1" '$0 == s || index($0, s " ") == 1 {on = 1; print; next} /^== / {on = 0} on' <<<"$OUT"; }
check "rule on a terminated host: GET /repos/a answered" grep -q '"path": "/repos/a"' <<<"$(section get)"
check "stripResponseHeaders on a terminated host: no Content-Type" bash -c '! grep -qi "^Content-Type" <<<"$1"' _ "$(section get)"
check "rule on a terminated host: POST refused naming the rule" \
    grep -qi '^X-ExGuardian-Refused: network.rules\[0\] api.secret.test' <<<"$(section post)"
check "rule on a terminated host: /user refused" grep -q '^HTTP/1.1 403' <<<"$(section user)"
check "a host without a secret but under a rule is terminated: GET answered, PUT refused naming the rule" bash -c '
    grep -q "\"path\": \"/ro\"" <<<"$1" && grep -qi "^X-ExGuardian-Refused: network.rules\[1\] plain.test" <<<"$1"' _ "$(section plain)"
check "maxTunnels 1: a second terminated tunnel is answered 503 too-many-tunnels" \
    bash -c 'grep -q "^HTTP/1.1 503" <<<"$1" && grep -qi "^X-Proxy-Error: too-many-tunnels" <<<"$1"' _ "$(section second)"
check "requireHostMatch: a TLS server name of another host gets 421" grep -q '^== sni HTTP/1.1 421' <<<"$OUT"
check "audit: the rule's and maxTunnels' refusals" python3 -c "
import json
ls = [json.loads(l) for l in open('$audit') if '\"egress\"' in l and '\"refused\"' in l]
rules = {l['rule'] for l in ls}
assert {'network.rules[0] api.secret.test', 'tlsTerminate.maxTunnels 1', 'TLS server name mismatch'} <= rules, rules
assert any('POST /repos/a' in l['reason'] for l in ls), ls"
check "refused requests never reached the upstream" bash -c "! grep -qE '\"path\": \"/(user|repos/held|repos/sni)\"|\"method\": \"POST\", \"path\": \"/repos/a\"' '$SLOG'"

finish
