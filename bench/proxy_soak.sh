#!/usr/bin/env bash
# Proxy soak at a bigger scale than the test (tests/integration/test_egress_proxy_soak.sh, which
# this runs with larger SOAK_* numbers): a crowd of CONNECT tunnels, slowloris clients,
# malformed and oversized heads and clients that vanish mid-download against `exguardian proxy`
# in the test world of network namespaces; a well-behaved client's requests succeed throughout;
# RSS before/during/after and fds before/after are printed and judged.
#
#   sudo bash bench/proxy_soak.sh            # build/exguardian; EXG=... for another binary
#
# Environment: SOAK_TUNNELS (default 4000), SOAK_SLOW (1000), SOAK_BAD (500), SOAK_VANISH (300),
# SOAK_HOLD (seconds the crowd stays, 20).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" = 0 ] || { echo "bench: run as root (it makes network namespaces)" >&2; exit 1; }
EXG=$(readlink -f "${EXG:-$root/build/exguardian}")
[ -x "$EXG" ] || { echo "bench: no exguardian binary at $EXG" >&2; exit 1; }
export SOAK_TUNNELS=${SOAK_TUNNELS:-4000} SOAK_SLOW=${SOAK_SLOW:-1000} SOAK_BAD=${SOAK_BAD:-500}
export SOAK_VANISH=${SOAK_VANISH:-300} SOAK_HOLD=${SOAK_HOLD:-20}
builddir=$(dirname "$EXG")
[ -f "$builddir/CMakeCache.txt" ] || builddir=$root/build
# As tests/integration/run.sh runs it (which passes no SOAK_* through its clean environment).
T=$(mktemp -d /tmp/exg-bench-soak.XXXXXX)
trap 'rm -rf --one-file-system "$T"' EXIT
mkdir -p "$T/home"
cd "$T"
env EXG="$EXG" T="$T" EXG_AS=root EXG_BUILD_DIR="$builddir" HOME="$T/home" \
    bash "$root/tests/integration/test_egress_proxy_soak.sh"
