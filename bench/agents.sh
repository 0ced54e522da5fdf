#!/usr/bin/env bash
# An agent CLI run whole inside with its key outside (issue 45), two figures, each a ratio:
# 1. What the proxy's secret injection costs an agent's request stream against going direct:
#    a conversation of TURNS turns as Claude Code makes them (bench/agent_turns.py: one kept-alive
#    HTTPS connection, a POST /v1/messages whose JSON body grows by the last turn's answer and a
#    tool's output, x-api-key on every request, the answer streamed as server-sent events) to a
#    local TLS origin (own test CA) for api.anthropic.com, direct and through the standalone
#    `exguardian proxy` with the claude profile's secret (intercepted: TLS to both sides, the
#    placeholder swapped in x-api-key, the body scanned, the answer masked). Interleaved, run by
#    run; in a private network + mount namespace.
# 2. Start-up: `exguardian agent claude -- --version` against `claude --version` unsandboxed
#    (Claude Code from npm, pinned; installed into a cache of this script's).
# Writes bench/results/agents.json and prints the table. The client sockets have TCP_NODELAY as
# the CLIs' (Node, Bun) do: without it, urllib3's connection to the proxy made every turn wait
# ~40 ms on a delayed ACK (a client artifact, not the proxy's; see agent_turns.py).
#   sudo EXG=build/exguardian bash bench/agents.sh
# Environment: EXG, TURNS (per conversation, 40), RUNS (conversations each way, 7), START_RUNS (30).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
CLAUDE_CODE=@anthropic-ai/claude-code@2.1.332
if [ "${EXG_BENCH_INNER:-}" != 1 ]; then
    [ "$(id -u)" = 0 ] || { echo "bench: run as root (it makes a network namespace)" >&2; exit 1; }
    EXG=$(readlink -f "${EXG:-$root/build/exguardian}")
    [ -x "$EXG" ] || { echo "bench: no exguardian binary at $EXG" >&2; exit 1; }
    /usr/bin/python3 -c 'import requests' 2>/dev/null || { echo "bench: python3-requests is missing (make deps)" >&2; exit 1; }
    # Claude Code for the start-up row, from npm (needs the network: before the namespace).
    npm_dir=${NPM_CACHE:-/var/cache/exguardian-bench/npm}/${CLAUDE_CODE//\//+}
    if [ ! -x "$npm_dir/node_modules/.bin/claude" ]; then
        mkdir -p "$npm_dir"
        (cd "$npm_dir" && npm install --no-save --no-audit --no-fund --loglevel=error "$CLAUDE_CODE") >&2 ||
            { echo "bench: npm install $CLAUDE_CODE failed" >&2; exit 1; }
    fi
    D=$(mktemp -d /tmp/exg-bench-agents.XXXXXX)
    chmod 755 "$D"
    trap 'rm -rf "$D"' EXIT
    EXG=$EXG D=$D CLAUDE_BIN="$npm_dir/node_modules/.bin" EXG_BENCH_INNER=1 unshare -n -m --propagation private bash "$0"
    exit $?
fi

cd "$D"
TURNS=${TURNS:-40} RUNS=${RUNS:-7} START_RUNS=${START_RUNS:-30}
results=$root/bench/results
mkdir -p "$results"
ip link set lo up
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -out ca.pem -days 2 \
    -subj "/CN=bench origin CA" 2>/dev/null
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout leaf.key -out leaf.csr \
    -subj /CN=api.anthropic.com 2>/dev/null
printf 'subjectAltName=DNS:api.anthropic.com\nextendedKeyUsage=serverAuth\n' > leaf.ext
openssl x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile leaf.ext \
    -out leaf.pem 2>/dev/null
# The origin's CA joins this namespace's host trust store (what the proxy verifies against).
cat /etc/ssl/certs/ca-certificates.crt ca.pem > bundle.crt
mount --bind bundle.crt /etc/ssl/certs/ca-certificates.crt
printf '127.0.0.1 localhost\n127.0.0.1 api.anthropic.com\n' > hosts
mount --bind hosts /etc/hosts

python3 "$root/bench/agent_turns.py" serve 8443 leaf.pem leaf.key 2>origin.err &
origin=$!
# The claude profile's API-key secret, as the sandbox's proxy holds it.
python3 - "$root/profiles/agents/claude.json" > policy.json <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
print(json.dumps({"network": {"allowedDomains": p["network"]["allowedDomains"], "allowedCidrs": ["127.0.0.1/32"]},
                  "secrets": [s for s in p["secrets"] if s["name"] == "ANTHROPIC_API_KEY"]}))
EOF
echo "bench-$RANDOM$RANDOM" > token
ANTHROPIC_API_KEY=sk-ant-api03-bench-0123456789 "$EXG" proxy --listen 127.0.0.1:3999 --policy policy.json \
    --token-file token --ca-cert-out pca.pem --placeholders-out ph 2>proxy.err &
proxy=$!
stop_all() { kill "$origin" "$proxy" 2>/dev/null || true; }
trap stop_all EXIT
for _ in $(seq 50); do [ -s ph ] && break; sleep 0.1; done
PH=$(sed -n 's/^ANTHROPIC_API_KEY=//p' ph)
[ -n "$PH" ] || { echo "bench: the proxy did not start: $(tail -3 proxy.err)" >&2; exit 1; }
cat ca.pem pca.pem > clientca.pem

python3 "$root/bench/agent_turns.py" bench "$TURNS" "$RUNS" clientca.pem \
    "http://exguardian:$(cat token)@127.0.0.1:3999" "$PH" sk-ant-api03-bench-0123456789 > stream.json

# Start-up: the real CLI's --version, sandboxed by its profile against unsandboxed.
mkdir -p ws home && cd ws
export HOME=$D/home ANTHROPIC_API_KEY=sk-ant-api03-bench-0123456789 PATH="$CLAUDE_BIN:$PATH"
EXGUARDIAN_AGENT_PROFILES=$root/profiles/agents python3 "$root/bench/interleave.py" --whole-tree --warmup 3 \
    --runs "$START_RUNS" --export-json "$D/start.json" \
    "claude --version" "claude --version" \
    "exguardian agent claude -- --version" "env EXGUARDIAN_AGENT_PROFILES=$root/profiles/agents $EXG agent claude -- --version"
cd "$D"

python3 - stream.json start.json "$results/agents.json" <<'EOF'
import json, os, platform, sys
stream, start = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
res = {r["command"]: r for r in start["results"]}
direct, sandboxed = res["claude --version"], res["exguardian agent claude -- --version"]
out = {"kernel": platform.release(), "load": os.getloadavg()[0], "stream": stream,
       "startup": {"direct_median_s": direct["median"], "agent_median_s": sandboxed["median"],
                   "ratio": sandboxed["median"] / direct["median"], "runs": start["runs"]}}
json.dump(out, open(sys.argv[3], "w"), indent=1)
s = stream
print(f"kernel {platform.release()}, load {os.getloadavg()[0]:.1f}")
print("| figure | direct | through the proxy, key injected | ratio |")
print("|---|---|---|---|")
print(f"| a {s['turns']}-turn conversation (median of {s['runs']}, ms) | {s['direct_ms']:.1f} | {s['proxy_ms']:.1f} | {s['ratio']:.2f} |")
print(f"| per turn (ms) | {s['direct_ms'] / s['turns']:.2f} | {s['proxy_ms'] / s['turns']:.2f} | |")
print(f"| start-up, claude --version (median of {start['runs']}, ms) | {direct['median'] * 1000:.1f} | "
      f"{sandboxed['median'] * 1000:.1f} (whole sandbox) | {out['startup']['ratio']:.2f} |")
print(f"bytes up per conversation: {s['bytes_up']}, down: {s['bytes_down']}")
EOF
