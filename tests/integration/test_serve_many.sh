#!/usr/bin/env bash
# `exguardian serve` at scale (issue 14: "100 sandboxes at once, each running commands"): a
# real server on 127.0.0.1, 100 sandboxes created through the API (raw HTTP, 10 requests at a
# time), all alive at once; a command in each (its output, its exit code, the sandbox's own
# uid and network and pid namespaces: no two alike); then all killed, and nothing of them left
# on the host: no supervisor or sandbox process, no cgroup, no mount, no state directory, no
# temporary file. Then SIGTERM of the server ends its warm pool the same way.
source "$(dirname "$0")/lib.sh"

N=${EXG_SERVE_MANY:-100}
for tool in curl jq python3; do
    command -v "$tool" >/dev/null || { fail "$tool is not installed (make deps)"; finish; }
done
STATE=$T/state
KEY=many-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
cat > "$T/tenants.json" <<EOF
{"tenants": [{"id": "many", "keys": ["$("$EXG" serve --hash-key "$KEY")"],
              "quota": {"sandboxes": $N, "memoryMB": $((N * 512)), "cpus": $N, "maxTimeoutSeconds": 3600}}]}
EOF
tmp_before=$(host_tmp_listing)
"$EXG" serve --listen 127.0.0.1:0 --tenants "$T/tenants.json" --state-dir "$STATE" --warm 4 > "$T/serve.log" 2>&1 &
SERVER_PID=$!
track_bg "$SERVER_PID"
wait_for 10 grep -qE 'listening on 127.0.0.1:|cgroup limits: cannot be enforced' "$T/serve.log"
# A user without cgroups it may write: the server refuses to start (fail closed; test_serve.sh
# covers --no-cgroup-limits, the explicit weaker mode). The 100 need limits: they run as root.
if [ "$EXG_AS" = user ] && grep -q 'cgroup limits: cannot be enforced' "$T/serve.log"; then
    wait "$SERVER_PID"; st=$?
    [ "$st" = 125 ] && ok "as $EXG_AS without writable cgroups: serve refuses to start (125) with the reason" ||
        fail "as $EXG_AS without writable cgroups: serve exited $st"
    skip "100 sandboxes need cgroups this user may write (the check runs as root)"
    finish
fi
grep -q 'listening on 127.0.0.1:' "$T/serve.log" || { fail "the server did not start"; sed 's/^/#   /' "$T/serve.log" | tail; finish; }
PORT=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$T/serve.log" | head -1)

# One create first: a user without cgroups it may write gets every create refused (fail closed).
code=$(curl -s -o "$T/first.json" -w '%{http_code}' -X POST "http://127.0.0.1:$PORT/sandboxes" -H "X-API-KEY: $KEY" \
    -H 'Content-Type: application/json' -d '{"templateID": "base"}')
if [ "$EXG_AS" = user ] && [ "$code" = 500 ] && grep -q 'cgroup limits: cannot be enforced' "$T/first.json"; then
    ok "as $EXG_AS without writable cgroups: create refused with the reason (fail closed)"
    skip "100 sandboxes need cgroups this user may write (the check runs as root)"
    kill -TERM "$SERVER_PID"; wait "$SERVER_PID"; st=$?
    [ "$st" = 0 ] && [ -z "$(ls -A "$STATE/sandboxes")" ] && ok "SIGTERM: exit 0, nothing left" || fail "SIGTERM: exit $st, left: $(ls -A "$STATE/sandboxes")"
    finish
fi
[ "$code" = 201 ] || { fail "the first create: HTTP $code: $(head -c 300 "$T/first.json")"; finish; }
curl -s -o /dev/null -X DELETE "http://127.0.0.1:$PORT/sandboxes/$(jq -r .sandboxID "$T/first.json")" -H "X-API-KEY: $KEY"

