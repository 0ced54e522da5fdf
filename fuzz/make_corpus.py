#!/usr/bin/env python3
"""Writes the hand-made seed corpora (fuzz/corpus/TARGET/NAME): valid inputs
and edge cases of every parser. Run once; the files are kept in the repository.
Binary inputs are built here because they are awkward to write by hand."""
import gzip, os, struct, zlib

here = os.path.dirname(os.path.abspath(__file__))

def put(target, name, data):
    d = os.path.join(here, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())

# ---- policy (ExGuardian's own keys and srt settings) ----
put("policy", "empty-object", "{}")
put("policy", "srt-readme", """{
  "network": {"allowedDomains": ["github.com", "*.github.com", "npmjs.org:443", "[::1]:8080"],
              "deniedDomains": ["malicious.com"]},
  "filesystem": {"denyRead": ["~/.ssh"], "allowRead": [{"path": "~/odd*name", "literal": true}],
                 "allowWrite": [".", "src/", "/tmp"], "denyWrite": [".env", "secrets/**/*.pem"]},
  "ignoreViolations": {"*": ["/usr/bin"]}, "enableWeakerNestedSandbox": false
}""")
put("policy", "own-keys", """{
  "network": {"allowedDomains": ["api.github.com"], "allowedCidrs": ["10.0.0.0/8", "fc00::/7"], "resolver": true,
              "allowUnixSockets": ["/var/run/docker.sock"], "allowAllUnixSockets": false},
  "filesystem": {"allowGitConfig": false, "protect": [".husky"]},
  "resources": {"memory": "512M", "pids": 256, "cpus": 1.5, "timeout": "30s"},
  "env": {"allow": ["PATH"], "set": {"CI": "1", "EMPTY": ""}, "deny": ["AWS_SECRET_ACCESS_KEY"]},
  "layer": "container", "landlock": "required", "audit": {"log": "audit.jsonl"}
}""")
put("policy", "secrets", r"""{
  "network": {"allowedDomains": ["api.github.com"]},
  "secrets": [{"name": "GH_TOKEN", "from": "env:GH", "hosts": ["api.github.com"], "headers": ["authorization"]},
              {"name": "NPM_TOKEN", "from": "file:~/.npm-token", "extract": "token=(\\S+)", "hosts": ["registry.npmjs.org"]}],
  "secretFiles": [{"path": "~/.npmrc", "secrets": ["NPM_TOKEN"]}],
  "credentials": {"envVars": [{"name": "OTHER", "mode": "mask"}]}
}""")
put("policy", "bad-duplicate", '{"env": {"set": {"A": "1", "A": "2"}}}')
put("policy", "bad-types", '{"resources": {"memory": -5, "timeout": 1.5, "cpus": "2"}, "allowPty": 1}')
put("policy", "unicode", '{"network": {"allowedDomains": ["b\\u00fccher.example", "\u00e4.test"]}, "x\\ud800": 1}')

# ---- agent frames: u32 length, kind, u32 id, u32 header length, header, payload ----
def frame(kind, rid, header, payload=b""):
    h = header.encode()
    body = kind + struct.pack(">II", rid, len(h)) + h + payload
    return struct.pack(">I", len(body)) + body
# The first byte of every input picks how it is cut into pieces.
put("agent_frames", "start", b"\x07" + frame(b"Q", 1, '{"op":"start","argv":["sh","-c","echo hi"],"env":["A=1"],"pty":true,"rows":40,"cols":120}'))
put("agent_frames", "files", b"\x01" + frame(b"Q", 2, '{"op":"write","path":"/w/x","mode":420}', b"data")
    + frame(b"Q", 3, '{"op":"read","path":"/w/x","offset":1,"length":2}')
    + frame(b"Q", 4, '{"op":"rename","path":"/w/x","to":"/w/y"}')
    + frame(b"Q", 5, '{"op":"signal","pid":7,"signal":"SIGTERM"}'))
put("agent_frames", "too-short", b"\x03" + struct.pack(">I", 3) + b"abc" + frame(b"Q", 6, '{"op":"list"}'))
put("agent_frames", "oversized", b"\x05" + struct.pack(">I", 0x7fffffff) + b"Q\x00\x00\x00\x09" + b"x" * 40)
put("agent_frames", "bad-header", b"\x02" + frame(b"Q", 8, '[[[[[[[[[[1]]]]]]]]]]') + frame(b"Z", 9, "{}")
    + frame(b"R", 10, '{"ok":true}') + frame(b"Q", 11, "{\"op\":\"unwatch\",\"watch\":1e5}"))

