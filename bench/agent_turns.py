#!/usr/bin/env python3
"""An agent's request stream for bench/agents.sh (issue 45).

serve PORT CERT KEY: a TLS origin on 127.0.0.1:PORT answering every POST with a
streamed Messages API answer (server-sent events: 60 text deltas of ~40 bytes,
as a model's answer arrives).

bench TURNS RUNS CA PROXY PLACEHOLDER KEY: RUNS conversations direct (with KEY)
and RUNS through PROXY (with PLACEHOLDER, the proxy puts KEY in), interleaved
run by run. A conversation is TURNS turns on one kept-alive connection, as
Claude Code makes them: the JSON body carries the whole conversation so far
(a system prompt, each answer, each tool's output of ~2 KiB), so it grows turn
by turn; every answer is read to its end. Prints JSON: the medians in ms and
their ratio (proxy / direct).
"""
import http.server
import json
import socket
import socketserver
import ssl
import statistics
import sys
import time

import requests
import urllib3.util.connection

EVENTS = 60


def answer():
    ev = [("message_start", {"message": {"id": "msg_b", "type": "message", "role": "assistant", "content": [],
                                         "model": "m", "usage": {"input_tokens": 1, "output_tokens": 1}}}),
          ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})]
    ev += [("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": "token %03d of the answer, " % i}})
           for i in range(EVENTS)]
    ev += [("content_block_stop", {"index": 0}), ("message_delta", {"delta": {"stop_reason": "end_turn"}}),
           ("message_stop", {})]
    return "".join("event: %s\ndata: %s\n\n" % (e, json.dumps(dict(d, type=e))) for e, d in ev).encode()


def serve(port, cert, key):
    out = answer()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def setup(self):
            super().setup()
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # (as nginx, envoy)

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(0, len(out), 1024):  # (as a stream arrives: in pieces)
                piece = out[i:i + 1024]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    srv = Server(("127.0.0.1", int(port)), Handler)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    srv.serve_forever()


# Every client socket with TCP_NODELAY, as Node's and Bun's (the CLIs') are: urllib3 sets it on a
# direct connection but not on its connection to a proxy, where the request's last TLS record then
# waited ~40 ms for a delayed ACK each turn (seen with strace on the proxy).
_create_connection = urllib3.util.connection.create_connection


def _create_nodelay(*a, **k):
    s = _create_connection(*a, **k)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


urllib3.util.connection.create_connection = _create_nodelay


def conversation(turns, ca, proxy, key):
    s = requests.Session()
    s.trust_env = False  # (else REQUESTS_CA_BUNDLE and *_PROXY from the environment win over these)
    s.verify = ca
    if proxy:
        s.proxies = {"https": proxy}
    s.headers.update({"x-api-key": key, "anthropic-version": "2023-06-01"})
    msgs = [{"role": "user", "content": "fix the failing test"}]
    system = "You are an agent. " * 500  # (~9 KiB, as a CLI's system prompt and tool list)
    up = down = 0
    t0 = time.perf_counter()
    for n in range(turns):
        body = json.dumps({"model": "m", "stream": True, "system": system, "messages": msgs}).encode()
        r = s.post("https://api.anthropic.com:8443/v1/messages", data=body,
                   headers={"content-type": "application/json"}, stream=True, timeout=30)
        text = b"".join(r.iter_content(4096))
        if r.status_code != 200 or not text.endswith(b"\n\n"):
            raise SystemExit("turn %d: status %d, %r" % (n, r.status_code, text[-200:]))
        up, down = up + len(body), down + len(text)
        msgs.append({"role": "assistant", "content": "ran a tool"})
        msgs.append({"role": "user", "content": [{"type": "tool_result", "content": "line of a tool's output\n" * 85}]})
    return (time.perf_counter() - t0) * 1000, up, down


def bench(turns, runs, ca, proxy, placeholder, key):
    turns, runs = int(turns), int(runs)
    conversation(2, ca, None, key)  # (warm-up)
    conversation(2, ca, proxy, placeholder)
    direct, via = [], []
    for _ in range(runs):
        d, up, down = conversation(turns, ca, None, key)
        p, _, _ = conversation(turns, ca, proxy, placeholder)
        direct.append(d)
        via.append(p)
    dm, pm = statistics.median(direct), statistics.median(via)
    print(json.dumps({"turns": turns, "runs": runs, "direct_ms": dm, "proxy_ms": pm, "ratio": pm / dm,
                      "bytes_up": up, "bytes_down": down, "direct_all_ms": direct, "proxy_all_ms": via}))


if __name__ == "__main__":
    {"serve": serve, "bench": bench}[sys.argv[1]](*sys.argv[2:])
