#!/usr/bin/env bash
# Syscall-heavy work bare, under exguardian and under bwrap, side by side in one hyperfine run:
# `find /usr -type f | wc -l`, a stat/open/read loop over /usr/include (bench/statloop.c), and
# Unix socket calls the supervisor judges (bench/sockloop.c: connect, sendmsg, sendto; each a
# round trip through it under exguardian, so that one is expected above 1x: it says the price).
# Writes bench/results/syscalls-*.json and prints the ratios to bare. Target: exguardian <= 1.05 x bare.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
EXG=$(readlink -f "${EXG:-$root/build/exguardian}")
results=$root/bench/results
runs=${RUNS:-15}
mkdir -p "$results"
for tool in hyperfine bwrap gcc python3; do
    command -v "$tool" >/dev/null || { echo "bench: $tool is missing (make deps installs it)" >&2; exit 1; }
done
ws=$(mktemp -d /tmp/exg-bench.XXXXXX)
trap 'rm -rf --one-file-system "$ws"' EXIT
cd "$ws"
gcc -O2 -o statloop "$root/bench/statloop.c"
gcc -O2 -o sockloop "$root/bench/sockloop.c"

bwrap="bwrap --unshare-all --die-with-parent --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --bind $ws $ws --chdir $ws"
exg="$EXG run --"

bench() {  # NAME COMMAND...
    local name=$1 cmd=$2
    hyperfine --warmup 2 --runs "$runs" --export-json "$results/syscalls-$name.json" \
        --command-name bare "$cmd" \
        --command-name exguardian "$exg $cmd" \
        --command-name bwrap "$bwrap $cmd" >/dev/null
    python3 - "$results/syscalls-$name.json" "$name" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
med = {r["command"]: r["median"] * 1000 for r in d["results"]}
print(f"| {sys.argv[2]} | {med['bare']:.1f} | {med['exguardian']:.1f} ({med['exguardian']/med['bare']:.3f}x) | {med['bwrap']:.1f} ({med['bwrap']/med['bare']:.3f}x) |")
PY
}
echo "| workload | bare median (ms) | exguardian (ms, x bare) | bwrap (ms, x bare) |"
echo "|---|---|---|---|"
bench find "bash -c 'find /usr -type f | wc -l'"
bench statloop "./statloop /usr/include 3"
bench sockloop "./sockloop 2000"
