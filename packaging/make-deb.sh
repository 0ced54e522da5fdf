#!/usr/bin/env bash
# `make deb`: a Debian package of what BUILD_DIR holds (built already), made
# with dpkg-deb: /usr/bin/exguardian (stripped, its static pid 1 embedded),
# /usr/lib/exguardian/exguardian-init, the man page and the documents, and the
# AppArmor profile /etc/apparmor.d/exguardian (a conffile), which postinst loads
# where AppArmor is active (Ubuntu 23.10+ needs it for user namespaces).
# Depends is what dpkg-shlibdeps reads from the binary's ELF, and the shlibs
# entries of the libraries it loads on first use; nothing guessed.
# Usage: packaging/make-deb.sh BUILD_DIR [OUT_DIR]   (OUT_DIR: default BUILD_DIR)
# Prints the path of the .deb.
set -euo pipefail
die() { echo "make-deb: $*" >&2; exit 1; }
[ $# -ge 1 ] || die "usage: make-deb.sh BUILD_DIR [OUT_DIR]"
here=$(cd "$(dirname "$0")" && pwd)
build=$(realpath "$1")
out=$(realpath -m "${2:-$1}")
for t in dpkg-deb dpkg-shlibdeps; do command -v "$t" >/dev/null || die "$t: not installed (apt-get install dpkg-dev)"; done
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$build/CMakeCache.txt" 2>/dev/null)
[ -n "$version" ] || die "$build/CMakeCache.txt: no CMAKE_PROJECT_VERSION (configure first: make build)"
arch=$(dpkg --print-architecture)
maintainer=${DEB_MAINTAINER:-ExGuardian developers <maintainers@exguardian.dev>}

stage=$(mktemp -d "${TMPDIR:-/tmp}/exguardian-deb.XXXXXX")
trap 'rm -rf "$stage"' EXIT
root=$stage/root
DESTDIR=$root bash "$here/install.sh" "$build" /usr --strip >"$stage/install.log" ||
    die "install into the stage: $(tail -3 "$stage/install.log")"

# Debian's layout: man pages and changelogs compressed, a copyright file (which
# states the license: LICENSE itself would be a second copy, Policy 12.5).
doc=$root/usr/share/doc/exguardian
gzip -9n "$root/usr/share/man/man1/exguardian.1"
install -m 644 "$here/copyright" "$doc/copyright"
rm -f "$doc/LICENSE"
printf 'exguardian (%s) unstable; urgency=medium\n\n  * Built from the ExGuardian source tree.\n\n -- %s  %s\n' \
    "$version" "$maintainer" "$(date -R -d "@${SOURCE_DATE_EPOCH:-$(stat -c %Y "$build/exguardian")}")" |
    gzip -9n >"$doc/changelog.Debian.gz"

# Depends: the shared libraries the installed binary needs (the pid-1
# program is static and needs none).
mkdir -p "$stage/debian" "$root/DEBIAN"
printf 'Source: exguardian\n\nPackage: exguardian\nArchitecture: any\n' >"$stage/debian/control"
shlibs=$(cd "$stage" && dpkg-shlibdeps -O -e"$root/usr/bin/exguardian" 2>"$stage/shlibdeps.err") ||
    die "dpkg-shlibdeps: $(cat "$stage/shlibdeps.err")"
depends=$(printf '%s\n' "$shlibs" | sed -n 's/^shlibs:Depends=//p')
[ -n "$depends" ] || die "dpkg-shlibdeps found no dependencies of /usr/bin/exguardian"
# The libraries exguardian binds on first use (cmake/LazyLibs.cmake: OpenSSL,
# zlib) are no DT_NEEDED, so dpkg-shlibdeps cannot see them: each one's
# package as its shlibs file says it (what dpkg-shlibdeps would have written).
lazy=$build/generated/lazy_libs.txt
if [ -f "$lazy" ]; then
    while read -r so; do
        [ -n "$so" ] || continue
        dep=$(awk -v l="${so%%.so.*}" -v v="${so##*.so.}" \
            '$1 == l && $2 == v { $1 = ""; $2 = ""; sub(/^ +/, ""); print; exit }' /var/lib/dpkg/info/*.shlibs)
        [ -n "$dep" ] || die "no installed package's shlibs file names $so (which exguardian loads on first use)"
        case ", $depends, " in *", $dep, "*) ;; *) depends="$depends, $dep" ;; esac
    done <"$lazy"
fi
rm -rf "$stage/debian"

{
    echo "Package: exguardian"
    echo "Version: $version"
    echo "Architecture: $arch"
    echo "Maintainer: $maintainer"
    echo "Installed-Size: $(du -sk --apparent-size -c "$root/usr" "$root/etc" | tail -1 | cut -f1)"
    echo "Depends: $depends"
    echo "Recommends: crun | runc, runsc, uidmap, qemu-system-x86"
    echo "Suggests: podman | docker.io, busybox-static"
    echo "Section: admin"
    echo "Priority: optional"
    echo "Description: sandbox for code that AI agents run"
    echo " ExGuardian runs a command with the workspace writable, the rest of the"
    echo " machine read-only, credentials unreadable, planted hooks and rc files"
    echo " refused, and the network closed but for the domains a policy allows,"
    echo " through its own egress proxy; secrets stay outside as placeholders."
    echo " Four layers run the same policy: its own namespaces, seccomp, Landlock"
    echo " and cgroup sandbox; a hardened OCI container (crun or runc); gVisor"
    echo " (runsc); and a microVM with its own guest kernel (qemu). The runtimes and"
    echo " qemu are recommended, not required: the process layer needs none."
} >"$root/DEBIAN/control"
(cd "$root" && find usr -type f -print0 | sort -z | xargs -0 md5sum) >"$root/DEBIAN/md5sums"
profile=/etc/apparmor.d/exguardian
[ -f "$root$profile" ] || die "the stage has no $profile (CMakeLists.txt installs packaging/apparmor/exguardian)"
echo "$profile" >"$root/DEBIAN/conffiles"
# The profile is loaded (and on removal unloaded) only where AppArmor is
# active, as Debian's dh_apparmor does; a kernel without it gets nothing.
cat >"$root/DEBIAN/postinst" <<EOS
#!/bin/sh
set -e
if [ "\$1" = configure ] && command -v apparmor_parser >/dev/null 2>&1 && aa-enabled --quiet 2>/dev/null; then
    apparmor_parser -r -T -W $profile || true
fi
EOS
cat >"$root/DEBIAN/prerm" <<EOS
#!/bin/sh
set -e
if [ "\$1" = remove ] && command -v apparmor_parser >/dev/null 2>&1 && aa-enabled --quiet 2>/dev/null; then
    apparmor_parser -R $profile || true
fi
EOS
chmod 644 "$root/DEBIAN/control" "$root/DEBIAN/md5sums" "$root/DEBIAN/conffiles"
chmod 755 "$root/DEBIAN/postinst" "$root/DEBIAN/prerm"

mkdir -p "$out"
deb=$out/exguardian_${version}_${arch}.deb
# DEB_XZ_LEVEL: xz's level (default 6, dpkg's); the tests take 1 (the guest's vmlinux alone is 66 MB:
# 20 s of CPU at 6, 4 at 1, for a package 10% larger).
dpkg-deb --root-owner-group -Zxz -z"${DEB_XZ_LEVEL:-6}" --build "$root" "$deb" >/dev/null
echo "$deb"
