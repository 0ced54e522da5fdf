#!/usr/bin/env bash
# Egress proxy benchmark: one CONNECT tunnel's bulk throughput, the latency a proxy adds to a new
# connection, and the memory of 1,000 idle tunnels; direct vs exguardian proxy vs tinyproxy,
# squid and srt's proxy, all in a private network + mount namespace (nothing leaves the machine).
#
#   sudo EXG=/path/to/exguardian bash bench/proxy.sh
#
# Environment: EXG (binary, default build/exguardian), RUNS (bulk downloads each, best of, 3),
# CONNS (latency connections, 300), TUNNELS (idle tunnels, 1000), SIZE_MIB (bulk file, 1024),
# CLIENT_CPU / ORIGIN_CPU (default 0) and PROXY_CPU (default 1), ONLY ("exguardian squid" etc.),
# PERF=1 (perf record the exguardian proxy during its bulk and latency runs into $PERF_DIR),
# JSON_OUT (default bench/results/proxy.json), SRT_DIR (where @anthropic-ai/sandbox-runtime is npm-installed; a temp dir by default).
# Writes bench/results/proxy.json and prints a markdown table.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
here=$root/bench/proxy
SRT_VERSION=0.0.83

if [ "${EXG_BENCH_INNER:-}" != 1 ]; then
    [ "$(id -u)" = 0 ] || { echo "bench: run as root (it makes a network namespace)" >&2; exit 1; }
    EXG=$(readlink -f "${EXG:-$root/build/exguardian}")
    [ -x "$EXG" ] || { echo "bench: no exguardian binary at $EXG (cmake --build ... --target exguardian)" >&2; exit 1; }
    # Debian packages: install only what is missing.
    need=()
    command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
    command -v tinyproxy >/dev/null || need+=(tinyproxy)
    command -v squid >/dev/null || [ -x /usr/sbin/squid ] || need+=(squid)
    command -v curl >/dev/null || need+=(curl)
    command -v python3 >/dev/null || need+=(python3)
    command -v ip >/dev/null || need+=(iproute2)
    command -v node >/dev/null || need+=(nodejs npm)
    if [ ${#need[@]} -gt 0 ]; then
        echo "bench: installing ${need[*]}" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >/dev/null ||
            { apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" >/dev/null; }
    fi
    # Package installs may have started host daemons; the benchmark uses its own instances only.
    cleanup_srt=
    if [ -z "${SRT_DIR:-}" ]; then
        SRT_DIR=$(mktemp -d /tmp/exg-bench-srt.XXXXXX)
        cleanup_srt=$SRT_DIR
    fi
    if [ ! -f "$SRT_DIR/node_modules/@anthropic-ai/sandbox-runtime/package.json" ]; then
        echo "bench: npm install @anthropic-ai/sandbox-runtime@$SRT_VERSION into $SRT_DIR" >&2
        npm install --silent --no-audit --no-fund --prefix "$SRT_DIR" "@anthropic-ai/sandbox-runtime@$SRT_VERSION" >/dev/null 2>&1 ||
            echo "bench: npm install failed; srt is skipped" >&2
    fi
    rc=0
    EXG_BENCH_INNER=1 EXG=$EXG SRT_DIR=$SRT_DIR \
        unshare --net --mount --propagation private bash "$0" "$@" || rc=$?
    [ -n "$cleanup_srt" ] && rm -rf --one-file-system "$cleanup_srt"
    exit $rc
fi

# ---- Inside the private world. ----
RUNS=${RUNS:-3}
CONNS=${CONNS:-300}
TUNNELS=${TUNNELS:-1000}
SIZE_MIB=${SIZE_MIB:-1024}
CLIENT_CPU=${CLIENT_CPU:-0}
ORIGIN_CPU=${ORIGIN_CPU:-0}
PROXY_CPU=${PROXY_CPU:-1}
ONLY=${ONLY:-direct exguardian tinyproxy squid srt}
PERF=${PERF:-0}
ORIGIN_IP=203.0.113.10
ORIGIN=origin.test
results=$root/bench/results
json=${JSON_OUT:-$results/proxy.json}
mkdir -p "$results"

T=$(mktemp -d /tmp/exg-bench-proxy.XXXXXX)
chmod 755 "$T"
PERF_DIR=${PERF_DIR:-$T/perf}
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    sleep 0.3
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    rm -f "$T/www/big"
    if [ "$PERF" = 1 ]; then echo "bench: perf data kept in $PERF_DIR (remove $T when done)" >&2; else rm -rf --one-file-system "$T"; fi
}
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# shellcheck source=proxy/origin.sh
source "$here/origin.sh"
origin_up

# ---- Proxies. Each start_* sets PROXY_PID and PROXY_ADDR. ----
start_exguardian() {
    cat >"$T/exg-policy.json" <<EOF
{"network": {"allowedDomains": ["$ORIGIN"], "deniedDomains": [], "allowedCidrs": ["$ORIGIN_IP/32"]}}
EOF
    PROXY_ADDR=127.0.0.1:3128
    echo bench-token-0123456789 >"$T/exg-token"; chmod 600 "$T/exg-token"
    export EXG_PROXY_AUTH="exguardian:bench-token-0123456789"
    tokargs=(--token-file "$T/exg-token"); [ "${EXG_OLD:-}" = 1 ] && tokargs=()
    taskset -c "$PROXY_CPU" "$EXG" proxy "${tokargs[@]}" --listen "$PROXY_ADDR" --policy "$T/exg-policy.json" 2>"$T/exguardian.log" &
    PROXY_PID=$!
}
start_tinyproxy() {
    unset EXG_PROXY_AUTH
    # No Allow/ConnectPort lines: every client and every CONNECT port is allowed.
    mkdir -p "$T/tinyproxy"
    chmod 777 "$T/tinyproxy"
    cat >"$T/tinyproxy/tinyproxy.conf" <<EOF
User nobody
Group nogroup
Port 8888
Listen 127.0.0.1
Timeout 600
MaxClients 4096
LogLevel Critical
LogFile "$T/tinyproxy/tinyproxy.log"
PidFile "$T/tinyproxy/tinyproxy.pid"
DisableViaHeader Yes
EOF
    PROXY_ADDR=127.0.0.1:8888
    taskset -c "$PROXY_CPU" tinyproxy -d -c "$T/tinyproxy/tinyproxy.conf" 2>"$T/tinyproxy/stderr" &
    PROXY_PID=$!
}
start_squid() {
    mkdir -p "$T/squid"
    chmod 777 "$T/squid"
    cat >"$T/squid/squid.conf" <<EOF
http_port 127.0.0.1:3129
http_access allow all
cache deny all
cache_mem 8 MB
access_log none
cache_store_log none
cache_log $T/squid/cache.log
pid_filename $T/squid/squid.pid
coredump_dir $T/squid
max_filedescriptors 16384
dns_nameservers 127.0.0.1
hosts_file /etc/hosts
shutdown_lifetime 1 seconds
read_timeout 10 minutes
client_lifetime 1 hour
EOF
    PROXY_ADDR=127.0.0.1:3129
    taskset -c "$PROXY_CPU" squid -N -f "$T/squid/squid.conf" 2>"$T/squid/stderr" &
    PROXY_PID=$!
}
start_srt() {
    PROXY_ADDR=127.0.0.1:3130
    SRT_DIR=$SRT_DIR taskset -c "$PROXY_CPU" node "$here/srt-proxy.mjs" 3130 "$ORIGIN" "$ORIGIN_IP" 2>"$T/srt.log" &
    PROXY_PID=$!
}
stop_proxy() {
    unset EXG_PROXY_AUTH
    kill "$PROXY_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$PROXY_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$PROXY_PID" 2>/dev/null || true
    wait "$PROXY_PID" 2>/dev/null || true
}
wait_proxy() {
    for _ in $(seq 200); do
        curl -sf -o /dev/null -p -x "http://$PROXY_ADDR" ${EXG_PROXY_AUTH:+--proxy-user "$EXG_PROXY_AUTH"} "http://$ORIGIN/tiny" && return 0
        kill -0 "$PROXY_PID" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}

version_of() {
    case $1 in
        direct) nginx -v 2>&1 | sed 's/.*: //' ;;
        exguardian) echo "$("$EXG" --version 2>/dev/null | head -1) ($(cd "$root" && git describe --always --dirty 2>/dev/null || echo '?'))" ;;
        tinyproxy) tinyproxy -v 2>&1 | head -1 ;;
        squid) squid -v | head -1 | sed 's/.*Version /squid /' ;;
        srt) echo "sandbox-runtime $SRT_VERSION (createHttpProxyServer), node $(node --version)" ;;
    esac
}

