#!/usr/bin/env bash
# Cost of the live-mode sweep, the plan's protect walk, the set-id check at exit and the overlay
# diff/apply on a 100,000-file workspace (issue 8).
# Builds nothing: runs exg_sweep_bench from the build directory (configured with libbenchmark-dev
# installed, then `cmake --build BUILD --target exg_sweep_bench`) and prints a markdown table of
# medians (and min, max) over the repetitions. SWEEP_JSON=FILE keeps the raw Google Benchmark JSON.
# Usage: BUILD=build bash bench/sweep.sh        (as root, like docs/benchmarks.md's figures: only root can
#        plant the whiteout, a 0/0 char device, in the hand-made upper layer)
# Knobs: EXG_SWB_REPS (15), EXG_SWB_DIRS (1000) x EXG_SWB_FILES (100), EXG_SWB_TMP (/var/tmp).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$root/build}
bin=$BUILD/exg_sweep_bench
json=${SWEEP_JSON:-}
if [ -z "$json" ]; then
    json=$(mktemp /tmp/exg-sweep-bench.XXXXXX.json)
    trap 'rm -f "$json"' EXIT
fi

command -v jq >/dev/null || { echo "bench: jq is missing" >&2; exit 1; }
[ -x "$bin" ] || { echo "bench: no $bin (install libbenchmark-dev, re-run cmake, build target exg_sweep_bench)" >&2; exit 1; }
[ "$(id -u)" = 0 ] || echo "bench: not root: the upper layers get no whiteout" >&2

"$bin" --benchmark_format=json --benchmark_out="$json" --benchmark_out_format=json >/dev/null

errors=$(jq -r '.benchmarks[] | select(.error_occurred == true) | "\(.run_name): \(.error_message)"' "$json" | sort -u)
[ -z "$errors" ] || { echo "bench: failed runs:"$'\n'"$errors" >&2; exit 1; }

reps=$(jq -r '[.benchmarks[] | .repetitions][0]' "$json")
echo "| Operation | Workspace | Changed files | Median | Min | Max | Result |"
echo "|---|---|---:|---:|---:|---:|---|"
jq -r '
  def ms: if . >= 100 then "\(. | round) ms" elif . >= 10 then "\(. * 10 | round / 10) ms"
          else "\(. * 100 | round / 100) ms" end;
  def toms: if .time_unit == "ms" then .real_time elif .time_unit == "us" then .real_time / 1000
            elif .time_unit == "ns" then .real_time / 1e6 else .real_time * 1000 end;
  [.benchmarks[] | select(.run_type == "aggregate")] | group_by(.run_name) | sort_by(.[0].family_index)[]
  | (map({(.aggregate_name): .}) | add) as $a
  | ($a.median.run_name | split("/")) as $p
  | ($p[0]) as $op
  | ($p[1] | sub("files$"; "") | tonumber) as $files
  | ([$p[] | select(startswith("changed:")) | sub("changed:"; "")][0] // "-") as $changed
  | ([$p[] | select(startswith("threads:")) | sub("threads:"; "")][0] // "") as $threads
  | (if $op == "snapshot_tree" then "at most \($threads) thread(s): \($a.median.dirs | floor) directories listed"
     elif $op == "protect_walk" then "at most \($threads) thread(s): \($a.median.found | floor) protected paths"
     elif $op == "setid_sweep" then "at most \($threads) thread(s): \($a.median.checked | floor) files checked"
     elif $op == "sweep" then "+1 planted .envrc in a new folder: \($a.median.planted_found | floor) quarantined"
     else "\($a.median.created | floor) created, \($a.median.modified | floor) modified, \($a.median.deleted | floor) deleted (whiteout), \($a.median.quarantined | floor) planted quarantined" end) as $res
  | "| `\($op)` | \($files / 1000 | floor)k files | \($changed) | \($a.median | toms | ms) | \($a.min | toms | ms) | \($a.max | toms | ms) | \($res) |"
' "$json"
echo
echo "Medians of $reps runs (one timed call each, set-up and restore untimed), warm caches; $(nproc) CPUs, $(uname -r), $(df -T "${EXG_SWB_TMP:-/var/tmp}" | awk 'NR==2{print $2}') under ${EXG_SWB_TMP:-/var/tmp}."
