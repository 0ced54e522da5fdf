#!/usr/bin/env bash
# exguardian serve, process layer: what a sandbox costs in time and memory (issue 14).
#   EXG=build/exguardian bash bench/serve.sh [N] [CONCURRENCY] [IDLE]
# 1. create -> first output of /bin/echo -> kill, p50/p99 in ms, sequential (N cycles) and
#    CONCURRENCY clients at once (N cycles each... N in all), through raw HTTP (keep-alive, no
#    SDK) and through the `e2b` SDK from npm (e2b@2.51.0, installed into a temp dir; skipped
#    without node/npm or SDK=0); with the warm pool (serve's default, --warm WARM) and without
#    it (--warm 0: every create starts its sandbox).
# 1b. create -> first `runCode` result (`@e2b/code-interpreter`, template code-interpreter-v1) beside
#    create -> first command output (`e2b`, template base), p50/p95, CI_N cycles each (default 10;
#    0 skips), both with the warm pool on (--warm WARM for each template).
# 2. IDLE sandboxes created and held at once (default 500; 0 skips), then host memory per idle
#    sandbox: PSS (from /proc/PID/smaps_rollup) of every process the sandbox costs (its
#    supervisor with its proxy thread, its agent), the server's own growth, and the drop of
#    MemAvailable (which also counts the kernel's side: page tables, cgroups, namespaces).
# A server on 127.0.0.1 with a temp tenant and state dir; everything is removed at the end.
set -euo pipefail
EXG=$(realpath "${EXG:-build/exguardian}")
N=${1:-100}
C=${2:-16}
IDLE=${3:-500}
WARM=${WARM:-2}
THINK_MS=${THINK_MS:-20}  # between sequential cycles: a client's think time, in which the pool refills
SDK=${SDK:-1}
CI_N=${CI_N:-10}
E2B_VERSION=2.51.0
CI_VERSION=2.8.0  # @e2b/code-interpreter, as tests/integration/test_serve_code_interpreter.sh
W=$(mktemp -d /tmp/exg-serve-bench.XXXXXX)
SP=""
stop_server() {
    [ -n "$SP" ] || return 0
    kill "$SP" 2>/dev/null || true
    wait "$SP" 2>/dev/null || true
    SP=""
}
trap 'stop_server; rm -rf "$W"' EXIT
KEY=bench-$RANDOM$RANDOM
echo "{\"tenants\":[{\"id\":\"bench\",\"keys\":[\"$("$EXG" serve --hash-key "$KEY")\"],\"quota\":{\"sandboxes\":2000,\"memoryMB\":2000000,\"cpus\":2000,\"maxTimeoutSeconds\":86400}}]}" > "$W/tenants.json"
start_server() {  # extra serve options
    stop_server
    rm -rf "$W/state"
    "$EXG" serve --listen 127.0.0.1:0 --tenants "$W/tenants.json" --state-dir "$W/state" --max-sandboxes 2000 "$@" > "$W/log" 2>&1 &
    SP=$!
    for _ in $(seq 600); do grep -q 'listening on' "$W/log" && break; sleep 0.1; done
    PORT=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$W/log")
    [ -n "$PORT" ] || { echo "the server did not start:"; tail -5 "$W/log"; exit 1; }
    sleep 1  # the warm pool fills
}

cat > "$W/raw.py" <<'PY'
import http.client, json, sys, time, threading
port, key, n, c, label, think = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], int(sys.argv[6]) / 1000
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
        print(f'raw HTTP {label:>8} {name:>13}  {what:<29} p50 {pct(xs, 50):7.1f} ms  p99 {pct(xs, 99):7.1f} ms  (n={len(xs)})', flush=True)
conn = http.client.HTTPConnection('127.0.0.1', port)
cycle(conn)  # warm-up
seq = []
for _ in range(n):
    seq.append(cycle(conn))
    time.sleep(think)
report('sequential', seq)
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