# ---- Measurements. ----
bulk() {   # best-of-RUNS bytes/s of the big file; $1 = proxy address or "direct"
    local best=0 s args=()
    [ "$1" = direct ] || args=(-p -x "http://$1" ${EXG_PROXY_AUTH:+--proxy-user "$EXG_PROXY_AUTH"})
    for _ in $(seq "$RUNS"); do
        s=$(taskset -c "$CLIENT_CPU" curl -sS --max-time 120 -o /dev/null -w '%{speed_download}' "${args[@]}" "http://$ORIGIN/big")
        echo "    bulk run: $(python3 -c "print(f'{$s/1e6:.0f}')") MB/s" >&2
        best=$(python3 -c "print(max($best, $s))")
    done
    echo "$best"
}
latency() { taskset -c "$CLIENT_CPU" python3 "$here/client.py" latency "$1" "$CONNS"; }
idle() { taskset -c "$CLIENT_CPU" python3 "$here/client.py" idle "$1" "$TUNNELS" "$2"; }
perf_on() {
    [ "$PERF" = 1 ] && [ "$1" = exguardian ] || return 0
    mkdir -p "$PERF_DIR"
    perf record -q -F 2999 -g -p "$PROXY_PID" -o "$PERF_DIR/$2.data" >/dev/null 2>&1 &
    PERF_PID=$!
    sleep 0.5
}
perf_off() {
    [ "$PERF" = 1 ] && [ "$1" = exguardian ] || return 0
    kill -INT "$PERF_PID" 2>/dev/null || true
    wait "$PERF_PID" 2>/dev/null || true
}