# ---- HTTP requests and responses ----
put("http_request", "absolute", "GET http://example.com:8080/a?b#c HTTP/1.1\r\nHost: example.com:8080\r\nConnection: keep-alive, X-Drop\r\nX-Drop: 1\r\nProxy-Authorization: Basic ZXhndWFyZGlhbjpmdXp6LXRva2Vu\r\n\r\n")
put("http_request", "connect", "CONNECT [2001:db8::1]:443 HTTP/1.1\r\nHost: [2001:db8::1]:443\r\n\r\n")
put("http_request", "chunked", "POST http://a.test/up HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: transfer-encoding\r\n\r\n5;x=y\r\nhello\r\n0\r\nTrailer: t\r\n\r\n")
put("http_request", "origin-form", "PUT /x HTTP/1.0\r\nContent-Length: 3\r\nContent-Length: 3\r\nTE: trailers\r\nUpgrade: h2c\r\n\r\nabc")
put("http_request", "smuggle", "POST http://a.test/ HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n")
put("http_request", "folded", "GET http://a.test/ HTTP/1.1\r\nX: a\r\n b\r\n\r\n")
put("http_response", "chunked-gzip", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nContent-Encoding: deflate\r\n\r\n" + gzip.compress(b"x"))
put("http_response", "length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close, Keep-Alive\r\nKeep-Alive: timeout=5\r\nProxy-Authenticate: Basic\r\n\r\nhello")
put("http_response", "no-reason", "HTTP/1.0 304\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n")
put("http_response", "br", "HTTP/1.1 206 Partial\r\nContent-Encoding: br;q=1, identity\r\n\r\n")

# ---- SOCKS5: greeting, optional RFC 1929, request ----
put("socks", "domain", b"\x05\x01\x00" + b"\x05\x01\x00\x03\x0bexample.com\x01\xbb")
put("socks", "userpass-v4", b"\x05\x02\x00\x02" + b"\x01\x0aexguardian\x03tok" + b"\x05\x01\x00\x01\xcb\x00\x71\x0a\x00\x50")
put("socks", "v6", b"\x05\x01\x00" + b"\x05\x01\x00\x04" + bytes(15) + b"\x01" + b"\x00\x16")
put("socks", "bad", b"\x05\x00" + b"\x05\x01\x00\x03\x00\x00\x50" + b"\x04\x01")

# ---- DNS queries ----
def query(name, qtype=1, qclass=1, flags=0x0100, qd=1, raw=None):
    q = struct.pack(">HHHHHH", 0x1234, flags, qd, 0, 0, 0)
    if raw is None:
        raw = b"".join(bytes([len(l)]) + l for l in name.encode().split(b".") if l) + b"\x00"
    return q + raw + struct.pack(">HH", qtype, qclass)
put("dns", "a", query("example.com"))
put("dns", "aaaa", query("api.example.org.", qtype=28))
put("dns", "root", query("", qtype=1))
put("dns", "compressed", query("", raw=b"\xc0\x0c"))
put("dns", "chaos", query("version.bind", qtype=16, qclass=3))
put("dns", "notify", query("a.b", flags=0x2000))
put("dns", "long", query(".".join(["a" * 63] * 4)))

# ---- content codings: "<Content-Encoding value>\n<body>" ----
put("content_decoding", "gzip", b"gzip\n" + gzip.compress(b"hello world " * 20))
put("content_decoding", "two-members", b"x-gzip\n" + gzip.compress(b"a") + gzip.compress(b"b"))
put("content_decoding", "deflate-zlib", b"deflate\n" + zlib.compress(b"zlib wrapped"))
put("content_decoding", "deflate-raw", b"Deflate\n" + zlib.compress(b"raw deflate")[2:-4])
put("content_decoding", "nested", b"deflate, gzip\n" + gzip.compress(zlib.compress(b"nested " * 50)))
put("content_decoding", "truncated", b"gzip\n" + gzip.compress(b"cut short")[:-6])

# ---- value masker: the first byte picks the pieces; the rest is an upstream's body ----
put("value_masker", "plain", b"\x01{\"token\": \"s3cr3t/V4lue+x&\\\"<\", \"short\": \"Qz9\"}")
put("value_masker", "json", b"\x02\"s3cr3t\\/V4lue\\u002bx\\u0026\\\"\\u003c\"")
put("value_masker", "percent-html", b"\x03s3cr3t%2FV4lue%2Bx%26%22%3c and s3cr3t&#47;V4lue&#x2b;x&amp;&quot;&lt;")
import base64
v = b's3cr3t/V4lue+x&"<'
put("value_masker", "base64", b"\x04" + base64.b64encode(v) + b" " + base64.urlsafe_b64encode(b"a" + v) + b"\n" + base64.b64encode(b"ab" + v))
put("value_masker", "hex", b"\x05" + v.hex().encode() + b" " + v.hex().upper().encode())

# ---- host names ----
for name, text in [("name", "Example.COM."), ("idna", "b\u00fccher.example.org"), ("v4-short", "127.1"),
                   ("v4-hex", "0x7f.0.0.1"), ("v4-int", "2130706433"), ("v6", "[::ffff:203.0.113.5]"),
                   ("cidr", "203.0.113.0/24"), ("zone", "fe80::1%eth0"), ("port", "api.test:8443"),
                   ("sub", "a.b.example.org"), ("bad", "a..b")]:
    put("host", name, text)

# ---- exguardian serve: control-plane bodies, as the e2b SDK (tests/e2b/sdk_basic.mjs) sends them ----
put("create_request", "sdk-create", '{"templateID":"base","metadata":{"suite":"t1","role":"main"},'
    '"envVars":{"FROM_CREATE":"created-env"},"timeout":300,"secure":true,"allow_internet_access":false,"autoPause":false}')
put("create_request", "network", '{"templateID":"web","timeout":60,"allow_internet_access":true,'
    '"network":{"allowOut":["api.example.com","*.github.com"],"denyOut":["0.0.0.0/0"],"allowPublicTraffic":false,'
    '"rules":{"api.example.com":[{"transform":{"headers":{"Authorization":"Bearer s3cr3t-token","X-Team":"blue"}}},'
    '{"transform":{"headers":{"authorization":"Bearer other"}}}],"*.example.org":[{"transform":{"headers":{"X-Key":"abcd"}}}]}}}')
put("create_request", "unsupported", '{"templateID":"pinned","volumeMounts":[],"mcp":{"x":1},"network":{"rules":{"pinned.example":[]}}}')
put("create_request", "bad-values", '{"timeout":18446744073709551615,"envVars":{"1X":"a","A=B":"c"},"metadata":{"k":1},'
    '"network":{"allowOut":["10.0.0.0/8",""],"rules":{"*":[],".x":[{"transform":{"headers":{"Host":"x"}}}]}}}')
put("create_request", "network-update", '{"allowOut":["pypi.org","*.pythonhosted.org"],"denyOut":["0.0.0.0/0","10.0.0.0/8"],'
    '"allow_internet_access":true}')
put("create_request", "timeouts", '{"timeout":3600,"duration":1}')
put("create_request", "empty", "")

# ---- Connect-RPC: the first byte picks the Content-Type (low 3 bits) and the message limit (next 3) ----
def envelope(j, flags=0):
    b = j.encode()
    return bytes([flags]) + struct.pack(">I", len(b)) + b
put("connect_rpc", "start-stream", b"\x08" + envelope('{"process":{"cmd":"/bin/bash","args":["-l","-c","echo hi"],'
    '"envs":{"A":"1"},"cwd":"/home/user"},"stdin":true,"tag":"t1"}'))
put("connect_rpc", "unary-list", b"\x01" + b'{"path":"/home/user","depth":1}')
put("connect_rpc", "send-input", b"\x21" + b'{"process":{"pid":42},"input":{"stdin":"aGVsbG8K"}}')
put("connect_rpc", "client-stream", b"\x18" + envelope('{"process":{"pid":7}}') + envelope('{"input":{"pty":"bHMK"}}')
    + envelope('{"input":{"stdin":"-_8"}}'))
put("connect_rpc", "flagged", b"\x10" + envelope("{}", 2) + envelope("{}"))
put("connect_rpc", "empty-unary", b"\x02")
put("connect_rpc", "timeout-digits", b"\x05" + b"15000")

# ---- envd uploads: "<Content-Type>\n<body>", as the SDK's files.write posts them ----
def form(boundary, parts, end=True):
    out = b""
    for name, filename, data in parts:
        out += b"--" + boundary + b"\r\nContent-Disposition: form-data; name=\"" + name + b"\""
        if filename is not None:
            out += b"; filename=\"" + filename + b"\""
        out += b"\r\nContent-Type: application/octet-stream\r\n\r\n" + data + b"\r\n"
    return out + (b"--" + boundary + b"--\r\n" if end else b"")
b = b"----formdata-undici-0123456789"
put("multipart", "one-file", b"multipart/form-data; boundary=" + b + b"\n" + form(b, [(b"file", b"notes/a.txt", b"hello file")]))
put("multipart", "files", b"multipart/form-data; boundary=\"x y\"\n"
    + form(b"x y", [(b"file", b"/home/user/a", b"\x00\xff\r\n--x"), (b"other", None, b"skip"), (b"file", b"b;c", b"")]))
put("multipart", "unterminated", b"multipart/form-data; charset=utf-8; boundary=zz\n" + form(b"zz", [(b"file", b"f", b"data")], end=False))
put("multipart", "no-file-part", b"multipart/form-data;boundary=q\n--q\r\nContent-Disposition: form-data; filename=\"x\"; name=file2\r\n\r\nv\r\n--q--")

# ---- exguardian serve's files: the first byte picks the tenants (even) or the templates (odd) file ----
key = "sha256:" + "ab" * 32
put("serve_config", "tenants", '\x00{"tenants":[{"id":"acme","keys":["%s"],"quota":{"sandboxes":10,"memoryMB":8192,'
    '"cpus":8,"maxTimeoutSeconds":3600}},{"id":"beta.2","keys":["sha256:%s"]}]}' % (key, "0" * 64))
put("serve_config", "tenants-bad", '\x00{"tenants":[{"id":"a b","keys":["plain"],"quota":{"sandboxes":-1,"cpus":1e400}}]}')
put("serve_config", "templates", '\x01{"templates":{"py":{"layer":"container","rootfs":"/srv/py","allowDomains":["pypi.org"],'
    '"memoryMB":1024,"cpus":2,"pids":512},"pinned":{"policy":"/etc/exguardian/p.json"},"base":{"cpus":0.5}}}')
put("serve_config", "templates-bad", '\x01{"templates":{"":{},"x":{"layer":"vm","rootfs":"rel","allowRoot":true}}}')

# ---- exguardian mcp: JSON-RPC lines as the MCP TypeScript SDK writes them ----
init = ('{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},'
        '"clientInfo":{"name":"exguardian-test","version":"1.0.0"}}}')
initialized = '{"jsonrpc":"2.0","method":"notifications/initialized"}'
listing = '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}'
run = ('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_command","arguments":'
       '{"sandbox_id":"sb1","command":"echo hi","timeout_seconds":5},"_meta":{"progressToken":2}}}')
write = ('{"jsonrpc":"2.0","id":"w","method":"tools/call","params":{"name":"write_file","arguments":'
         '{"sandbox_id":"sb1","path":"a.bin","content":"AAEC/w==","encoding":"base64","mode":"0644"}}}')
cancel = '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2,"reason":"timeout"}}'
for name, line in [("initialize", init), ("initialized", initialized), ("tools-list", listing), ("call", run),
                   ("cancelled", cancel), ("response", '{"jsonrpc":"2.0","id":5,"result":{}}'),
                   ("batch", "[" + listing + "]"), ("bad-id", '{"jsonrpc":"2.0","id":1.5,"method":"ping"}'),
                   ("crlf", '{"jsonrpc":"2.0","id":"p","method":"ping"}\r')]:
    put("mcp_jsonrpc", name, line)
put("mcp_session", "sdk-session", "\x00" + "\n".join([init, initialized, listing, run, write, cancel,
    '{"jsonrpc":"2.0","id":3,"method":"ping"}', "", "not json", '{"jsonrpc":"2.0","id":4,"method":"nope"}']) + "\n")
put("mcp_session", "duplicate-ids", "\x02" + "\n".join([init, run, run, cancel, run,
    '{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"start_command","arguments":{"sandbox_id":"s","argv":[""]}}}']))
put("mcp_session", "bad-calls", "\x07" + "\n".join([
    '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"no_such_tool"}}',
    '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"sandbox_id":"s","path":"x","length":-1}}}',
    '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"write_file","arguments":{"sandbox_id":"s","path":"x","content":"%%","encoding":"base64"}}}',
    '{"jsonrpc":"2.0","id":4,"method":"initialize","params":[]}']))
# mcp_tools: the first byte picks the tool (its index in the catalog: 0 create_sandbox, 1 run_command,
# 2 start_command, 3 read_output, 4 read_file, 5 write_file, ...), the rest is the arguments.
put("mcp_tools", "create", '\x00{"layer":"container","template":"py","allow_domains":["pypi.org"],"memory_mb":1024,"cpus":1.5,"pids":64,"timeout_seconds":600}')
put("mcp_tools", "run-argv", '\x01{"sandbox_id":"sb1","argv":["python3","-c","print(1)"],"env":{"A":"1"},"cwd":"src","stdin":"x","max_output_bytes":100}')
put("mcp_tools", "start-shell", '\x02{"sandbox_id":"sb1","command":"npm start","env":{"A=B":"x"}}')
put("mcp_tools", "read", '\x04{"sandbox_id":"sb1","path":"a.txt","offset":9223372036854775807,"length":1048576,"encoding":"base64"}')
put("mcp_tools", "write", '\x05{"sandbox_id":"sb1","path":"x.sh","content":"#!/bin/sh\\n","mode":"0755","make_parents":true}')
put("mcp_tools", "write-base64", '\x05{"sandbox_id":"sb1","path":"x.bin","content":"-_8","encoding":"base64","mode":"17777"}')
put("mcp_tools", "utf8-edges", b"\x06\xed\xa0\x80 \xc0\xaf \xf4\x90\x80\x80 \xe2\x82\xac")