cat > "$W/sdk.mjs" <<'JS'
// create -> first stdout of `echo hi` -> kill, through the unmodified SDK.
import { Sandbox } from 'e2b'
const n = Number(process.argv[2]), c = Number(process.argv[3]), label = process.argv[4], think = Number(process.argv[5])
async function cycle() {
  const t0 = performance.now()
  const sb = await Sandbox.create('base')
  const t1 = performance.now()
  let first = 0
  await sb.commands.run('/bin/echo hi', { onStdout: () => { if (!first) first = performance.now() } })
  await sb.kill()
  const t3 = performance.now()
  return [t1 - t0, first - t0, t3 - t0]
}
const pct = (xs, p) => { xs = [...xs].sort((a, b) => a - b); return xs[Math.min(xs.length - 1, Math.round(p / 100 * (xs.length - 1)))] }
function report(name, rs) {
  ['create', 'create->first output', 'create->first output->killed'].forEach((what, i) => {
    const xs = rs.map((r) => r[i])
    console.log(`e2b SDK  ${label.padStart(8)} ${name.padStart(13)}  ${what.padEnd(29)} p50 ${pct(xs, 50).toFixed(1).padStart(7)} ms  p99 ${pct(xs, 99).toFixed(1).padStart(7)} ms  (n=${xs.length})`)
  })
}
await cycle()
const seq = []
for (let i = 0; i < n; i++) { seq.push(await cycle()); await new Promise((r) => setTimeout(r, think)) }
report('sequential', seq)
const out = []
await Promise.all(Array.from({ length: c }, async () => { for (let i = 0; i < Math.max(1, Math.floor(n / c)); i++) out.push(await cycle()) }))
report(`${c} concurrent`, out)
JS

cat > "$W/first_result.mjs" <<'JS'
// create -> first runCode result (the code interpreter SDK) beside create -> first command output (the e2b SDK).
import { Sandbox as CodeSandbox } from '@e2b/code-interpreter'
import { Sandbox } from 'e2b'
const n = Number(process.argv[2])
const pct = (xs, p) => { xs = [...xs].sort((a, b) => a - b); return xs[Math.min(xs.length - 1, Math.round(p / 100 * (xs.length - 1)))] }
async function runCode() {
  const t0 = performance.now()
  const sb = await CodeSandbox.create({ timeoutMs: 120_000 })
  const e = await sb.runCode('1 + 1')
  const t1 = performance.now()
  if (e.text !== '2') throw new Error(`runCode: ${JSON.stringify(e)}`)
  await sb.kill()
  return t1 - t0
}
async function command() {
  const t0 = performance.now()
  const sb = await Sandbox.create('base')
  let first = 0
  await sb.commands.run('/bin/echo hi', { onStdout: () => { if (!first) first = performance.now() } })
  await sb.kill()
  return first - t0
}
for (const [what, fn] of [['create->first runCode result', runCode], ['create->first command output', command]]) {
  await fn()  // warm-up
  const xs = []
  for (let i = 0; i < n; i++) { xs.push(await fn()); await new Promise((r) => setTimeout(r, 200)) }  // the pool refills
  console.log(`SDKs  warm-pool    sequential  ${what.padEnd(29)} p50 ${pct(xs, 50).toFixed(1).padStart(7)} ms  p95 ${pct(xs, 95).toFixed(1).padStart(7)} ms  (n=${n})`)
}
JS

HAVE_SDK=0
if [ "$SDK" = 1 ] && command -v node >/dev/null && command -v npm >/dev/null; then
    mkdir -p "$W/node" && cp "$W/sdk.mjs" "$W/node/"
    cp "$W/first_result.mjs" "$W/node/"
    if (cd "$W/node" && npm install --no-save --no-audit --no-fund --loglevel=error "e2b@$E2B_VERSION" "@e2b/code-interpreter@$CI_VERSION" > "$W/npm.log" 2>&1); then HAVE_SDK=1
    else echo "# SDK part skipped: npm install e2b@$E2B_VERSION @e2b/code-interpreter@$CI_VERSION failed"; fi
fi
echo "# $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg) at start; N=$N, $C concurrent, ${THINK_MS} ms between sequential cycles"
# The yardstick of this moment on this host (other jobs share its CPUs): a plain fork+exec, no sandbox.
python3 - "$N" <<'PY'
import subprocess, sys, time
xs = []
for _ in range(int(sys.argv[1])):
    t = time.perf_counter(); subprocess.run(['/bin/echo', 'hi'], stdout=subprocess.DEVNULL); xs.append((time.perf_counter() - t) * 1e3)
