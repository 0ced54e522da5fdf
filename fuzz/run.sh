#!/usr/bin/env bash
# Runs the libFuzzer targets built in BUILD (cmake -S fuzz -B BUILD, clang):
#
#   bash fuzz/run.sh BUILD SECONDS [TARGET...]
#
# For each target (default: every fuzz/<target>.cpp): first every input of
# fuzz/corpus/<target>/ and fuzz/regressions/<target>/ once (a past finding
# that comes back fails at once), then SECONDS of fuzzing from them (with
# fuzz/dict/<target>.dict, when there is one). New inputs
# libFuzzer finds go to BUILD/fuzz-corpus/<target>/ (never into the
# repository); a crash, leak, timeout or out-of-memory input is kept as
# BUILD/fuzz-artifacts/<target>/crash-* (or leak-, timeout-, oom-) and fails
# the run: fix the parser, then copy the input to fuzz/regressions/<target>/.
# Exit status: 0 when every target passed, 1 otherwise.
set -uo pipefail

if [ $# -lt 2 ]; then
    echo "usage: $0 BUILD SECONDS [TARGET...]" >&2
    exit 2
fi
build=$(cd "$1" && pwd) || exit 2
seconds=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
if [ $# -gt 0 ]; then
    targets=("$@")
else
    targets=()
    for src in "$here"/*.cpp; do targets+=("$(basename "$src" .cpp)"); done
fi

# Bounds that make a hang or a memory blow-up a finding: a parser's answer to
# one input of at most 64 KiB takes milliseconds and a few MiB. The time bound
# is for a hang, not for speed: the regressions include bombs that take seconds
# of CPU to refuse under the sanitizers (nested-gzip-bomb: ~5 s), which a
# loaded machine stretches several times (it timed out at 10 s).
limits=(-max_len=65536 -timeout=120 -rss_limit_mb=2048 -malloc_limit_mb=1024 -print_final_stats=1)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

failed=()
for t in "${targets[@]}"; do
    exe=$build/fuzz_$t
    if [ ! -x "$exe" ]; then
        echo "fuzz: $t: $exe not built" >&2
        failed+=("$t")
        continue
    fi
    seeds=()
    for d in "$here/corpus/$t" "$here/regressions/$t"; do
        [ -d "$d" ] && [ -n "$(ls -A "$d")" ] && seeds+=("$d")
    done
    if [ ${#seeds[@]} -eq 0 ]; then
        echo "fuzz: $t: no seed inputs in $here/corpus/$t" >&2
        failed+=("$t")
        continue
    fi
    artifacts=$build/fuzz-artifacts/$t
    work=$build/fuzz-corpus/$t
    mkdir -p "$artifacts" "$work"
    log=$build/fuzz-$t.log
    files=()
    for d in "${seeds[@]}"; do for f in "$d"/*; do files+=("$f"); done; done
    # Replay: libFuzzer runs each file given by name once.
    if ! "$exe" "${limits[@]}" -artifact_prefix="$artifacts/" "${files[@]}" >"$log" 2>&1; then
        echo "fuzz: $t: a seed or regression input fails (log: $log):" >&2
        grep -E "ERROR|fuzz check failed|Running:|SUMMARY" "$log" | tail -n 8 >&2
        failed+=("$t")
        continue
    fi
    replayed=${#files[@]}
    # A dictionary (fuzz/dict/<target>.dict: the format's keywords, edge numbers) when there is one.
    dict=()
    [ -f "$here/dict/$t.dict" ] && dict=(-dict="$here/dict/$t.dict")
    if ! "$exe" "${limits[@]}" "${dict[@]}" -max_total_time="$seconds" -artifact_prefix="$artifacts/" \
            "$work" "${seeds[@]}" >>"$log" 2>&1; then
        echo "fuzz: $t: finding after fuzzing (log: $log; input: $(ls -t "$artifacts" | head -n 1)):" >&2
        grep -E "ERROR|fuzz check failed|SUMMARY|Test unit written" "$log" | tail -n 8 >&2
        failed+=("$t")
        continue
    fi
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | tail -n 1 | grep -o '[0-9]*$')
    cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -n 1)
    echo "fuzz: $t: ok ($replayed seed/regression inputs, ${runs:-?} runs in ${seconds}s, ${cov:-cov: ?})"
done

passed=$(( ${#targets[@]} - ${#failed[@]} ))
echo "fuzz: ${passed} passed, ${#failed[@]} failed${failed:+ (${failed[*]})}"
[ ${#failed[@]} -eq 0 ]
