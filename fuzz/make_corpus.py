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
