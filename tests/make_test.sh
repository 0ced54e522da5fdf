#!/usr/bin/env bash
# The tests `make test` runs, once the build, the fuzz targets and the test users are in place:
#
#   bash tests/make_test.sh BUILD_DIR TEST_ASAN CMAKE_ARGS...
#
# ctest runs the suite one test at a time (-j1: the integration tests share the host's cgroups,
# network namespaces and users), which leaves a core of a 2-core CI machine mostly idle. With
# TEST_ASAN=1 the unit tests' ASan/UBSan build (BUILD_DIR/asan) is compiled meanwhile on that
# core at the lowest priority (nice 19: the suite's processes keep their share), then run as
# asan.unit_tests at the end: the sanitizers in CI for the cost of running them, not of a second
# build on top of the first. Exit: non-zero if any test failed or the ASan build did.
set -uo pipefail
build=${1:?usage: $0 BUILD_DIR TEST_ASAN [cmake args for the ASan tree...]}
asan=${2:-1}
shift 2
src=$(cd "$(dirname "$0")/.." && pwd)
asan_dir=$build/asan
asan_log=$build/asan-build.log

asan_pid=
if [ "$asan" = 1 ]; then
    jobs=$(( $(nproc) > 2 ? $(nproc) - 1 : 1 ))
    echo "make test: building the ASan unit tests in $asan_dir meanwhile (nice 19, -j$jobs; log: $asan_log)"
    ( cmake -S "$src" -B "$asan_dir" -DEXG_SANITIZE=ON "$@" > "$asan_log" 2>&1 &&
      nice -n 19 cmake --build "$asan_dir" -j"$jobs" --target exg_unit_tests >> "$asan_log" 2>&1 ) &
    asan_pid=$!
fi

cd "$build" || exit 1
ctest --output-on-failure -j1 --timeout 300 -E '^asan\.'
rc=$?

if [ -n "$asan_pid" ]; then
    if wait "$asan_pid"; then
        ctest --output-on-failure --timeout 900 -R '^asan\.' || rc=1
    else
        echo "make test: the ASan build failed (the end of $asan_log):" >&2
        tail -30 "$asan_log" >&2
        rc=1
    fi
fi
exit "$rc"
