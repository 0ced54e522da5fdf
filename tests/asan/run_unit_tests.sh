#!/usr/bin/env bash
# The unit tests built with ASan and UBSan (-DEXG_SANITIZE=ON, cmake/Sanitize.cmake):
#
#   bash tests/asan/run_unit_tests.sh ASAN_BUILD_DIR [gtest args...]
#
# Any memory error, leak or undefined behaviour aborts the binary: a non-zero
# exit, the sanitizer's report on stderr. ctest's asan.unit_tests runs this.
# EXG_GTEST_BRIEF=0 prints every test's start too (make test's log: a test that
# hangs is then named by the last "[ RUN ]" line).
set -uo pipefail
build=${1:?usage: $0 ASAN_BUILD_DIR [gtest args...]}
shift
exe=$build/exg_unit_tests
if [ ! -x "$exe" ]; then
    echo "asan: $exe is not built (make test builds it, as does make test-asan)" >&2
    exit 1
fi
here=$(cd "$(dirname "$0")" && pwd)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$here/lsan.supp:print_suppressions=0}
exec "$exe" --gtest_brief="${EXG_GTEST_BRIEF:-1}" "$@"
