#!/usr/bin/env bash
# The Makefile's build steps, with cmake replaced by a stand-in that only writes down how it was
# called (nothing is compiled here), and `deps` by a rule that installs ccache the way apt-get
# does on a fresh machine: after make has read the Makefile.
# - `make build` finds the ccache that `deps` installed in the same run: the first build of a
#   fresh clone goes through it (before, ccache was looked for when make read the file);
# - `make demo` builds exguardian alone (its pid 1 is embedded in it): not the unit tests, the
#   test helpers or the microVM guest, which it never runs; `make build` builds everything.
source "$(dirname "$0")/lib.sh"

B=${EXG_BUILD_DIR:?EXG_BUILD_DIR must name the build dir}
SRC=$(sed -n 's/^exguardian_SOURCE_DIR:STATIC=//p' "$B/CMakeCache.txt" 2>/dev/null)
if [ -z "$SRC" ] || [ ! -f "$SRC/Makefile" ]; then
    fail "no configured source tree for $B (source '$SRC')"
    finish
fi

# A PATH with what the recipes run and no ccache (it is in /usr/bin, so only links here).
BIN=$T/bin
mkdir -p "$BIN"
for t in nproc sh bash dirname; do ln -s "$(command -v "$t")" "$BIN/$t"; done
LOG=$T/cmake.log
printf '#!/bin/sh\nprintf "%%s\\n" "$*" >> %q\n' "$LOG" > "$BIN/cmake"
chmod 755 "$BIN/cmake"
printf 'deps:\n\t@%q -sf %q %q\n' "$(command -v ln)" "$(command -v ccache || echo /usr/bin/ccache)" "$BIN/ccache" > "$T/deps.mk"
MAKE_BIN=$(command -v make)

# make_with_fresh_deps TARGET: `make TARGET` with ccache absent when make starts.
make_with_fresh_deps() {
    rm -f "$BIN/ccache" "$LOG"
    run env PATH="$BIN" "$MAKE_BIN" -s -C "$SRC" --no-print-directory -f Makefile -f "$T/deps.mk" "$1" \
        BUILD_DIR="$T/build" EXG="$T/no-such-exguardian"
}

make_with_fresh_deps build
calls=$(cat "$LOG" 2>/dev/null | wc -l)
check "make build ran cmake twice, configure then build (status $STATUS; $calls calls)" test "$STATUS" = 0 -a "$calls" = 2
[ "$STATUS" = 0 ] || show_last
configure=$(head -1 "$LOG" 2>/dev/null || true)
check "make build: the configure step uses the ccache deps installed ($configure)" \
    grep -qF -- "-DCMAKE_CXX_COMPILER_LAUNCHER=$BIN/ccache" <<<"$configure"
check "make build: the build step builds every target ($(sed -n 2p "$LOG" 2>/dev/null))" \
    bash -c '[[ $1 == "--build $2 -j"* && $1 != *--target* ]]' _ "$(sed -n 2p "$LOG" 2>/dev/null)" "$T/build"

make_with_fresh_deps demo   # (its demo script then stops: no exguardian binary, the stand-in built none)
configure=$(head -1 "$LOG" 2>/dev/null || true)
check "make demo: the configure step uses the ccache deps installed ($configure)" \
    grep -qF -- "-DCMAKE_CXX_COMPILER_LAUNCHER=$BIN/ccache" <<<"$configure"
builds=$(grep -- '^--build' "$LOG" 2>/dev/null)
check "make demo builds exguardian alone (${builds:-no build step})" \
    bash -c '[ "$(wc -l <<<"$1")" = 1 ] && [[ $1 == *" --target exguardian" ]]' _ "$builds"
check "make demo stops when there is no exguardian to run (status $STATUS)" test "$STATUS" != 0

finish