echo "bench: kernel $(uname -r), $(nproc) CPUs; client CPU $CLIENT_CPU, origin CPU $ORIGIN_CPU, proxy CPU $PROXY_CPU;" \
    "$SIZE_MIB MiB bulk x$RUNS, $CONNS connections, $TUNNELS idle tunnels" >&2
raw=$T/raw
mkdir -p "$raw"
for name in $ONLY; do
    echo "bench: $name" >&2
    version_of "$name" >"$raw/$name.version"
    if [ "$name" = direct ]; then
        bulk direct >"$raw/$name.bulk"
        latency direct >"$raw/$name.lat"
        continue
    fi
    if [ "$name" = srt ] && [ ! -f "$SRT_DIR/node_modules/@anthropic-ai/sandbox-runtime/package.json" ]; then
        echo "npm install of @anthropic-ai/sandbox-runtime@$SRT_VERSION failed" >"$raw/$name.skip"
        continue
    fi
    "start_$name"
    if ! wait_proxy; then
        echo "bench: $name did not come up; skipped" >&2
        echo "did not start or refused the tunnel" >"$raw/$name.skip"
        stop_proxy
        continue
    fi
    # Memory first, on a fresh proxy that has served only the warm-up request.
    idle "$PROXY_ADDR" "$PROXY_PID" >"$raw/$name.idle" || echo '{}' >"$raw/$name.idle"
    sleep 1
    perf_on "$name" bulk
    bulk "$PROXY_ADDR" >"$raw/$name.bulk"
    perf_off "$name"
    perf_on "$name" latency
    latency "$PROXY_ADDR" >"$raw/$name.lat"
    perf_off "$name"
    stop_proxy
done

python3 - "$raw" "$json" "$ONLY" "$CLIENT_CPU" "$ORIGIN_CPU" "$PROXY_CPU" "$SIZE_MIB" "$CONNS" "$TUNNELS" <<'EOF'
import json, os, platform, statistics, sys
raw, out, only, ccpu, ocpu, pcpu, size_mib, conns, tunnels = sys.argv[1:]
names = only.split()

def load(name, ext):
    p = os.path.join(raw, f"{name}.{ext}")
    if not os.path.exists(p):
        return None
    s = open(p).read().strip()
    return s or None

def pct(xs, q):
    xs = sorted(xs)
    k = (len(xs) - 1) * q
    f = int(k)
    return xs[f] + (xs[min(f + 1, len(xs) - 1)] - xs[f]) * (k - f)