xs.sort()
print(f'host, no sandbox: fork+exec+wait of /bin/echo                  p50 {xs[len(xs) // 2]:7.1f} ms  p99 {xs[min(len(xs) - 1, round(0.99 * (len(xs) - 1)))]:7.1f} ms  (n={len(xs)})')
PY
for mode in "warm pool:--warm $WARM" "no pool:--warm 0"; do
    label=${mode%%:*} opts=${mode#*:}
    # shellcheck disable=SC2086
    start_server $opts
    python3 "$W/raw.py" "$PORT" "$KEY" "$N" "$C" "${label/ /-}" "$THINK_MS"
    if [ "$HAVE_SDK" = 1 ]; then
        (cd "$W/node" && E2B_API_URL="http://127.0.0.1:$PORT" E2B_SANDBOX_URL="http://127.0.0.1:$PORT" E2B_API_KEY="$KEY" \
            node sdk.mjs "$N" "$C" "${label/ /-}" "$THINK_MS")
    fi
done

if [ "$HAVE_SDK" = 1 ] && [ "$CI_N" -gt 0 ]; then
    start_server --warm "$WARM" --warm "code-interpreter-v1=$WARM"
    (cd "$W/node" && E2B_API_URL="http://127.0.0.1:$PORT" E2B_SANDBOX_URL="http://127.0.0.1:$PORT" E2B_API_KEY="$KEY" node first_result.mjs "$CI_N")
fi

[ "$IDLE" -gt 0 ] || exit 0
start_server --warm 0
mem_avail() { sed -n 's/^MemAvailable: *\([0-9]*\) kB/\1/p' /proc/meminfo; }
pss_of() { sed -n 's/^Pss: *\([0-9]*\) kB/\1/p' "/proc/$1/smaps_rollup" 2>/dev/null || echo 0; }
avail0=$(mem_avail)
server0=$(pss_of "$SP")
python3 - "$PORT" "$KEY" "$IDLE" > "$W/idle.out" <<'PY'
import http.client, json, sys, time, threading
port, key, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
ok, lock, t0 = [0], threading.Lock(), time.time()
def worker(k):
    conn = http.client.HTTPConnection('127.0.0.1', port, timeout=120)
    for _ in range(k):
        conn.request('POST', '/sandboxes', json.dumps({'templateID': 'base', 'timeout': 3600}), {'X-API-KEY': key, 'Content-Type': 'application/json'})
        r = conn.getresponse(); b = r.read()
        if r.status != 201:
            print('refused:', r.status, b[:200].decode(errors='replace')); return
        with lock: ok[0] += 1
ts = [threading.Thread(target=worker, args=(n // 4 + (1 if i < n % 4 else 0),)) for i in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
print(f'created {ok[0]} in {time.time() - t0:.1f} s')
PY
cat "$W/idle.out"
sleep 2  # settle
python3 - "$W/state" "$SP" "$server0" "$avail0" "$(mem_avail)" <<'PY'
import collections, glob, os, sys
state, server, server0, avail0, avail1 = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
children = collections.defaultdict(list)
for p in os.listdir('/proc'):
    if not p.isdigit(): continue
    try:
        s = open(f'/proc/{p}/stat').read()
        children[int(s[s.rfind(')') + 2:].split()[1])].append(int(p))
    except OSError: pass
def rollup(pid):
    out = {}
    try:
        for l in open(f'/proc/{pid}/smaps_rollup'):
            k, _, v = l.partition(':')
            if v.strip().endswith('kB'): out[k] = int(v.split()[0])
    except OSError: pass
    return out
tot, n, tasks, kinds = 0, 0, 0, collections.Counter()
for f in glob.glob(state + '/sandboxes/*/supervisor.pid'):
    sup = int(open(f).read())
    todo = [sup]
    while todo:
        p = todo.pop(); todo += children.get(p, [])
        r = rollup(p)
        tot += r.get('Pss', 0); tasks += len(os.listdir(f'/proc/{p}/task')) if os.path.exists(f'/proc/{p}/task') else 0
        kinds['supervisor (with its proxy thread)' if p == sup else 'agent (pid 1) and below'] += r.get('Pss', 0)
    n += 1
srv = rollup(server).get('Pss', 0)
print(f'idle sandboxes held at once: {n} ({tasks} tasks: supervisor + proxy thread + agent each)')
print(f'PSS per idle sandbox: {tot / max(n, 1) / 1024:.2f} MiB (' + ', '.join(f'{k} {v / max(n, 1):.0f} KiB' for k, v in kinds.items()) + ')')
print(f'server PSS {srv / 1024:.1f} MiB: {(srv - server0) / max(n, 1):.0f} KiB more per sandbox')
print(f'MemAvailable dropped {(avail0 - avail1) / 1024:.0f} MiB: {(avail0 - avail1) / max(n, 1) / 1024:.2f} MiB per sandbox, kernel side included')
PY
t0=$(date +%s%N)
stop_server
echo "SIGTERM of the server with them: all ended in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
