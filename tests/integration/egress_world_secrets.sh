# HTTPS echo upstreams for the egress test world (tests/integration/egress_world.sh), used
# by tests/integration/test_egress_sandbox_secrets*.sh. Sourceable; adds nothing to the traps.
#
#   world_secrets_up   (root, right after world_up, same shell) adds:
#     a test CA ($EGW_DIR/secrets/ca.pem) that becomes the client side's "host trust
#     store": $EGW_DIR/ca-certificates.crt (Debian's bundle plus the test CA), which
#     _egw_exec binds over /etc/ssl/certs/ca-certificates.crt in every client-side
#     mount namespace (OpenSSL's default cert.pem points there);
#     203.0.113.20:443   HTTPS echo, certificate from the test CA for api.secret.test,
#                        plain.test, other.secret.test, api.anthropic.com and
#                        console.anthropic.com, oauth2.googleapis.com,
#                        cloudcode-pa.googleapis.com, generativelanguage.googleapis.com and
#                        platform.claude.com, api.openai.com, auth.openai.com, chatgpt.com (the world's stand-in for the vendors'
#                        APIs and their OAuth token endpoints: the agent profiles' tests);
#     203.0.113.21:443   HTTPS echo, certificate from ANOTHER CA (not in the store) for
#                        bad.secret.test;
#   and appends those names to $EGW_DIR/hosts.
#   The echo servers answer every GET/POST with JSON {"addr", "method", "path", "headers":
#   [[name, value], ...], "body"} and append the same JSON as one line to $EGW_DIR/secrets.log
#   (world-readable; the test greps it for placeholders and values). Paths starting with
#   /close-delimited get that JSON 2000 times, without a length: the body ends at the close.
#   Paths under /mis/ misbehave with the Authorization header's value (issue 12.5: how an echo
#   can carry a value past a masking that only looks for it as is): /mis/gzip, /mis/deflate,
#   /mis/gzip-chunked (compressed although the proxy asked for identity), /mis/br (a coding
#   that cannot be decoded), /mis/reason (in the status line), /mis/1xx (in a 103's reason and
#   headers), /mis/trailer (in a chunked body's trailer), /mis/header-name, /mis/json-php (\/),
#   /mis/json-u (every character \uXXXX), /mis/percent-upper, /mis/percent-lower, /mis/html,
#   /mis/hex, /mis/base64-0, -1, -2 (three alignments), /mis/base64url, /mis/base64-wrapped
#   (76 columns), /mis/split (chunked, one byte a chunk, each written on its own); issue 39.8:
#   /mis/base32-0 .. -4 (five alignments, padded), /mis/base32-lower (no padding),
#   /mis/base32hex-0, /mis/base32hex-3-lower, /mis/hex-colon, /mis/hex-dash-upper,
#   /mis/hex-space, /mis/utf-16le, /mis/utf-16be, /mis/utf-32le, /mis/utf-32be, /mis/split-forms
#   (base32, hex with ':' and UTF-16LE, chunked one byte a chunk). HEAD answers carry the
#   value in a header. POST /v1/oauth/token and /token (an OAuth refresh, issue 45) answer
#   {"access_token", "refresh_token", "expires_in", "token_type"}: new tokens made from the
#   refresh_token of the JSON or form-encoded body it got ("sk-ant-oat01-new-" /
#   "sk-ant-ort01-new-" and the first 32 hex of sha256(refresh_token + "a" / "r")), logged as
#   "issued" too (a JSON answer adds the sign-in's scope, account and organization, as
#   Anthropic's does); with ?form the answer is form-encoded, with ?chunked in 7-byte chunks.
#   GET /api/oauth/profile answers a Max subscription's profile (Claude Code asks after a refresh).
#   POST /v1/messages with "stream":true is a scripted model (Anthropic's streamed Messages
#   API, for the real Claude Code and OpenCode): the first message's "EXG-RUN: CMD" makes it call
#   the Bash tool with CMD; a conversation ending in the tool's result, or offering no tools (a
#   title request), gets "done". POST
#   /v1beta/models/M:generateContent and :streamGenerateContent are the same script in Gemini's
#   API (for the real Gemini CLI; its run_shell_command tool), and again behind Google's Code
#   Assist API (POST /v1internal:..., for Gemini CLI signed in with Google); POST /v1/responses in OpenAI's
#   Responses API, streamed over HTTP or, after a WebSocket upgrade of GET /v1/responses, as
#   messages (for the real Codex CLI; its shell tool); the same at chatgpt.com's
#   /backend-api/codex/responses (Codex signed in with ChatGPT), whose POST /oauth/token (on
#   auth.openai.com) answers an ID token (a JWT with the ChatGPT account's claims) too, and
#   GET /backend-api/wham/accounts/check lists that account (Codex's workspace routing). A WebSocket elsewhere echoes each message's
#   record (ws_session below).