res = {}
for n in names:
    r = {"version": load(n, "version")}
    skip = load(n, "skip")
    if skip:
        r["skipped"] = skip
        res[n] = r
        continue
    b = load(n, "bulk")
    if b:
        r["bulk_MBps"] = float(b) / 1e6
    lat = load(n, "lat")
    if lat:
        us = json.loads(lat)["us"]
        r["latency_us"] = {"p50": pct(us, .5), "p90": pct(us, .9), "mean": statistics.mean(us), "n": len(us)}
    idle = load(n, "idle")
    if idle:
        i = json.loads(idle)
        if i:
            r["idle"] = i
            if i.get("opened"):
                r["KiB_per_tunnel"] = (i["held_rss_kib"] - i["idle_rss_kib"]) / i["opened"]
    res[n] = r

d = res.get("direct", {})
e = res.get("exguardian", {})
for n, r in res.items():
    if "latency_us" in r and "latency_us" in d:
        r["added_us"] = {q: r["latency_us"][q] - d["latency_us"][q] for q in ("p50", "p90")}
    if "bulk_MBps" in r:
        if d.get("bulk_MBps"):
            r["bulk_x_direct"] = r["bulk_MBps"] / d["bulk_MBps"]
        if e.get("bulk_MBps"):
            r["bulk_x_exguardian"] = r["bulk_MBps"] / e["bulk_MBps"]
    if "added_us" in r and "added_us" in e and e["added_us"]["p50"] > 0:
        r["added_p50_x_exguardian"] = r["added_us"]["p50"] / e["added_us"]["p50"]
    if "KiB_per_tunnel" in r and e.get("KiB_per_tunnel"):
        r["KiB_per_tunnel_x_exguardian"] = r["KiB_per_tunnel"] / e["KiB_per_tunnel"]

targets = {}
if "bulk_x_direct" in e:
    targets["bulk_ge_0.9x_direct"] = e["bulk_x_direct"] >= 0.9
if "added_us" in e:
    targets["added_p50_le_150us"] = e["added_us"]["p50"] <= 150
doc = {
    "kernel": platform.release(), "cpus": os.cpu_count(),
    "pinning": {"client": ccpu, "origin": ocpu, "proxy": pcpu},
    "bulk_file_MiB": int(size_mib), "latency_connections": int(conns), "idle_tunnels": int(tunnels),
    "units": {"bulk": "MB/s = 1e6 bytes/s, best of runs", "latency": "microseconds per new connection + one small GET",
              "memory": "summed VmRSS of the proxy process tree, KiB"},
    "results": res, "targets": targets,
}
json.dump(doc, open(out, "w"), indent=2)

def f(x, fmt):
    return "-" if x is None else format(x, fmt)

print(f"\nkernel {doc['kernel']}, {doc['cpus']} CPUs; client CPU {ccpu}, origin CPU {ocpu}, proxy CPU {pcpu}")
print("| | version | bulk MB/s | x direct | x exg | p50 us | p90 us | added p50 us | added p90 us | added p50 x exg | tunnels held | RSS idle KiB | KiB/tunnel | x exg |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for n, r in res.items():
    if "skipped" in r:
        print(f"| {n} | {r['version']} | skipped: {r['skipped']} |" + " |" * 11)
        continue
    lat, add, idle = r.get("latency_us", {}), r.get("added_us", {}), r.get("idle", {})
    held = f"{idle['opened']}/{idle['requested']}" if idle else "-"
    if idle and idle.get("errors"):
        held += " (" + ", ".join(f"{k}: {v}" for k, v in idle["errors"].items()) + ")"
    print(f"| {n} | {r['version']} | {f(r.get('bulk_MBps'), '.0f')} | {f(r.get('bulk_x_direct'), '.2f')} | "
          f"{f(r.get('bulk_x_exguardian'), '.2f')} | {f(lat.get('p50'), '.0f')} | {f(lat.get('p90'), '.0f')} | "
          f"{f(add.get('p50'), '.0f')} | {f(add.get('p90'), '.0f')} | {f(r.get('added_p50_x_exguardian'), '.2f')} | "
          f"{held} | {f(idle.get('idle_rss_kib'), 'd')} | {f(r.get('KiB_per_tunnel'), '.1f')} | "
          f"{f(r.get('KiB_per_tunnel_x_exguardian'), '.2f')} |")
for k, v in targets.items():
    print(f"target {k}: {'met' if v else 'MISSED'}")
EOF
echo "bench: wrote $json" >&2