# The driver: create all, list, run one command in each, then kill all; what it saw as JSON.
python3 - "$PORT" "$KEY" "$N" "$STATE" > "$T/many.json" 2> "$T/many.err" <<'PY'
import http.client, json, os, sys, threading, time
port, key, n, state = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
BATCH = 10
def batched(fn, items):
    out, lock = {}, threading.Lock()
    def worker(chunk):
        conn = http.client.HTTPConnection('127.0.0.1', port, timeout=120)
        for it in chunk:
            try: r = fn(conn, it)
            except Exception as e: r = {'error': repr(e)}; conn = http.client.HTTPConnection('127.0.0.1', port, timeout=120)
            with lock: out[it] = r
    ts = [threading.Thread(target=worker, args=(items[k::BATCH],)) for k in range(BATCH)]
    [t.start() for t in ts]; [t.join() for t in ts]
    return out
def create(conn, i):
    body = {'templateID': 'base', 'timeout': 600, 'metadata': {'i': str(i)}, 'envVars': {'N': str(i)}}
    conn.request('POST', '/sandboxes', json.dumps(body), {'X-API-KEY': key, 'Content-Type': 'application/json'})
    r = conn.getresponse(); b = r.read()
    return {'status': r.status, 'body': json.loads(b) if b else None}
def run(conn, i):
    sb = sandboxes[i]
    h = {'E2b-Sandbox-Id': sb['sandboxID'], 'X-Access-Token': sb['envdAccessToken'], 'Content-Type': 'application/connect+json'}
    # One refused egress attempt each, for its audit line (the proxy is 127.0.0.1:3128 inside).
    script = ('echo "out $N $(id -u) $(readlink /proc/self/ns/net) $(readlink /proc/self/ns/pid)"; echo "err $N" >&2; '
              'exec 3<>/dev/tcp/127.0.0.1/3128 && printf "CONNECT refused-$N.example:443 HTTP/1.1\\r\\n\\r\\n" >&3 && head -c 12 <&3 >/dev/null; '
              'exit $((N % 7))')
    msg = json.dumps({'process': {'cmd': '/bin/bash', 'args': ['-c', script]}}).encode()
    conn.request('POST', '/process.Process/Start', b'\0' + len(msg).to_bytes(4, 'big') + msg, h)
    r = conn.getresponse()
    import base64
    out, err, end = b'', b'', None
    while True:
        head = r.read(5)
        if len(head) < 5: break
        m = json.loads(r.read(int.from_bytes(head[1:5], 'big')))
        if head[0] & 2: break
        d = m.get('event', {}).get('data', {})
        out += base64.b64decode(d.get('stdout', '')); err += base64.b64decode(d.get('stderr', ''))
        if 'end' in m.get('event', {}): end = m['event']['end']
    r.read()
    return {'status': r.status, 'stdout': out.decode(), 'stderr': err.decode(), 'end': end}
def kill(conn, i):
    conn.request('DELETE', '/sandboxes/' + sandboxes[i]['sandboxID'], headers={'X-API-KEY': key})
    r = conn.getresponse(); r.read()
    return {'status': r.status}
t0 = time.time()
created = batched(create, list(range(n)))
t1 = time.time()
sandboxes = {i: c['body'] for i, c in created.items() if c.get('status') == 201}
# All alive at once: the list, and a supervisor for each in the state dir.
conn = http.client.HTTPConnection('127.0.0.1', port)
conn.request('GET', '/v2/sandboxes?limit=1000', headers={'X-API-KEY': key})
listed = json.loads(conn.getresponse().read())
supervisors = {}
for i, sb in sandboxes.items():
    try: supervisors[i] = int(open(f"{state}/sandboxes/{sb['sandboxID']}/supervisor.pid").read())
    except OSError: pass
alive = sum(1 for p in supervisors.values() if os.path.exists(f'/proc/{p}'))
ran = batched(run, sorted(sandboxes))
t2 = time.time()
# Each sandbox's audit log: whose lines they are (a warm one learnt its tenant when it was claimed).
audit = {}
for i, sb in sandboxes.items():
    try: audit[i] = [json.loads(l) for l in open(f"{state}/sandboxes/{sb['sandboxID']}/audit.jsonl")]
    except (OSError, ValueError) as e: audit[i] = repr(e)