_egs_server_py() {
    cat <<'PY'
import base64, gzip, hashlib, http.server, json, socketserver, ssl, sys, threading, time, urllib.parse, zlib

log_path, addr, cert, key = sys.argv[1:5]
lock = threading.Lock()

def id_token():
    # An OpenID Connect ID token as OpenAI's sign-in issues it for ChatGPT (Codex reads its claims; unsigned here).
    b64 = lambda o: base64.urlsafe_b64encode(json.dumps(o).encode()).rstrip(b"=").decode()
    claims = {"email": "exg@example.invalid", "exp": int(time.time()) + 3600, "iat": int(time.time()),
              "https://api.openai.com/auth": {"chatgpt_plan_type": "pro", "chatgpt_account_id": "acct-exg",
                                              "chatgpt_user_id": "user-exg", "user_id": "user-exg"}}
    return b64({"alg": "RS256", "typ": "JWT"}) + "." + b64(claims) + ".c2ln"

class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def do_GET(self):
        if "websocket" in self.headers.get("Upgrade", "").lower():
            return self.ws_session()
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0], 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                body += self.rfile.read(size)
                self.rfile.readline()
        else:
            n = int(self.headers.get("Content-Length", "0") or 0)
            body = self.rfile.read(n) if n else b""
        rec = {"addr": addr, "method": self.command, "path": self.path,
               "headers": [[k, v] for k, v in self.headers.items()],
               "body": body.decode("utf-8", "replace")}
        issued = None
        if urllib.parse.urlsplit(self.path).path in ("/v1/oauth/token", "/token", "/oauth/token"):
            try:
                rt = json.loads(body)["refresh_token"]
            except Exception:
                rt = urllib.parse.parse_qs(body.decode()).get("refresh_token", [""])[0]
            h = lambda k: hashlib.sha256((rt + k).encode()).hexdigest()[:32]
            issued = {"access_token": "sk-ant-oat01-new-" + h("a"), "refresh_token": "sk-ant-ort01-new-" + h("r"),
                      "expires_in": 28800, "token_type": "Bearer"}
            if urllib.parse.urlsplit(self.path).path == "/oauth/token":  # (OpenAI's, for Codex: with an ID token)
                issued["id_token"] = id_token()
            rec["issued"] = issued
        line = json.dumps(rec)
        with lock, open(log_path, "a") as f:
            f.write(line + "\n")
        if issued is not None:
            return self.token_answer(issued)
        if self.path.startswith("/v1/messages") and b'"stream":true' in body.replace(b" ", b""):
            return self.model_turn(body)
        if self.path.startswith("/v1beta/models/") and "enerateContent" in self.path:
            return self.gemini_turn(body)
        if self.path.startswith("/v1internal:"):  # (Code Assist: Gemini CLI signed in with Google)
            return self.code_assist(body)
        if self.path.startswith("/tokeninfo"):  # (google-auth-library checks a cached token)
            return self.json_answer({"aud": "exg-client", "azp": "exg-client", "access_type": "offline",
                                     "scope": "https://www.googleapis.com/auth/cloud-platform",
                                     "exp": str(int(time.time()) + 3600), "expires_in": "3599"})
        if self.path.startswith("/v1/responses") or self.path.startswith("/backend-api/codex/responses"):
            return self.responses_turn(body)
        if self.path.startswith("/backend-api/wham/accounts/check"):  # (Codex's workspace routing: its account, no constraint)
            return self.json_answer({"accounts": [{"id": "acct-exg", "workspace_backend_origin": "NO_CONSTRAINT",
                                                   "account_routing_override": "NO_CONSTRAINT"}]})
        if self.path == "/api/oauth/profile":  # (Claude Code's, after a refresh)
            return self.json_answer({"account": {"uuid": "00000000-0000-4000-8000-000000000001", "email_address": "exg@example.invalid",
                                                 "email": "exg@example.invalid", "display_name": "exg", "full_name": "exg",
                                                 "has_claude_max": True, "has_claude_pro": False},
                                     "organization": {"uuid": "00000000-0000-4000-8000-000000000002", "name": "exg",
                                                      "organization_type": "claude_max", "billing_type": "stripe_subscription",
                                                      "rate_limit_tier": "default_claude_max_20x"}})
        if self.path.startswith("/mis/"):
            return self.misbehave()
        out = (line + "\n").encode()
        if self.path.startswith("/close-delimited"):
            # No length, no chunks: the body ends when the server closes (no close_notify).
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(out * 2000)
            self.close_connection = True
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    def json_answer(self, obj):
        out = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    def token_answer(self, issued):
        # ?form: form-encoded (as GitHub's token endpoint answers); ?chunked: in pieces of 7 bytes.
        query = urllib.parse.urlsplit(self.path).query.split("&")
        if "form" in query:
            out, ctype = urllib.parse.urlencode(issued).encode(), "application/x-www-form-urlencoded"
        else:  # (with the sign-in's account, as Anthropic's token endpoint answers: Claude Code keeps the tokens only then)
            out = json.dumps(dict(issued, scope="user:inference user:profile",
                                  account={"uuid": "00000000-0000-4000-8000-000000000001", "email_address": "exg@example.invalid"},
                                  organization={"uuid": "00000000-0000-4000-8000-000000000002", "name": "exg"})).encode()
            ctype = "application/json"
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        if "chunked" in query:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(out), 7):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(out[i:i + 7]), out[i:i + 7]))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            return
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    def sse_answer(self, ev):
        # Server-sent events (name, data), each data object with its "type" as the event's name.
        out = "".join("event: %s\ndata: %s\n\n" % (e, json.dumps(dict(d, type=e))) for e, d in ev).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    def model_turn(self, body):
        # The scripted model (Anthropic's Messages API, streamed): asked with "EXG-RUN: CMD" in
        # the conversation's first message, it calls the Bash tool with CMD; once the tool's
        # result is in the last message, it answers "done".
        req = json.loads(body)
        def texts(c):
            return [c] if isinstance(c, str) else [b.get("text", "") for b in c if isinstance(b, dict)]
        def unquoted(t):  # (OpenCode sends the prompt in quotes, its own quotes as \")
            t2 = t.strip()
            return t2[1:-1].replace('\\"', '"') if len(t2) > 1 and t2[0] == t2[-1] == '"' else t
        first = " ".join(unquoted(t) for t in texts(req["messages"][0]["content"]))
        last = req["messages"][-1]["content"]
        answered = isinstance(last, list) and any(isinstance(b, dict) and b.get("type") == "tool_result" for b in last)
        cmd = first.split("EXG-RUN: ", 1)[1].split("\n")[0] if "EXG-RUN: " in first and req.get("tools") else ""
        ev = [("message_start", {"message": {"id": "msg_exg", "type": "message", "role": "assistant", "model": req.get("model", "m"),
                                             "content": [], "stop_reason": None, "stop_sequence": None,
                                             "usage": {"input_tokens": 1, "output_tokens": 1}}})]
        if answered or not cmd:
            ev += [("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
                   ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "done"}})]
            stop = "end_turn"
        else:
            # (Claude Code's tool is "Bash", OpenCode's "bash"; "mcp_bash" as OpenCode's Anthropic
            # sign-in plugin renames its tools on the way out, and back in the answer)
            tool = next((t["name"] for t in req.get("tools", []) if t.get("name", "").lower() in ("bash", "mcp_bash")), "Bash")
            ev += [("content_block_start", {"index": 0, "content_block": {"type": "tool_use", "id": "toolu_exg", "name": tool, "input": {}}}),
                   ("content_block_delta", {"index": 0, "delta": {"type": "input_json_delta",
                                                                  "partial_json": json.dumps({"command": cmd, "description": "run"})}})]
            stop = "tool_use"
        ev += [("content_block_stop", {"index": 0}),
               ("message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 1}}),
               ("message_stop", {})]
        self.sse_answer(ev)
    def code_assist(self, body):
        # Google's Code Assist API, as Gemini CLI signed in with a Google account calls it: the
        # account is on a tier with a project (no onboarding), the model calls are the script of
        # gemini_turn with the request and the answer each wrapped; anything else gets {}.
        method = urllib.parse.urlsplit(self.path).path.split(":", 1)[1]
        if method == "loadCodeAssist":
            tier = {"id": "standard-tier", "name": "Gemini Code Assist", "userDefinedCloudaicompanionProject": False}
            return self.json_answer({"currentTier": tier, "allowedTiers": [dict(tier, isDefault=True)],
                                     "cloudaicompanionProject": "exg-project"})
        if method in ("generateContent", "streamGenerateContent"):
            return self.gemini_turn(json.dumps(json.loads(body).get("request", {})).encode(), wrapped=True)
        return self.json_answer({})
    def gemini_turn(self, body, wrapped=False):
        # The same script in Gemini's API (generateContent, streamGenerateContent?alt=sse): the
        # run_shell_command tool called with CMD, then "done". Gemini CLI's model router asks
        # first, for JSON: it gets a low complexity score.
        req = json.loads(body)
        conv = req.get("contents", [])
        texts = [p.get("text", "") for c in conv if c.get("role") == "user" for p in c.get("parts", [])]
        cmd = next((t.split("EXG-RUN: ", 1)[1].split("\n")[0] for t in texts if "EXG-RUN: " in t), "")
        answered = any("functionResponse" in p for p in (conv[-1].get("parts", []) if conv else []))
        if req.get("generationConfig", {}).get("responseMimeType") == "application/json":  # (the router)
            # (the classifier's two shapes: the API's and Code Assist's)
            part = {"text": '{"complexity_reasoning": "simple", "complexity_score": 1, "reasoning": "simple", "model_choice": "flash"}'}
        elif cmd and not answered:
            part = {"functionCall": {"name": "run_shell_command", "args": {"command": cmd, "description": "run"}}}
        else:
            part = {"text": "done"}
        answer = {"candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}],
                  "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2}}
        out = json.dumps({"response": answer} if wrapped else answer)
        sse = "alt=sse" in self.path
        out = ("data: " + out + "\r\n\r\n").encode() if sse else out.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream" if sse else "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
    def ws_send(self, op, data, pieces=1):
        # One message, in `pieces` fragments (unmasked: a server's frames).
        step = max(1, -(-len(data) // pieces))
        parts = [data[i:i + step] for i in range(0, len(data), step)] or [b""]
        for i, part in enumerate(parts):
            head = bytes([(0x80 if i == len(parts) - 1 else 0) | (op if i == 0 else 0)])
            n = len(part)
            head += bytes([n]) if n < 126 else bytes([126]) + n.to_bytes(2, "big") if n < 65536 else bytes([127]) + n.to_bytes(8, "big")
            self.wfile.write(head + part)
        self.wfile.flush()
    def ws_session(self):
        # A WebSocket (RFC 6455): each message the client sends is logged as a record with
        # "ws": true, the upgrade request's headers and the message as its body. On /v1/responses
        # it is OpenAI's Responses API over a WebSocket (Codex's default): a "response.create"
        # message gets the scripted turn's events, one JSON text message each. Elsewhere the
        # record is echoed back as a text message (?split: in fragments of a few bytes each).
        # ?deflate grants permessage-deflate whatever the client asked (a broken upstream).
        key = self.headers.get("Sec-WebSocket-Key", "")
        accept = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
        query = urllib.parse.urlsplit(self.path).query.split("&")
        self.send_response(101, "Switching Protocols")
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        if "deflate" in query:
            self.send_header("Sec-WebSocket-Extensions", "permessage-deflate")
        self.end_headers()
        self.wfile.flush()
        self.close_connection = True
        headers = [[k, v] for k, v in self.headers.items()]
        msg = b""
        while True:
            h = self.rfile.read(2)
            if len(h) < 2:
                return
            fin, op, n = h[0] & 0x80, h[0] & 0x0f, h[1] & 0x7f
            if n >= 126:
                n = int.from_bytes(self.rfile.read(2 if n == 126 else 8), "big")
            mask = self.rfile.read(4) if h[1] & 0x80 else b"\0\0\0\0"
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(n)))
            if op == 8:
                return self.ws_send(8, data[:2])
            if op == 9:
                self.ws_send(10, data)
                continue
            if op in (1, 2, 0):
                msg = data if op else msg + data
            if not fin or op == 10:
                continue
            rec = {"addr": addr, "method": "WS", "path": self.path, "headers": headers,
                   "body": msg.decode("utf-8", "replace"), "ws": True}
            line = json.dumps(rec)
            with lock, open(log_path, "a") as f:
                f.write(line + "\n")
            if self.path.startswith("/v1/responses") or self.path.startswith("/backend-api/codex/responses"):
                req = json.loads(msg)
                if req.pop("type", "") == "response.create":
                    for e, d in self.responses_events(req):
                        self.ws_send(1, json.dumps(dict(d, type=e)).encode())
            else:
                self.ws_send(1, line.encode(), pieces=len(line) // 5 if "split" in query else 1)
    def responses_turn(self, body):
        self.sse_answer(self.responses_events(json.loads(body)))
    def responses_events(self, req):
        # The same script in OpenAI's Responses API, streamed (for the real Codex CLI): its shell
        # tool called with CMD, then "done" once a function_call_output is in the input.
        items = req.get("input", [])
        def texts(c):
            return [c] if isinstance(c, str) else [b.get("text", "") for b in c if isinstance(b, dict)]
        user = [t for i in items if i.get("role") == "user" for t in texts(i.get("content", ""))]
        cmd = next((t.split("EXG-RUN: ", 1)[1].split("\n")[0] for t in user if "EXG-RUN: " in t), "")
        answered = any(i.get("type") == "function_call_output" for i in items)
        names = [t.get("name", "") for t in req.get("tools", [])]
        if cmd and not answered:
            # (Codex offers exec_command, shell_command or shell, by version and config)
            if "exec_command" in names:
                name, args = "exec_command", {"cmd": cmd}
            elif "shell_command" in names:
                name, args = "shell_command", {"command": cmd}
            else:
                name, args = "shell", {"command": ["bash", "-lc", cmd]}
            item = {"type": "function_call", "id": "fc_exg", "call_id": "call_exg", "name": name, "arguments": json.dumps(args)}
        else:
            item = {"type": "message", "id": "msg_exg", "role": "assistant", "content": [{"type": "output_text", "text": "done", "annotations": []}]}
        usage = {"input_tokens": 1, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 1,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 2}
        ev = [("response.created", {"response": {"id": "resp_exg"}}),
              ("response.output_item.added", {"output_index": 0, "item": item}),
              ("response.output_item.done", {"output_index": 0, "item": item}),
              ("response.completed", {"response": {"id": "resp_exg", "usage": usage}})]
        return ev
    def do_HEAD(self):
        self.send_response(200)
        self.send_header("X-Echo", self.headers.get("Authorization", ""))
        self.send_header("Content-Length", "12345")
        self.end_headers()
    def misbehave(self):
        auth = self.headers.get("Authorization", "")
        tok = auth.split(" ", 1)[-1]
        kind = self.path[len("/mis/"):].split("?")[0]
        raw = lambda b: (self.wfile.write(b), self.wfile.flush())
        def plain(body, extra=b"", status=b"200 OK"):
            raw(b"HTTP/1.1 " + status + b"\r\nContent-Type: application/json\r\n" + extra +
                b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        def chunked(pieces, trailer=b""):
            raw(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n" + (b"Trailer: X-Echo\r\n" if trailer else b"") + b"\r\n")
            for p in pieces:
                raw(b"%x;ext=%s\r\n%s\r\n" % (len(p), tok.encode(), p))
            raw(b"0\r\n" + trailer + b"\r\n")
        echo = json.dumps({"Authorization": auth}).encode()
        if kind == "gzip":
            plain(gzip.compress(echo), b"Content-Encoding: gzip\r\n")
        elif kind == "deflate":
            plain(zlib.compress(echo), b"Content-Encoding: deflate\r\n")
        elif kind == "gzip-chunked":
            z = gzip.compress(echo * 50)
            raw(b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n")
            for i in range(0, len(z), 7):
                raw(b"%x\r\n%s\r\n" % (len(z[i:i + 7]), z[i:i + 7]))
            raw(b"0\r\n\r\n")
        elif kind == "br":
            plain(b"br-pretend:" + auth.encode(), b"Content-Encoding: br\r\n")
        elif kind == "reason":
            plain(b"{}", status=b"200 " + auth.encode())
        elif kind == "1xx":
            raw(b"HTTP/1.1 103 " + auth.encode() + b"\r\nLink: <" + tok.encode() + b">; rel=preload\r\n\r\n")
            plain(b"{}")
        elif kind == "trailer":
            chunked([b"ok"], b"X-Echo: " + auth.encode() + b"\r\n")
        elif kind == "header-name":
            plain(b"{}", b"X-Echo-" + tok.encode() + b": 1\r\n")
        elif kind == "json-php":
            plain(json.dumps({"Authorization": auth}).replace("/", "\\/").encode())
        elif kind == "json-u":
            plain(b'{"Authorization": "' + "".join("\\u%04x" % ord(c) for c in auth).encode() + b'"}')
        elif kind == "percent-upper":
            plain(b"a=" + urllib.parse.quote(auth, safe="").encode())
        elif kind == "percent-lower":
            plain(b"a=" + "".join("%%%02x" % b for b in auth.encode()).encode())
        elif kind == "html":
            plain(b"<p>" + "".join("&#%d;" % ord(c) for c in auth).encode() + b"</p>")
        elif kind == "hex":
            plain(auth.encode().hex().encode())
        elif kind.startswith("base64-") and kind[7:].isdigit():
            plain(base64.b64encode(b"x" * int(kind[7:]) + auth.encode()))
        elif kind == "base64url":
            plain(base64.urlsafe_b64encode(b"\xfb\xff" + auth.encode() + b"\xff"))
        elif kind == "base64-wrapped":
            plain(base64.encodebytes(b"y" * 40 + auth.encode() * 3))
        elif kind == "split":
            chunked([bytes([b]) for b in echo])
        elif kind.startswith("base32-") and kind[7:].isdigit():
            plain(base64.b32encode(b"x" * int(kind[7:]) + auth.encode()))
        elif kind == "base32-lower":
            plain(base64.b32encode(b"ab" + auth.encode()).lower().rstrip(b"="))
        elif kind == "base32hex-0":
            plain(base64.b32hexencode(auth.encode()))
        elif kind == "base32hex-3-lower":
            plain(base64.b32hexencode(b"xyz" + auth.encode()).lower().rstrip(b"="))
        elif kind == "hex-colon":
            plain(auth.encode().hex(":").encode())
        elif kind == "hex-dash-upper":
            plain(auth.encode().hex("-").upper().encode())
        elif kind == "hex-space":
            plain(auth.encode().hex(" ").encode())
        elif kind in ("utf-16le", "utf-16be", "utf-32le", "utf-32be"):
            plain(("value=" + auth).encode(kind.replace("le", "-le").replace("be", "-be")))
        elif kind == "split-forms":
            body = (base64.b32encode(b"q" + auth.encode()) + b"\n" + auth.encode().hex(":").encode() + b"\n" +
                    auth.encode("utf-16-le"))
            chunked([bytes([b]) for b in body])
        else:
            plain(b"unknown misbehaviour", status=b"404 Not Found")
    do_POST = do_GET
    do_PUT = do_GET

class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True

ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
srv = Server((addr, 443), Handler)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
PY
}

# _egs_leaf CA_BASE NAME SANS: a P-256 leaf signed by CA_BASE.{pem,key}.
_egs_leaf() {
    local ca=$1 out=$2 sans=$3
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$out.key" -out "$out.csr" \
        -subj "/CN=${sans%%,*}" 2>/dev/null || return 1
    printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\nbasicConstraints=critical,CA:FALSE\n' \
        "$(sed 's/\([^,]*\)/DNS:\1/g' <<<"$sans")" > "$out.ext"
    openssl x509 -req -in "$out.csr" -CA "$ca.pem" -CAkey "$ca.key" -CAcreateserial -days 2 \
        -extfile "$out.ext" -out "$out.pem" 2>/dev/null
}

world_secrets_up() {
    local d=$EGW_DIR/secrets
    mkdir -p "$d" && chmod 755 "$d"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/ca.key" -out "$d/ca.pem" \
        -days 2 -subj "/CN=ExGuardian test upstream CA" 2>/dev/null || return 1
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/untrusted.key" \
        -out "$d/untrusted.pem" -days 2 -subj "/CN=Untrusted test CA" 2>/dev/null || return 1
    _egs_leaf "$d/ca" "$d/good" "api.secret.test,plain.test,other.secret.test,api.anthropic.com,console.anthropic.com,oauth2.googleapis.com,cloudcode-pa.googleapis.com,generativelanguage.googleapis.com,platform.claude.com,api.openai.com,auth.openai.com,chatgpt.com" || return 1
    _egs_leaf "$d/untrusted" "$d/bad" "bad.secret.test" || return 1
    chmod 644 "$d"/*.pem
    cat /etc/ssl/certs/ca-certificates.crt "$d/ca.pem" > "$EGW_DIR/ca-certificates.crt" || return 1
    chmod 644 "$EGW_DIR/ca-certificates.crt"
    cat >> "$EGW_DIR/hosts" <<'HOSTS'
203.0.113.20 api.secret.test
203.0.113.20 plain.test
203.0.113.20 other.secret.test
203.0.113.20 api.anthropic.com
203.0.113.20 console.anthropic.com
203.0.113.20 oauth2.googleapis.com
203.0.113.20 cloudcode-pa.googleapis.com
203.0.113.20 generativelanguage.googleapis.com
203.0.113.20 platform.claude.com
203.0.113.20 api.openai.com
203.0.113.20 auth.openai.com
203.0.113.20 chatgpt.com
203.0.113.21 bad.secret.test
HOSTS
    : > "$EGW_DIR/secrets.log"
    chmod 644 "$EGW_DIR/secrets.log"
    _egs_server_py > "$d/server.py"
    in_server ip addr add 203.0.113.20/32 dev lo || return 1
    in_server ip addr add 203.0.113.21/32 dev lo || return 1
    in_server "$EGW_PYTHON" "$d/server.py" "$EGW_DIR/secrets.log" 203.0.113.20 "$d/good.pem" "$d/good.key" \
        </dev/null >"$d/server-20.err" 2>&1 &
    world_track $!
    disown $!
    in_server "$EGW_PYTHON" "$d/server.py" "$EGW_DIR/secrets.log" 203.0.113.21 "$d/bad.pem" "$d/bad.key" \
        </dev/null >"$d/server-21.err" 2>&1 &
    world_track $!
    disown $!
    local end=$((SECONDS + 20))
    until in_client "$EGW_PYTHON" -c '
import socket
for a in ("203.0.113.20", "203.0.113.21"):
    socket.create_connection((a, 443), timeout=1).close()' 2>/dev/null; do
        if [ "$SECONDS" -ge "$end" ]; then
            echo "world_secrets_up: servers did not come up" >&2
            cat "$d"/server-*.err >&2
            return 1
        fi
        sleep 0.1
    done
    # The readiness probes made TLS servers log handshake errors, nothing else.
    : > "$EGW_DIR/secrets.log"
}
