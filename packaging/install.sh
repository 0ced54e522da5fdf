#!/usr/bin/env bash
# `make install-built`, and the stage of `make deb`: BUILD_DIR's install rules
# (CMakeLists.txt, cmake/EmbedPid1.cmake) into $DESTDIR$PREFIX, as
# `cmake --install BUILD_DIR --prefix PREFIX` does, except that the install
# manifest is written to a temporary directory: BUILD_DIR may be read-only to
# the caller (a tree built by root, installed by a user into a DESTDIR).
# bin/exguardian is installed stripped (the build's is about 200 MB, nearly all
# of it debug info). Its debug info goes apart, as Debian's dh_strip puts it:
# PREFIX/lib/debug/.build-id/NN/REST.debug (compressed), named by the binary's
# build id, which gdb looks up in its debug-file-directory (/usr/lib/debug; for
# another PREFIX: `set debug-file-directory PREFIX/lib/debug`). --strip (make
# deb): stripped and nothing kept (a package would carry it in a -dbgsym).
# Usage: [DESTDIR=DIR] packaging/install.sh BUILD_DIR PREFIX [--strip]
set -euo pipefail
die() { echo "install: $*" >&2; exit 1; }
[ $# -ge 2 ] || die "usage: install.sh BUILD_DIR PREFIX [--strip]"
build=$(realpath "$1")
prefix=$2
strip=0
[ "${3:-}" = --strip ] && strip=1
script=$build/cmake_install.cmake
[ -f "$script" ] || die "$script: no such file (configure and build first: make build)"
[ -x "$build/exguardian" ] || die "$build/exguardian: not built (make build)"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/exguardian-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# The manifest's one file(WRITE) line points into the build tree; the rest of
# the script (every file(INSTALL)) runs unchanged.
sed "s|^file(WRITE \"$build/|file(WRITE \"$tmp/|" "$script" >"$tmp/cmake_install.cmake"
grep -q "file(WRITE \"$tmp/" "$tmp/cmake_install.cmake" || die "$script: no manifest line to redirect (CMake changed?)"
cmake -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_DO_STRIP=$strip -P "$tmp/cmake_install.cmake"
# The AppArmor profile (CMakeLists.txt: /etc/apparmor.d/exguardian): loaded now
# when this is the real system (no DESTDIR), as root, and AppArmor is active;
# elsewhere the one command that loads it is printed.
profile=/etc/apparmor.d/exguardian
if [ -z "${DESTDIR:-}" ] && [ -f "$profile" ]; then
    if [ -d /sys/kernel/security/apparmor ] || { command -v aa-enabled >/dev/null && aa-enabled -q 2>/dev/null; }; then
        if [ "$(id -u)" -eq 0 ] && command -v apparmor_parser >/dev/null; then
            apparmor_parser -r "$profile" || die "apparmor_parser -r $profile failed"
            echo "install: AppArmor profile loaded: $profile"
        else
            echo "install: AppArmor is active: load the profile with: sudo apparmor_parser -r $profile"
        fi
    fi
fi

[ "$strip" = 1 ] && exit 0

# The debug info apart (dh_strip's steps): kept, stripped, linked by name.
for t in objcopy strip readelf; do command -v "$t" >/dev/null || die "$t: not installed (apt-get install binutils)"; done
bin=${DESTDIR:-}$(grep -m1 '/exguardian$' "$tmp/install_manifest.txt") || die "the install manifest names no exguardian binary"
id=$(readelf -n "$bin" | sed -n 's/^ *Build ID: *\([0-9a-f]*\)$/\1/p')
[ ${#id} -gt 2 ] || die "$bin: no build id (linked without --build-id?): its debug info could not be named"
debug=${DESTDIR:-}$prefix/lib/debug/.build-id/${id:0:2}/${id:2}.debug
mkdir -p "$(dirname "$debug")"
objcopy --only-keep-debug --compress-debug-sections "$bin" "$debug"
chmod 644 "$debug"
strip --remove-section=.comment --remove-section=.note --strip-unneeded "$bin"
objcopy --add-gnu-debuglink="$debug" "$bin"
echo "-- Installing: $debug (the debug info of $bin)"
