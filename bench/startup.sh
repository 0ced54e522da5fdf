#!/usr/bin/env bash
# Start-up cost: `exguardian run -- true` against bubblewrap doing comparable isolation, side by
# side, interleaved (bench/interleave.py: every round runs each command once, so the machine's
# load changes hit both alike). Writes bench/results/startup.json and prints medians, p90, CPU
# (user + system of the whole process tree, orphans included) and the ratio to bwrap per row.
# Usage: EXG=build/exguardian bash bench/startup.sh       (as root; as an ordinary user too)
#        EXG_BEFORE=/path/to/older/exguardian adds that binary as a row ("before").
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
EXG=${EXG:-$root/build/exguardian}
EXG=$(readlink -f "$EXG")
results=${RESULTS:-$root/bench/results}   # RESULTS=DIR: somewhere else (e.g. writable by an ordinary user)
json=$results/startup.json
warmup=${WARMUP:-5}
runs=${RUNS:-50}

for tool in bwrap python3; do
    command -v "$tool" >/dev/null || { echo "bench: $tool is missing (make deps installs it)" >&2; exit 1; }
done
[ -x "$EXG" ] || { echo "bench: no exguardian binary at $EXG (run make build)" >&2; exit 1; }
mkdir -p "$results"

# A throwaway workspace: exguardian makes its cwd the writable workspace.
ws=$(mktemp -d /tmp/exg-bench.XXXXXX)
# Each binary is timed as a copy, as an installed one would be: the linker's own output file is
# slower to start (the page cache holds it in small pieces: more page faults, docs/benchmarks.md),
# and a "before" copy against the build's own file would understate every gain.
bins=$(mktemp -d /tmp/exg-bench-bin.XXXXXX)
trap 'rm -rf --one-file-system "$ws" "$bins"' EXIT
cp "$EXG" "$bins/exguardian"
EXG=$bins/exguardian
if [ -n "${EXG_BEFORE:-}" ]; then
    cp "$(readlink -f "$EXG_BEFORE")" "$bins/exguardian-before"
    EXG_BEFORE=$bins/exguardian-before
fi
cd "$ws"

exg_cmd="$EXG run -- true"
bwrap_cmd="bwrap --unshare-all --die-with-parent --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp true"
rows=(exguardian "$exg_cmd" bwrap "$bwrap_cmd")
# The namespace-free layer (issue 42: target <= 0.6x bwrap, which does far more). Root's command
# runs there as the workspace's owner and a workspace root owns is refused: as root, its own
# workspace belongs to nobody (65534). Left out, saying why, where the kernel cannot carry it.
ws_ll=$(mktemp -d /tmp/exg-bench-ll.XXXXXX)
trap 'rm -rf --one-file-system "$ws" "$bins" "$ws_ll"' EXIT
[ "$(id -u)" = 0 ] && chown 65534:65534 "$ws_ll"
ll_cmd="$EXG run --layer landlock --workspace $ws_ll -- true"
if ll_err=$($ll_cmd 2>&1 >/dev/null); then
    rows+=("exguardian landlock" "$ll_cmd")
else
    echo "bench: no landlock row: $(tail -1 <<<"$ll_err")" >&2
fi
if [ -n "${EXG_BEFORE:-}" ]; then
    rows+=("exguardian before" "$(readlink -f "$EXG_BEFORE") run -- true")
fi

# Every command must work before it is timed.
for ((i = 1; i < ${#rows[@]}; i += 2)); do
    ${rows[i]} || { echo "bench: '${rows[i]}' failed" >&2; exit 1; }
done

# --whole-tree: a run lasts until its last process has exited and CPU counts them all (bwrap's
# first process exits without waiting for its pid 1, which does the mounts and runs the command).
python3 "$root/bench/interleave.py" --whole-tree --warmup "$warmup" --runs "$runs" --export-json "$json" "${rows[@]}"

python3 - "$json" <<'EOF'
import json, os, platform, sys
data = json.load(open(sys.argv[1]))
res = {r["command"]: r for r in data["results"]}
b = res["bwrap"]["median"]
print()
print(f"kernel {platform.release()}, uid {os.getuid()}, {data['runs']} runs each, interleaved")
print("| command | median (ms) | p90 (ms) | CPU (ms) | ratio to bwrap (median) |")
print("|---|---|---|---|---|")
for name, r in res.items():
    print(f"| {name} | {r['median'] * 1000:.2f} | {r['p90'] * 1000:.2f} | {(r['user'] + r['system']) * 1000:.2f} | "
          f"{r['median'] / b:.2f} |")
print(f"ratio exguardian/bwrap (median): {res['exguardian']['median'] / b:.2f} (target <= 1.0)")
if "exguardian landlock" in res:
    print(f"ratio exguardian landlock/bwrap (median): {res['exguardian landlock']['median'] / b:.2f} (target <= 0.6)")
EOF
