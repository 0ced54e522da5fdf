#!/usr/bin/env bash
# Transparent egress against the explicit proxy, inside one sandbox (target: transparent within
# 5% of the explicit path's throughput and added latency, or better): the same client in the same `exguardian run`, once through the proxy
# variables' CONNECT tunnel (127.0.0.1:3128) and once ignoring them (curl --noproxy '*', a raw
# socket to the name), which the sandbox's resolver and nftables capture hand to the same proxy.
# Bulk: SIZE_MIB through one connection, best and median of RUNS, rounds alternating the two paths. Added
# latency: CONNS new connections + one small GET each (the transparent path includes the lookup
# the client makes of the name from the sandbox's resolver); the direct row (outside any sandbox)
# is the floor both are measured against. Everything runs in a private network + mount namespace
# (bench/proxy/origin.sh), nothing leaves the machine.
#
#   sudo EXG=/path/to/exguardian bash bench/transparent.sh
#
# Environment: EXG (default build/exguardian), RUNS (9), CONNS (300), SIZE_MIB (1024),
# CLIENT_CPU / ORIGIN_CPU (0), PROXY_CPU (1), JSON_OUT (bench/results/transparent.json).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
here=$root/bench/proxy

if [ "${EXG_BENCH_INNER:-}" != 1 ]; then
    [ "$(id -u)" = 0 ] || { echo "bench: run as root (it makes a network namespace)" >&2; exit 1; }
    EXG=$(readlink -f "${EXG:-$root/build/exguardian}")
    [ -x "$EXG" ] || { echo "bench: no exguardian binary at $EXG" >&2; exit 1; }
    command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] ||
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nginx-light >/dev/null
    EXG_BENCH_INNER=1 EXG=$EXG exec unshare --net --mount --propagation private bash "$0" "$@"
fi

# ---- Inside the private world. ----
RUNS=${RUNS:-9}
CONNS=${CONNS:-300}
SIZE_MIB=${SIZE_MIB:-1024}
CLIENT_CPU=${CLIENT_CPU:-0}
ORIGIN_CPU=${ORIGIN_CPU:-0}
PROXY_CPU=${PROXY_CPU:-1}
ORIGIN_IP=203.0.113.10
ORIGIN=origin.test
json=${JSON_OUT:-$root/bench/results/transparent.json}
mkdir -p "$(dirname "$json")"

T=$(mktemp -d /tmp/exg-bench-transparent.XXXXXX)
chmod 755 "$T"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    sleep 0.3
    for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done
    rm -rf --one-file-system "$T"
}
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# shellcheck source=proxy/origin.sh
source "$here/origin.sh"
origin_up

# The sandbox's workspace: the client and the script each round runs.
WS=$T/ws
mkdir -p "$WS"
cp "$here/client.py" "$WS/"
cat >"$T/policy.json" <<EOF
{"network": {"allowedDomains": ["$ORIGIN"], "deniedDomains": [], "allowedCidrs": ["$ORIGIN_IP/32"]}}
EOF
# round.sh MODE: one bulk download and the latency run on one path; prints two lines,
# "bulk BYTES_PER_S" and "lat {json}".
cat >"$WS/round.sh" <<EOF
set -e
if [ "\$1" = explicit ]; then curl_args=(-p); lat_to=127.0.0.1:3128; else curl_args=(--noproxy '*'); lat_to=direct; fi
echo "bulk \$(taskset -c $CLIENT_CPU curl -sS --max-time 120 -o /dev/null -w '%{speed_download}' "\${curl_args[@]}" http://$ORIGIN/big)"
echo "lat \$(taskset -c $CLIENT_CPU python3 client.py latency "\$lat_to" $CONNS)"
EOF

raw=$T/raw
mkdir -p "$raw"
echo "bench: kernel $(uname -r), $(nproc) CPUs; client CPU $CLIENT_CPU, origin CPU $ORIGIN_CPU, proxy CPU $PROXY_CPU;" \
    "$SIZE_MIB MiB bulk x$RUNS, $CONNS connections per path and round" >&2
