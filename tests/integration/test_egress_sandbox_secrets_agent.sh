#!/usr/bin/env bash
# An agent CLI run whole in the sandbox with the shipped profile profiles/agents/claude.json
# (issue 45), an ordinary policy file: ANTHROPIC_API_KEY a secret for api.anthropic.com, put in
# x-api-key only; ~/.claude writable, its settings and hooks not. The agent is a stand-in, a real
# program (python) that does what Claude Code does on the wire: reads its key from the
# environment, sends a turn to https://api.anthropic.com/v1/messages (in the test world, the
# HTTPS echo of tests/integration/egress_world_secrets.sh, certificate from the world's CA),
# runs a tool (`env`), sends the tool's output back in the next turn's body, writes its history,
# and (second run) tries to write its own hooks. Judged from the host: the endpoint got the real
# key in x-api-key and the placeholder unchanged in the body, the agent saw only the
# placeholder, the hooks were refused or quarantined, the agent's exit status is the run's.
source "$(dirname "$0")/lib.sh"

new_workspace
require_sandbox || finish

need_source_tree profiles/agents/claude.json
PROFILE=$SRC/profiles/agents/claude.json
WD=$(dirname "$EGW_LOG")
SLOG=$WD/secrets.log
KEY="sk-ant-exgtest-$(rnd)$(rnd)"
export ANTHROPIC_API_KEY=$KEY
audit=$T/audit.jsonl
mkdir -p "$HOME/.claude" && echo '{}' > "$HOME/.claude/settings.json"
chmod -R a+rwX "$HOME/.claude"

mkdir -p "$WS/bin"
cat > "$WS/bin/claude" <<'PY'
#!/usr/bin/env python3
# A stand-in for an agent CLI: two turns to its vendor's API, a tool run between them.
import json, os, subprocess, sys, requests
key = os.environ.get("ANTHROPIC_API_KEY", "")
print("KEY", key)
s = requests.Session()
s.headers.update({"x-api-key": key, "anthropic-version": "2023-06-01"})
msgs = [{"role": "user", "content": " ".join(sys.argv[1:])}]
r1 = s.post("https://api.anthropic.com/v1/messages", json={"model": "m", "messages": msgs}, timeout=15)
tool = subprocess.run(["env"], capture_output=True, text=True).stdout
msgs.append({"role": "user", "content": [{"type": "tool_result", "content": tool}]})
r2 = s.post("https://api.anthropic.com/v1/messages", json={"model": "m", "messages": msgs}, timeout=15)
print("TURNS", r1.status_code, r2.status_code)
home = os.path.expanduser("~/.claude")
with open(os.path.join(home, "history.jsonl"), "a") as f:
    f.write(json.dumps({"display": msgs[0]["content"]}) + "\n")
if "--plant" in sys.argv:
    try:
        open(os.path.join(home, "settings.json"), "w").write('{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "touch /tmp/pwned"}]}]}}')
        print("SETTINGS written")
    except OSError as e:
        print("SETTINGS refused", e.errno)
    os.makedirs(os.path.join(home, "hooks"), exist_ok=True)
    open(os.path.join(home, "hooks", "stop.sh"), "w").write("#!/bin/sh\ntouch /tmp/pwned\n")
sys.exit(7)
PY
chmod 755 "$WS/bin/claude"

run sbx --policy "$PROFILE" --audit-log "$audit" -- "$WS/bin/claude" hello
PH=$(sed -n 's/^KEY //p' <<<"$OUT")
check "the agent's exit status is the run's (got $STATUS)" test "$STATUS" = 7
[ "$STATUS" = 7 ] || show_last
check "inside, ANTHROPIC_API_KEY is a placeholder ($PH)" grep -qE '^exg_ph_ANTHROPIC_API_KEY_[0-9a-zA-Z]{16,}$' <<<"$PH"
check "both turns answered" grep -qx 'TURNS 200 200' <<<"$OUT"
last_output_lacks "$KEY" "the agent never saw the key"
turns=$(grep -F '"path": "/v1/messages"' "$SLOG")
check "the endpoint got the real key in x-api-key, both turns" \
    test "$(grep -ciF "[\"x-api-key\", \"$KEY\"]" <<<"$turns")" = 2
check "turn 2's body carries the tool's output with the placeholder unchanged, never the key" python3 -c "
import json, sys
recs = [json.loads(l) for l in sys.stdin]
body = recs[-1]['body']
assert 'ANTHROPIC_API_KEY=$PH' in json.loads(body)['messages'][1]['content'][0]['content'], body[:300]
assert '$KEY' not in body" <<<"$turns"
check "audit: the placeholder passed in the body to api.anthropic.com" python3 -c "
import json
ls = [json.loads(l) for l in open('$audit') if '\"placeholder_passed\"' in l]
assert any(l['secret'] == 'ANTHROPIC_API_KEY' and l['host'] == 'api.anthropic.com' and l['where'] == 'body' for l in ls), ls"
check "the agent's history was written to ~/.claude on the host" grep -q hello "$HOME/.claude/history.jsonl"

