#!/usr/bin/env bash
# The tests `make test` runs, once the build and the fuzz targets are in place:
#
#   bash tests/make_test.sh BUILD_DIR TEST_ASAN CMAKE_ARGS...
#
# ctest runs the suite one test at a time (-j1: the integration tests share the host's cgroups,
# network namespaces and users), which leaves a core of a 2-core CI machine mostly idle. With
# TEST_ASAN=1 the unit tests' ASan/UBSan build (BUILD_DIR/asan) is compiled meanwhile on that
# core at the lowest priority (nice 19: the suite's processes keep their share), and run there
# as soon as it is built, while the suite goes on: the sanitizers in CI for neither a second
# build nor a second run on top of the first. (The unit tests that use the host's real cgroups,
# CgroupReal.*, wait for the suite's end: its sandboxes make and sweep cgroups of their own.)
# The same ASan build's exguardian (built meanwhile too) then runs the integration tests of the
# supervisor (test_process) and of the proxy (test_egress_proxy) as root, after the suite: about
# 75 s here. ASAN_IT_TESTS overrides the list; `make test-asan` runs its longer one (with the
# session, secrets, limits and survivors scripts: test_session alone takes 120 s under ASan) as
# root and as a user.
# Exit: non-zero if any test failed or the ASan build did.
set -uo pipefail
build=${1:?usage: $0 BUILD_DIR TEST_ASAN [cmake args for the ASan tree...]}
build=$(cd "$build" && pwd) || exit 1  # absolute: the suite runs from inside it
asan=${2:-1}
shift 2
src=$(cd "$(dirname "$0")/.." && pwd)
asan_dir=$build/asan
asan_log=$build/asan-build.log
asan_run_log=$build/asan-unit-tests.log
run_asan="$src/tests/asan/run_unit_tests.sh"

asan_pid=
if [ "$asan" = 1 ]; then
    jobs=$(( $(nproc) > 2 ? $(nproc) - 1 : 1 ))
    echo "make test: building the ASan unit tests in $asan_dir meanwhile, then running them (nice 19, -j$jobs; logs: $asan_log, $asan_run_log)"
    ( cmake -S "$src" -B "$asan_dir" -DEXG_SANITIZE=ON "$@" > "$asan_log" 2>&1 &&
      nice -n 19 cmake --build "$asan_dir" -j"$jobs" --target exg_unit_tests exguardian >> "$asan_log" 2>&1 || exit 2
      nice -n 19 bash "$run_asan" "$asan_dir" --gtest_filter="-CgroupReal.*" > "$asan_run_log" 2>&1 || exit 3 ) &
    asan_pid=$!
fi

cd "$build" || exit 1
ctest --output-on-failure -j1 --timeout 300 -E '^asan\.'
rc=$?

if [ -n "$asan_pid" ]; then
    wait "$asan_pid"
    arc=$?
    if [ "$arc" = 2 ] || [ "$arc" = 1 ]; then
        echo "make test: the ASan build failed (the end of $asan_log):" >&2
        tail -30 "$asan_log" >&2
        rc=1
    else
        echo "make test: ASan/UBSan unit tests (run during the suite):"
        tail -5 "$asan_run_log"
        if [ "$arc" != 0 ]; then
            echo "make test: the ASan unit tests failed (the end of $asan_run_log):" >&2
            tail -60 "$asan_run_log" >&2
            rc=1
        fi
        bash "$run_asan" "$asan_dir" --gtest_filter='CgroupReal.*' || rc=1
        it_tests=${ASAN_IT_TESTS:-test_process test_egress_proxy}
        echo "make test: the integration tests of the supervisor and the proxy with the ASan/UBSan exguardian ($it_tests, as root)"
        (cd "$asan_dir" && ctest --output-on-failure -j1 --timeout 600 -R "^it\\.(${it_tests// /|})\\.root\$") || rc=1
    fi
fi
exit "$rc"