echo "bench: direct (no sandbox)" >&2
(cd "$WS" && bash round.sh transparent-outside >"$raw/direct.0")
for i in $(seq "$RUNS"); do
    for mode in explicit transparent; do
        echo "bench: round $i, $mode" >&2
        (cd "$WS" && taskset -c "$PROXY_CPU" "$EXG" run --policy "$T/policy.json" -- bash round.sh "$mode" >"$raw/$mode.$i") ||
            { echo "bench: the $mode round failed:" >&2; cat "$raw/$mode.$i" >&2; exit 1; }
    done
done

python3 - "$raw" "$json" "$("$EXG" --version | head -1) ($(cd "$root" && git describe --always --dirty 2>/dev/null || echo '?'))" \
    "$SIZE_MIB" "$CONNS" "$RUNS" <<'EOF'
import glob, json, os, platform, statistics, sys
raw, out, version, size_mib, conns, runs = sys.argv[1:]

def pct(xs, q):
    xs = sorted(xs)
    k = (len(xs) - 1) * q
    f = int(k)
    return xs[f] + (xs[min(f + 1, len(xs) - 1)] - xs[f]) * (k - f)

res = {}
for name in ("direct", "explicit", "transparent"):
    bulk, us = [], []
    for p in sorted(glob.glob(os.path.join(raw, name + ".*"))):
        for line in open(p):
            k, _, v = line.strip().partition(" ")
            if k == "bulk":
                bulk.append(float(v))
            elif k == "lat":
                us += json.loads(v)["us"]
    res[name] = {"bulk_MBps": max(bulk) / 1e6, "bulk_median_MBps": statistics.median(bulk) / 1e6,
                 "latency_us": {"p50": pct(us, .5), "p90": pct(us, .9), "n": len(us)}}
d, e, t = res["direct"], res["explicit"], res["transparent"]
for r in (e, t):
    r["added_us"] = {q: r["latency_us"][q] - d["latency_us"][q] for q in ("p50", "p90")}
ratios = {"bulk_transparent_x_explicit": t["bulk_MBps"] / e["bulk_MBps"],
          "bulk_median_transparent_x_explicit": t["bulk_median_MBps"] / e["bulk_median_MBps"],
          "added_p50_transparent_x_explicit": t["added_us"]["p50"] / e["added_us"]["p50"] if e["added_us"]["p50"] > 0 else None}
# The target is that capture costs nothing over the explicit path: transparent's throughput at
# least 0.95x and its added latency at most 1.05x the explicit proxy's (a transparent path that
# is faster, having no CONNECT exchange, meets it).
# Throughput is judged on the medians of the rounds: one round's best moves by +-10% on a small
# VM, the median by about 1%.
targets = {"bulk_median_ge_0.95x_explicit": ratios["bulk_median_transparent_x_explicit"] >= 0.95}
if ratios["added_p50_transparent_x_explicit"] is not None:
    targets["added_p50_le_1.05x_explicit"] = ratios["added_p50_transparent_x_explicit"] <= 1.05
doc = {"kernel": platform.release(), "cpus": os.cpu_count(), "exguardian": version, "bulk_file_MiB": int(size_mib),
       "latency_connections_per_round": int(conns), "rounds": int(runs), "results": res, "ratios": ratios, "targets": targets}
json.dump(doc, open(out, "w"), indent=2)
print(f"\nkernel {doc['kernel']}, {doc['cpus']} CPUs; {version}")
print("| path | bulk MB/s (best) | bulk MB/s (median) | p50 us | p90 us | added p50 us | added p90 us |")
print("|---|---|---|---|---|---|---|")
for n, r in res.items():
    a = r.get("added_us", {})
    print(f"| {n} | {r['bulk_MBps']:.0f} | {r['bulk_median_MBps']:.0f} | {r['latency_us']['p50']:.0f} | {r['latency_us']['p90']:.0f} | "
          f"{a.get('p50', 0):.0f} | {a.get('p90', 0):.0f} |")
for k, v in ratios.items():
    print(f"{k}: {'-' if v is None else format(v, '.3f')}")
for k, v in targets.items():
    print(f"target {k}: {'met' if v else 'MISSED'}")
EOF
echo "bench: wrote $json" >&2