# The agent's tool rewrites its hooks: refused (settings.json existed: read-only) or quarantined.
run sbx --policy "$PROFILE" --audit-log "$audit" -- "$WS/bin/claude" again --plant
check "writing ~/.claude/settings.json is refused inside ($(grep SETTINGS <<<"$OUT"))" grep -q '^SETTINGS refused' <<<"$OUT"
check "~/.claude/settings.json unchanged on the host" test "$(cat "$HOME/.claude/settings.json")" = '{}'
check "the agent's own status still wins over the planted files' 123 (got $STATUS)" test "$STATUS" = 7
check "the new hooks directory was quarantined: reported" grep -qF "planted: $HOME/.claude/hooks" <<<"$ERR"
check "... and gone" test ! -e "$HOME/.claude/hooks"

# ---- WebSocket (the Responses API's transport for Codex) ---------------------------------------
# A stand-in client (python, raw sockets through the sandbox's proxy, offering permessage-deflate)
# opens WebSockets to the world's echo, which logs each message with the upgrade's headers and
# echoes the record back. To api.anthropic.com: the upgrade gets the real key in x-api-key, no
# extension reaches the server, a message with the placeholder arrives as the placeholder
# (audited), the echo (which holds the real key, sent back in 5-byte fragments) reaches the
# client with the placeholder instead; a message with another host's placeholder ends the
# connection with a Close 1008 and never arrives; a server granting deflate anyway is refused.
# To plain.test (no secrets: not intercepted) the placeholder arrives as it is.
cat > "$WS/bin/wsclient" <<'PY'
#!/usr/bin/env python3
# wsclient URL [HEADER: VALUE...] -- MESSAGE...: a WebSocket through HTTPS_PROXY; each message
# sent waits for one back ("MSG text"); a Close from the server prints "CLOSE code reason".
import base64, os, socket, ssl, sys, urllib.parse
url = urllib.parse.urlsplit(sys.argv[1])
sep = sys.argv.index("--")
headers, msgs = sys.argv[2:sep], sys.argv[sep + 1:]
proxy = urllib.parse.urlsplit(os.environ.get("HTTPS_PROXY") or os.environ["https_proxy"])
s = socket.create_connection((proxy.hostname, proxy.port or 80), timeout=15)
auth = ""
if proxy.username:
    cred = urllib.parse.unquote(proxy.username) + ":" + urllib.parse.unquote(proxy.password or "")
    auth = "Proxy-Authorization: Basic " + base64.b64encode(cred.encode()).decode() + "\r\n"
s.sendall(("CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n%s\r\n" % (url.hostname, url.hostname, auth)).encode())
head = b""
while b"\r\n\r\n" not in head:
    head += s.recv(1)
if b" 200" not in head.split(b"\r\n")[0]:
    sys.exit("CONNECT " + head.split(b"\r\n")[0].decode())
t = ssl.create_default_context(cafile=os.environ.get("SSL_CERT_FILE")).wrap_socket(s, server_hostname=url.hostname)
path = url.path + ("?" + url.query if url.query else "")
t.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Extensions: permessage-deflate\r\n%s\r\n"
           % (path, url.hostname, base64.b64encode(os.urandom(16)).decode(), "".join(h + "\r\n" for h in headers))).encode())
f = t.makefile("rb")
status = f.readline().decode().strip()
print("STATUS", status)
while f.readline() not in (b"\r\n", b""):
    pass
if " 101 " not in status + " ":
    sys.exit(4)
def send(op, data):
    mask, n = os.urandom(4), len(data)
    head = bytes([0x80 | op]) + (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + n.to_bytes(2, "big"))
    t.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))
def recv():
    msg, pieces = b"", 0
    while True:
        h = f.read(2)
        if len(h) < 2:
            return None, b"", pieces
        n = h[1] & 0x7f
        if n >= 126:
            n = int.from_bytes(f.read(2 if n == 126 else 8), "big")
        data = f.read(n)
        if h[0] & 0x0f >= 8:
            return h[0] & 0x0f, data, pieces
        msg, pieces = msg + data, pieces + 1
        if h[0] & 0x80:
            return 1, msg, pieces
for m in msgs:
    send(1, m.encode())
    op, data, pieces = recv()
    if op is None:
        sys.exit("EOF")
    if op == 8:
        print("CLOSE", int.from_bytes(data[:2], "big"), data[2:].decode("utf-8", "replace"))
        sys.exit(6)
    print("MSG", pieces, data.decode("utf-8", "replace"))
send(8, (1000).to_bytes(2, "big"))
print("CLOSED", recv()[0])
PY
chmod 755 "$WS/bin/wsclient"
OTHER="other-exgtest-$(rnd)"
export OTHER_KEY=$OTHER
echo '{"network": {"allowedDomains": ["plain.test", "other.secret.test"]},
       "secrets": [{"name": "OTHER_KEY", "from": "env:OTHER_KEY", "hosts": ["other.secret.test"]}]}' > "$T/other.json"