# The tenant cannot be changed afterwards, not even by the socket's owner: a warm
# sandbox was told once (EALREADY), a cold one had it from the start (ENOTSUP).
import subprocess
retag = {}
for i, sb in sandboxes.items():
    p = subprocess.run([os.environ['EXG'], 'session-client', '--control', f"unix:{state}/sandboxes/{sb['sandboxID']}/control.sock", 'call',
                        json.dumps({'op': 'audit_tags', 'tags': {'tenant': 'evil'}})], capture_output=True, text=True)
    try: retag[i] = json.loads(p.stdout.splitlines()[0]).get('errno', 0) if p.returncode == 1 else 'exit %d' % p.returncode
    except (ValueError, IndexError): retag[i] = p.stdout + p.stderr
killed = batched(kill, sorted(sandboxes))
t3 = time.time()
json.dump({'created': {str(k): v['status'] for k, v in created.items()}, 'errors': [v for v in created.values() if v.get('status') != 201][:3],
           'ids': {str(k): v['sandboxID'] for k, v in sandboxes.items()}, 'listed': len(listed),
           'supervisors': {str(k): v for k, v in supervisors.items()}, 'alive': alive,
           'ran': {str(k): v for k, v in ran.items()}, 'audit': {str(k): v for k, v in audit.items()},
           'retag': [retag[i] for i in sorted(retag)], 'killed': {str(k): v['status'] for k, v in killed.items()},
           'seconds': {'create': round(t1 - t0, 2), 'run': round(t2 - t1, 2), 'kill': round(t3 - t2, 2)}}, sys.stdout)
