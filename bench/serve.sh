#!/usr/bin/env bash
# exguardian serve through raw HTTP (keep-alive, no SDK): create -> first output of a command
# -> kill, sequential and concurrent, p50/p99 in ms. A server on 127.0.0.1 with a temp tenant.
#   EXG=build/exguardian bash bench/serve.sh [N] [CONCURRENCY]
set -euo pipefail
EXG=${EXG:-build/exguardian}
N=${1:-30}
C=${2:-8}
W=$(mktemp -d /tmp/exg-serve-bench.XXXXXX)
trap '[ -n "${SP:-}" ] && kill "$SP" 2>/dev/null; wait 2>/dev/null; rm -rf "$W"' EXIT
KEY=bench-$RANDOM$RANDOM
echo "{\"tenants\":[{\"id\":\"bench\",\"keys\":[\"$("$EXG" serve --hash-key "$KEY")\"],\"quota\":{\"sandboxes\":64,\"memoryMB\":65536,\"cpus\":64}}]}" > "$W/tenants.json"
"$EXG" serve --listen 127.0.0.1:0 --tenants "$W/tenants.json" --state-dir "$W/state" > "$W/log" 2>&1 &
SP=$!
for _ in $(seq 50); do grep -q 'listening on' "$W/log" && break; sleep 0.1; done
PORT=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$W/log")
python3 - "$PORT" "$KEY" "$N" "$C" <<'PY'
import http.client, json, sys, time, threading
port, key, n, c = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def env(msg):
    b = json.dumps(msg).encode()
    return b'\0' + len(b).to_bytes(4, 'big') + b
def cycle(conn):
    t0 = time.perf_counter()
    conn.request('POST', '/sandboxes', json.dumps({'templateID': 'base'}), {'X-API-KEY': key, 'Content-Type': 'application/json'})
    r = conn.getresponse(); sb = json.loads(r.read())
    t1 = time.perf_counter()
    h = {'E2b-Sandbox-Id': sb['sandboxID'], 'X-Access-Token': sb['envdAccessToken'], 'Content-Type': 'application/connect+json'}
    conn.request('POST', '/process.Process/Start', env({'process': {'cmd': '/bin/echo', 'args': ['hi']}}), h)
    r = conn.getresponse()
    first = None
    while True:
        head = r.read(5)
        if len(head) < 5: break
        m = json.loads(r.read(int.from_bytes(head[1:5], 'big')))
        if first is None and 'data' in m.get('event', {}): first = time.perf_counter()
        if head[0] & 2: break
    r.read()
    conn.request('DELETE', '/sandboxes/' + sb['sandboxID'], headers={'X-API-KEY': key})
    conn.getresponse().read()
    t3 = time.perf_counter()
    return (t1 - t0) * 1e3, (first - t0) * 1e3, (t3 - t0) * 1e3
def pct(xs, p):
    xs = sorted(xs); return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]
def report(name, rs):
    for i, what in enumerate(['create', 'create->first output', 'create->first output->killed']):
        xs = [r[i] for r in rs]
        print(f'{name:>14}  {what:<30} p50 {pct(xs, 50):7.1f} ms   p99 {pct(xs, 99):7.1f} ms   (n={len(xs)})')
conn = http.client.HTTPConnection('127.0.0.1', port)
cycle(conn)  # warm-up
report('sequential', [cycle(conn) for _ in range(n)])
out, lock = [], threading.Lock()
def worker(k):
    cc = http.client.HTTPConnection('127.0.0.1', port)
    for _ in range(k):
        r = cycle(cc)
        with lock: out.append(r)
ts = [threading.Thread(target=worker, args=(max(1, n // c),)) for _ in range(c)]
[t.start() for t in ts]; [t.join() for t in ts]
report(f'{c} concurrent', out)
PY