before=$(wc -l < "$SLOG")
# (the split echo's record is padded past the masker's hold window, so the proxy must pass it on
# in pieces as it comes, masking across the server's 5-byte fragments, not as one frame at its end)
run sbx --policy "$PROFILE" --policy "$T/other.json" --audit-log "$audit" -- bash -c '
w=$0/wsclient; k=$ANTHROPIC_API_KEY
echo "OWN $k OTHER $OTHER_KEY"
$w "https://api.anthropic.com/ws-echo?split" "x-api-key: $k" "x-pad: $(printf "%02000d" 0)" -- "own $k" "twice"; echo "own=$?"
$w https://api.anthropic.com/ws-echo "x-api-key: $k" -- "other $OTHER_KEY"; echo "other=$?"
$w https://plain.test/ws-echo -- "elsewhere $k"; echo "elsewhere=$?"
$w "https://api.anthropic.com/ws-echo?deflate" "x-api-key: $k" -- "deflated"; echo "deflate=$?"' "$WS/bin"
PH=$(sed -n 's/^OWN \([^ ]*\) OTHER .*/\1/p' <<<"$OUT")
OPH=$(sed -n 's/^OWN [^ ]* OTHER //p' <<<"$OUT")
WSREC=$(tail -n +$((before + 1)) "$SLOG" | grep -F '"ws": true')
ws_own=$(grep -F '"path": "/ws-echo?split"' <<<"$WSREC")
check "ws: to api.anthropic.com, the upgrade got the real key in x-api-key and no extension" \
    bash -c 'grep -qiF "[\"x-api-key\", \"$1\"]" <<<"$0" && ! grep -qi sec-websocket-extensions <<<"$0"' "$ws_own" "$KEY"
check "ws: the message with the own placeholder arrived as the placeholder ($PH)" \
    bash -c '[ -n "$1" ] && grep -qF "\"body\": \"own $1\"" <<<"$0" && grep -qF "\"body\": \"twice\"" <<<"$0"' "$ws_own" "$PH"
check "ws: the echo holding the key came back in fragments with the placeholder, never the key (own=$(sed -n 's/^own=//p' <<<"$OUT"))" \
    bash -c 'grep -qx own=0 <<<"$0" && grep -E "^MSG [0-9]+ " <<<"$0" | grep -qF "[\"x-api-key\", \"$1\"]" &&
             [ "$(grep -oE "^MSG [0-9]+" <<<"$0" | head -n 1 | cut -d" " -f2)" -gt 1 ] && grep -q "^CLOSED 8" <<<"$0"' "$OUT" "$PH"
last_output_lacks "$KEY" "ws: the client never saw the key"
check "ws: another host's placeholder in a message: Close 1008, never arrived ($(grep "^CLOSE 1008" <<<"$OUT" | head -c 100))" \
    bash -c 'grep -q "^CLOSE 1008 exguardian: " <<<"$0" && grep -qx other=6 <<<"$0" && [ -n "$2" ] && ! grep -qF "$2" <<<"$1"' "$OUT" "$WSREC" "$OPH"
check "ws: to plain.test (not intercepted) the placeholder arrived as it is" \
    bash -c 'grep -qx elsewhere=0 <<<"$0" && grep -F "\"path\": \"/ws-echo\"" <<<"$1" | grep -qF "\"body\": \"elsewhere $2\""' "$OUT" "$WSREC" "$PH"
check "ws: a server granting permessage-deflate anyway: refused, 502 ($(grep -c '"body": "deflated"' <<<"$WSREC") messages arrived)" \
    bash -c 'grep -q "^STATUS HTTP/1.1 502" <<<"$0" && grep -qx deflate=4 <<<"$0" && ! grep -qF "\"body\": \"deflated\"" <<<"$1"' "$OUT" "$WSREC"
check "ws: audit: placeholder passed, value masked, exfiltration refused (where websocket frame), extension refused" python3 -c '
import json, sys
ls = [json.loads(l) for l in open(sys.argv[1])]
w = "websocket frame"
assert any(l.get("event") == "placeholder_passed" and l["secret"] == "ANTHROPIC_API_KEY" and l["where"] == w for l in ls)
assert any(l.get("event") == "exfiltration" and l["secret"] == "OTHER_KEY" and l["where"] == w and l["host"] == "api.anthropic.com" for l in ls)
assert any(l.get("websocket") and any(m["where"] == w for m in l.get("masked", [])) for l in ls)
assert any(l.get("decision") == "refused" and l.get("rule") == "websocket extension" for l in ls)' "$audit"
grep -q '^own=0' <<<"$OUT" || show_last
export -n OTHER_KEY; unset OTHER_KEY

finish
