#!/usr/bin/env bash
# Start-up cost: `exguardian run -- true` against bubblewrap doing comparable isolation, side by
# side in one hyperfine run. Writes bench/results/startup.json and prints medians and the ratio.
# Usage: EXG=build/exguardian bash bench/startup.sh       (as root, like the README's figures)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
EXG=${EXG:-$root/build/exguardian}
EXG=$(readlink -f "$EXG")
results=$root/bench/results
json=$results/startup.json
warmup=${WARMUP:-5}
runs=${RUNS:-50}

for tool in hyperfine bwrap python3; do
    command -v "$tool" >/dev/null || { echo "bench: $tool is missing (make deps installs it)" >&2; exit 1; }
done
[ -x "$EXG" ] || { echo "bench: no exguardian binary at $EXG (run make build)" >&2; exit 1; }
mkdir -p "$results"

# A throwaway workspace: exguardian makes its cwd the writable workspace.
ws=$(mktemp -d /tmp/exg-bench.XXXXXX)
trap 'rm -rf --one-file-system "$ws"' EXIT
cd "$ws"

exg_cmd="$EXG run -- true"
bwrap_cmd="bwrap --unshare-all --die-with-parent --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp true"

# Both commands must work before they are timed.
$exg_cmd || { echo "bench: '$exg_cmd' failed" >&2; exit 1; }
$bwrap_cmd || { echo "bench: '$bwrap_cmd' failed" >&2; exit 1; }

hyperfine --shell=none --warmup "$warmup" --runs "$runs" --export-json "$json" \
    --command-name exguardian "$exg_cmd" \
    --command-name bwrap "$bwrap_cmd"

python3 - "$json" <<'EOF'
import json, platform, sys
data = json.load(open(sys.argv[1]))
med = {r["command"]: r["median"] * 1000 for r in data["results"]}
mean = {r["command"]: r["mean"] * 1000 for r in data["results"]}
sd = {r["command"]: r["stddev"] * 1000 for r in data["results"]}
ratio = med["exguardian"] / med["bwrap"]
print()
print(f"kernel {platform.release()}, {len(data['results'][0]['times'])} runs each")
print("| command | median (ms) | mean ± sd (ms) |")
print("|---|---|---|")
for name in ("exguardian", "bwrap"):
    print(f"| {name} | {med[name]:.2f} | {mean[name]:.2f} ± {sd[name]:.2f} |")
print(f"ratio exguardian/bwrap (median): {ratio:.2f} (target <= 1.0)")
EOF
