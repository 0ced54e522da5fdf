#!/usr/bin/env python3
"""One command in a sandbox of `exguardian serve`, through envd's process.Process/Start
(Connect's server stream, as E2B's SDK sends it): URL SANDBOX-ID TOKEN SHELL-LINE [USER].
Prints what the command wrote (stdout and stderr, in the order the events came), then a line
"#status N" (its exit code; "none" when the stream ended without one). EXG_ENVD_TIMEOUT: seconds
a read may wait (default 60; a command under a TCG guest may want more)."""
import base64
import http.client
import json
import os
import sys
import urllib.parse

url, sid, tok, line = sys.argv[1:5]
user = sys.argv[5] if len(sys.argv) > 5 else ""
u = urllib.parse.urlparse(url)
c = http.client.HTTPConnection(u.hostname, u.port, timeout=float(os.environ.get('EXG_ENVD_TIMEOUT', '60')))
b = json.dumps({'process': {'cmd': '/bin/bash', 'args': ['-c', line]}}).encode()
headers = {'E2b-Sandbox-Id': sid, 'X-Access-Token': tok, 'Content-Type': 'application/connect+json'}
if user:  # E2B's user (envd reads it from Basic authorization, without a password)
    headers['Authorization'] = 'Basic ' + base64.b64encode(user.encode() + b':').decode()
c.request('POST', '/process.Process/Start', b'\0' + len(b).to_bytes(4, 'big') + b, headers)
r = c.getresponse()
out, code = b'', 'none'
while True:
    h = r.read(5)
    if len(h) < 5:
        break
    m = json.loads(r.read(int.from_bytes(h[1:5], 'big')))
    ev = m.get('event', {})
    for v in ev.get('data', {}).values():
        out += base64.b64decode(v)
    if 'end' in ev:
        code = ev['end'].get('exitCode', 0)
    if h[0] & 2:
        break
sys.stdout.write(out.decode(errors='replace') + '\n#status ' + str(code) + '\n')