PY
[ -s "$T/many.json" ] || { fail "the driver failed: $(tail -5 "$T/many.err")"; finish; }
J=$T/many.json
note "seconds: $(jq -c .seconds "$J")"
got=$(jq '[.created[] | select(. == 201)] | length' "$J")
[ "$got" = "$N" ] && ok "$N sandboxes created through the API (10 requests at a time)" || { fail "created $got of $N: $(jq -c .errors "$J")"; }
[ "$(jq .listed "$J")" = "$N" ] && ok "all $N listed at once" || fail "listed $(jq .listed "$J") of $N"
[ "$(jq .alive "$J")" = "$N" ] && ok "all $N supervisors alive at once" || fail "$(jq .alive "$J") of $N supervisors alive"
# Each command's own output and exit code, from its own sandbox.
# (jq's own failure is a failure too: a check that cannot run must not pass.)
if bad=$(jq -r --argjson n "$N" '. as $d | [range(0; $n) | tostring as $i | $d.ran[$i] as $r |
        select($r == null or $r.end == null or ($r.stdout | startswith("out " + $i + " ") | not) or $r.stderr != ("err " + $i + "\n")
               or ($r.end.exitCode // 0) != (($i | tonumber) % 7)) | $i] | join(" ")' "$J"); then
    [ -z "$bad" ] && ok "every sandbox ran its command: its own stdout, stderr and exit code" ||
        { fail "wrong output or exit code in sandboxes: ${bad:0:200}"; note "first: $(jq -c --arg i "${bad%% *}" '.ran[$i]' "$J")"; }
else
    fail "the output check itself failed (jq)"
fi
for field in 3:uid 4:network 5:pid; do
    k=${field%%:*} what=${field#*:}
    distinct=$(jq -r '.ran[] | .stdout' "$J" | awk -v k="$k" '{print $k}' | sort -u | grep -c .)
    [ "$distinct" = "$N" ] && ok "$N sandboxes, $N different ${what}s (no two share one)" || fail "$what: $distinct different among $N"
done
# Every audit line of every sandbox names its tenant and its E2B id, the warm pool's too.
if bad=$(jq -r '. as $d | [.audit | to_entries[] | .key as $i | select((.value | type) != "array"
            or ([.value[] | select(.event == "egress" and .decision == "refused" and (.host | startswith("refused-")))] | length) != 1
            or ([.value[] | select(.tenant != "many" or .e2b_sandbox != $d.ids[$i])] | length) != 0) | $i] | join(" ")' "$J"); then
    [ -z "$bad" ] && ok "every sandbox's audit log has its refusal, every line with tenant \"many\" and its own id (warm ones too)" ||
        { fail "audit logs wrong in sandboxes: ${bad:0:200}"; note "first: $(jq -c --arg i "${bad%% *}" '.audit[$i]' "$J" | head -c 400)"; }
else
    fail "the audit check itself failed (jq)"
fi
# EALREADY 114 (warm, told once), ENOTSUP 95 (cold, tagged from the start); never accepted.
if jq -e --argjson n "$N" '(.retag | length) == $n and all(.retag[]; . == 114 or . == 95) and any(.retag[]; . == 114)' "$J" >/dev/null; then
    ok "no sandbox's tenant can be told again: $(jq '[.retag[] | select(. == 114)] | length' "$J") warm ones EALREADY, the others ENOTSUP"
else
    fail "audit_tags a second time: $(jq -c '.retag | group_by(.) | map({(.[0]|tostring): length}) | add' "$J")"
fi
[ "$(jq -r '.ran[] | .stdout' "$J" | awk '$3 == 0' | grep -c .)" = 0 ] && ok "no command ran as root" || fail "a command ran as uid 0"
[ "$(jq '[.killed[] | select(. == 204)] | length' "$J")" = "$N" ] && ok "all $N killed (204 each)" || fail "kill: $(jq -c '[.killed[]] | group_by(.) | map({(.[0]|tostring): length}) | add' "$J")"

# Nothing of the 100 is left: processes, cgroups, mounts, state, temporary files.
sup_pids=$(jq -r '.supervisors[]' "$J")
ids=$(jq -r '.ids[]' "$J")
left_procs=""
for p in $sup_pids; do [ -e "/proc/$p" ] && left_procs+="$p "; done
for id in $ids; do left_procs+=$(pgrep -f -- "sandboxes/$id/" | tr '\n' ' '); done
[ -z "$left_procs" ] && ok "no supervisor or sandbox process of them is left" || fail "processes left: ${left_procs:0:200}"
left_cg=""
for p in $sup_pids; do left_cg+=$(find /sys/fs/cgroup -maxdepth 4 -type d -name "exg-$p-*" 2>/dev/null | head -3); done
[ -z "$left_cg" ] && ok "no cgroup of them is left" || fail "cgroups left: ${left_cg:0:300}"
left_dirs=""
for id in $ids; do [ -e "$STATE/sandboxes/$id" ] && left_dirs+="$id "; done
[ -z "$left_dirs" ] && ok "no state directory of them is left" || fail "state left: ${left_dirs:0:200}"
grep -F -e "$STATE" /proc/self/mountinfo > "$T/mounts.left" || true
[ ! -s "$T/mounts.left" ] && ok "no mount of theirs is left on the host" || fail "mounts left: $(head -3 "$T/mounts.left")"
api_left=$(curl -s "http://127.0.0.1:$PORT/v2/sandboxes" -H "X-API-KEY: $KEY" | jq length)
[ "$api_left" = 0 ] && ok "the server lists none" || fail "the server still lists $api_left"

# The warm pool ends with the server.
pool_pids=$(cat "$STATE"/sandboxes/*/supervisor.pid 2>/dev/null | tr '\n' ' ')
[ -n "$pool_pids" ] && ok "the warm pool holds sandboxes ($(wc -w <<<"$pool_pids"))" || fail "no warm pool sandbox in $STATE"
kill -TERM "$SERVER_PID"; wait "$SERVER_PID"; st=$?
left=""
for p in $pool_pids; do [ -e "/proc/$p" ] && left+="$p "; done
[ "$st" = 0 ] && [ -z "$(ls -A "$STATE/sandboxes")" ] && [ -z "$left" ] && ok "SIGTERM: exit 0, the warm pool ended, nothing left" ||
    fail "SIGTERM: exit $st, left: $(ls -A "$STATE/sandboxes") $left"
# What a supervisor makes there is named after its pid (exguardian-<pid>-<id>) or is a
# quarantine; other entries that look like ours are other tests' on this host (shown).
pid_re=$(printf '%s\n' $sup_pids $pool_pids | paste -sd'|')
tmp_left=$(host_tmp_left "$tmp_before" | tr ' ' '\n' | grep -E -e "-($pid_re)-" -e quarantine | tr '\n' ' ' | sed 's/ *$//')
[ -z "$tmp_left" ] && ok "no temporary file is left in /tmp, /var/tmp, /dev/shm" || fail "left: $tmp_left"
finish
