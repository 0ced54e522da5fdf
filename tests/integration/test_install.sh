#!/usr/bin/env bash
# Installed as users install tools: `make install-built` (what `make install` runs after the
# build) into a DESTDIR under $T, and `make deb-built`; no build here, the artefacts of
# $EXG_BUILD_DIR are used as they are.
# - the installed tree holds bin/exguardian (stripped), its debug info apart
#   (lib/debug/.build-id/, as Debian's dh_strip puts it), lib/exguardian/exguardian-init (the
#   very bytes embedded in exguardian), bin/exguardian-probe (static), the man page and the
#   documents with LICENSE, and
#   nothing else;
# - exguardian copied ALONE into an empty directory runs the process, container and gVisor
#   layers, the latter two on a busybox --rootfs (no libc there: pid 1 is the static program
#   exguardian carries); the installed one binds its installed pid 1, a lone one with a foreign
#   file where the install would put it ignores that file;
# - a missing piece (the runtime) is one clear line and status 125;
# - `man -l` renders the page without warnings, and it names every subcommand and option that
#   `exguardian ... --help` lists;
# - the .deb's fields (Depends covers every shared library the binary needs, Recommends the
#   runtimes, a real Maintainer) and contents (dpkg-deb -I/-c; the copyright file states
#   Apache-2.0); its extracted tree runs. It is never installed here.
source "$(dirname "$0")/lib.sh"

B=${EXG_BUILD_DIR:?EXG_BUILD_DIR must name the build dir}
SRC=$(sed -n 's/^exguardian_SOURCE_DIR:STATIC=//p' "$B/CMakeCache.txt" 2>/dev/null)
if [ -z "$SRC" ] || [ ! -f "$SRC/Makefile" ] || [ ! -x "$B/exguardian" ] || [ ! -f "$B/pid1/exguardian-init" ]; then
    fail "no configured and built tree at $B (source '$SRC')"
    finish
fi
new_workspace
cd "$WS" || exit 1

# ---- make install DESTDIR=... PREFIX=/usr/local ------------------------------------------------
DEST=$T/dest
run make -s -C "$SRC" --no-print-directory install-built BUILD_DIR="$B" PREFIX=/usr/local DESTDIR="$DEST"
check "make install-built DESTDIR=\$T/dest PREFIX=/usr/local (status $STATUS)" test "$STATUS" = 0
[ "$STATUS" = 0 ] || show_last
P=$DEST/usr/local
check "bin/exguardian is installed, executable" test -x "$P/bin/exguardian" -a -f "$P/bin/exguardian"
check "lib/exguardian/exguardian-init is installed, mode 755" \
    test "$(stat -c %a "$P/lib/exguardian/exguardian-init" 2>/dev/null)" = 755
check "the installed pid 1 is the very program embedded in exguardian" \
    cmp -s "$P/lib/exguardian/exguardian-init" "$B/pid1/exguardian-init"
check "bin/exguardian-probe is installed beside it, static (escape-test --sandbox runs it in foreign sandboxes)" \
    bash -c '[ -x "$1" ] && ! ldd "$1" >/dev/null 2>&1' _ "$P/bin/exguardian-probe"
check "share/man/man1/exguardian.1 is installed" test -f "$P/share/man/man1/exguardian.1"
check "share/doc/exguardian/README.md is installed" test -f "$P/share/doc/exguardian/README.md"
check "share/doc/exguardian/LICENSE is the source tree's (Apache License 2.0)" \
    bash -c 'cmp -s "$1/share/doc/exguardian/LICENSE" "$2/LICENSE" && grep -q "Apache License" "$2/LICENSE" &&
             grep -q "Version 2.0, January 2004" "$2/LICENSE"' _ "$P" "$SRC"
# Installed stripped, its debug info apart where gdb finds it by build id (as Debian's dh_strip does).
check "bin/exguardian is stripped (no .debug_info, no symbol table)" \
    bash -c 'readelf -S "$1" >/dev/null && ! readelf -S "$1" | grep -qE "\.debug_info|\.symtab"' _ "$P/bin/exguardian"
build_id=$(readelf -n "$P/bin/exguardian" 2>/dev/null | sed -n 's/^ *Build ID: *\([0-9a-f]*\)$/\1/p')
DBG=$P/lib/debug/.build-id/${build_id:0:2}/${build_id:2}.debug
check "its debug info is lib/debug/.build-id/${build_id:0:2}/${build_id:2}.debug" test -n "$build_id" -a -f "$DBG"
check "  ... which holds .debug_info, for the same build id" \
    bash -c 'readelf -S "$1" | grep -q "\.debug_info" && readelf -n "$1" | grep -q "Build ID: $2"' _ "$DBG" "$build_id"
check "  ... and the binary's .gnu_debuglink names it" \
    bash -c 'readelf -p .gnu_debuglink "$1" 2>/dev/null | grep -qF "${2##*/}"' _ "$P/bin/exguardian" "$DBG"
installed_size=$(stat -c %s "$P/bin/exguardian" 2>/dev/null || echo 0) built_size=$(stat -c %s "$B/exguardian")
check "the stripped binary is under a tenth of the build's ($installed_size of $built_size bytes)" \
    test "$installed_size" -gt 0 -a "$((installed_size * 10))" -lt "$built_size"
check "the AppArmor profile is installed at \$DESTDIR/etc/apparmor.d/exguardian (whatever the prefix)" \
    cmp -s "$DEST/etc/apparmor.d/exguardian" "$SRC/packaging/apparmor/exguardian"
# The microVM layer's guest (when the build made it): the very files, found by the installed binary.
GUEST=""
[ -f "$B/microvm/vmlinux" ] && GUEST="|lib/exguardian/microvm/(vmlinux|initramfs\.cpio|kernel-version)"
if [ -n "$GUEST" ]; then
    for f in vmlinux initramfs.cpio kernel-version; do
        check "lib/exguardian/microvm/$f is the guest the build made" cmp -s "$P/lib/exguardian/microvm/$f" "$B/microvm/$f"
    done
    if command -v qemu-system-x86_64 >/dev/null; then
        run env -u EXG_MICROVM_IMAGE_DIR "$P/bin/exguardian" run --layer microvm --dry-run -- true  # (run.sh names the build's)
        check "the installed exguardian boots its installed guest kernel (dry run: $(grep -m1 'guest kernel:' <<<"$OUT$ERR"))" \
            grep -qF "guest kernel: $P/bin/../lib/exguardian/microvm/vmlinux" <<<"$OUT$ERR"
    fi
else
    skip "the microVM guest: not built here (-DEXG_MICROVM_GUEST=OFF)"
fi
for a in claude codex gemini opencode; do
    check "the agent profile $a is installed as the policy file it is" cmp -s "$P/share/exguardian/agents/$a.json" "$SRC/profiles/agents/$a.json"
done
run "$P/bin/exguardian" agent --list
check "the installed exguardian finds its installed profiles" grep -q "profile: $P/share/exguardian/agents/codex.json" <<<"$OUT"
unexpected=$(cd "$DEST" && find . -type f | grep -vE "^\./(usr/local/(bin/exguardian|bin/exguardian-probe|lib/exguardian/exguardian-init|lib/debug/\.build-id/[0-9a-f]{2}/[0-9a-f]+\.debug|share/man/man1/exguardian\.1|share/doc/exguardian/[^/]+|share/exguardian/agents/[a-z]+\.json$GUEST)|etc/apparmor\.d/exguardian)\$")
check "nothing else is installed (${unexpected:-none})" test -z "$unexpected"
check "the install wrote nothing into the build dir (no manifest there)" test ! -e "$B/install_manifest.txt"

# ---- the AppArmor profile: what Ubuntu's bwrap profile is, for exguardian ----------------------
# Its syntax is checked with apparmor_parser (-Q: no kernel load; this kernel has no AppArmor).
# Debian 12's parser is AppArmor 3.0, which knows neither abi/4.0 nor the `userns` rule (4.0):
# there the rest of the profile is checked with those two lines swapped for 3.0's, and the
# userns rule is checked to be there as Ubuntu writes it.
AA=$DEST/etc/apparmor.d/exguardian
check "the profile grants userns (the rule Ubuntu 23.10+ needs)" grep -qx '  userns,' "$AA"
check "the profile attaches to the installed paths (/usr/bin and /usr/local/bin) and confines nothing else" \
    grep -qxF 'profile exguardian /usr/{,local/}bin/exguardian flags=(unconfined) {' "$AA"
check "the profile has the local include for site additions" grep -qxF '  include if exists <local/exguardian>' "$AA"
if command -v apparmor_parser >/dev/null; then
    aa_version=$(apparmor_parser --version 2>/dev/null | sed -n '1s/.*version \([0-9]*\)\..*/\1/p')
    if [ "${aa_version:-0}" -ge 4 ]; then
        run apparmor_parser -Q -K "$AA"
        check "apparmor_parser $aa_version -Q accepts the profile (status $STATUS)" test "$STATUS" = 0
    else
        sed -e 's|^abi <abi/4.0>,$|abi <abi/3.0>,|' -e '/^  userns,$/d' "$AA" >"$T/aa-3.0"
        check "  (the 3.0 copy differs only in those two lines)" \
            test "$(diff "$AA" "$T/aa-3.0" | grep -c '^[<>]')" = 3
        run apparmor_parser -Q -K "$T/aa-3.0"
        check "apparmor_parser ${aa_version:-?} -Q accepts the profile but for abi/4.0 and userns (status $STATUS)" test "$STATUS" = 0
        [ "$STATUS" = 0 ] || show_last
        # and the check can fail: a broken profile is refused
        sed 's/^}$//' "$T/aa-3.0" >"$T/aa-broken"
        run apparmor_parser -Q -K "$T/aa-broken"
        check "  ... and refuses one with its closing brace removed (status $STATUS)" test "$STATUS" != 0
    fi
else
    skip "apparmor_parser: not installed (apparmor); the profile's syntax is not checked"
fi

# ---- a busybox root with nothing else: no libc, no loader ----------------------------------------
RF=""
if command -v busybox >/dev/null && ! ldd "$(command -v busybox)" >/dev/null 2>&1; then
    RF=$T/rootfs
    mkdir -p "$RF"/{bin,etc,proc,sys,dev,tmp,run,root,home}
    cp "$(command -v busybox)" "$RF/bin/busybox"
    for a in sh cat true tr; do ln -s busybox "$RF/bin/$a"; done
    chmod -R go-w "$RF"
    check "the busybox root has no dynamic loader" test -z "$(ls "$RF"/lib* 2>/dev/null)"
else
    skip "--rootfs: no static busybox (busybox-static)"
fi
layers=()
if command -v crun >/dev/null || command -v runc >/dev/null; then layers+=(container); else skip "container: neither crun nor runc installed"; fi
if command -v runsc >/dev/null; then layers+=(gvisor); else skip "gvisor: runsc not installed"; fi

# runs_everywhere NAME EXE: the process layer, then each container layer on the busybox root.
runs_everywhere() {
    local name=$1 exe=$2 L
    run timeout 60 "$exe" run -- true
    check "$name: process layer runs (status $STATUS)" test "$STATUS" = 0
    [ "$STATUS" = 0 ] || show_last
    [ -n "$RF" ] || return 0
    for L in "${layers[@]}"; do
        run timeout 90 "$exe" run --layer "$L" --rootfs "$RF" -- /bin/true
        check "$name: --layer $L --rootfs busybox -- /bin/true (status $STATUS)" test "$STATUS" = 0
        [ "$STATUS" = 0 ] || show_last
        run timeout 90 "$exe" run --layer "$L" --rootfs "$RF" -- sh -c 'tr "\0" " " </proc/1/cmdline'
        check "$name: $L: pid 1 is the static init at /run/exguardian/init ('$OUT')" \
            test "${OUT%% *}" = /run/exguardian/init
    done
}

# pid1_line EXE L: what --dry-run says about the container's pid 1.
pid1_line() { "$1" run --dry-run --layer "$2" -- true 2>/dev/null | grep -m1 'pid 1:'; }

runs_everywhere installed "$P/bin/exguardian"
if [ "${#layers[@]}" -gt 0 ]; then
    line=$(pid1_line "$P/bin/exguardian" "${layers[0]}")
    check "installed: pid 1 bound from the installed copy ($line)" \
        grep -qF "bound from the installed $P/bin/../lib/exguardian/exguardian-init" <<<"$line"
fi

ALONE=$T/alone
mkdir -p "$ALONE/bin"
cp "$P/bin/exguardian" "$ALONE/bin/exguardian"
check "the lone copy's directory holds exguardian and nothing else" test "$(ls -A "$ALONE/bin")" = exguardian
runs_everywhere alone "$ALONE/bin/exguardian"
if [ "${#layers[@]}" -gt 0 ]; then
    line=$(pid1_line "$ALONE/bin/exguardian" "${layers[0]}")
    check "alone: pid 1 is the embedded one ($line)" grep -qF "embedded in exguardian" <<<"$line"
    # A file where the install would put it, but not ours: never run as pid 1.
    mkdir -p "$ALONE/lib/exguardian"
    printf '#!/bin/sh\necho foreign-init; exit 99\n' >"$ALONE/lib/exguardian/exguardian-init"
    chmod 755 "$ALONE/lib/exguardian/exguardian-init"
    line=$(pid1_line "$ALONE/bin/exguardian" "${layers[0]}")
    check "alone + a foreign lib/exguardian/exguardian-init: still the embedded one ($line)" \
        grep -qF "embedded in exguardian" <<<"$line"
    run timeout 90 "$ALONE/bin/exguardian" run --layer "${layers[0]}" -- sh -c 'echo fine'
    check "alone + a foreign init file: the run is ours (status $STATUS, '$OUT')" \
        test "$STATUS" = 0 -a "$OUT" = fine
    rm -rf "$ALONE/lib"
fi
# A missing piece is one clear line: exit 125, `exguardian: what: why`.
run "$ALONE/bin/exguardian" run --layer container --runtime "$T/no-such/crun" -- true
check "a missing runtime: status 125, one line 'exguardian: ...: ...' ('$ERR')" \
    test "$STATUS" = 125 -a "$(printf '%s\n' "$ERR" | wc -l)" = 1
check "  ... that names it" grep -qE "^exguardian: .*$T/no-such/crun.*: .+" <<<"$ERR"

# ---- the man page ------------------------------------------------------------------------------
MAN=$P/share/man/man1/exguardian.1
if command -v man >/dev/null; then
    warnings=$(MANWIDTH=100 man --warnings -l "$MAN" 2>&1 >/dev/null)
    check "man -l renders the page without warnings (${warnings:-none})" test -z "$warnings"
    page=$(MANWIDTH=200 man -l "$MAN" 2>/dev/null | col -b)
    check "the page renders (NAME, SYNOPSIS, EXIT STATUS)" \
        bash -c 'grep -q "^NAME" <<<"$1" && grep -q "^SYNOPSIS" <<<"$1" && grep -q "^EXIT STATUS" <<<"$1"' _ "$page"
    # Every subcommand and every option the CLI has is in the page.
    missing=""
    subs=$("$P/bin/exguardian" --help | awk '/^SUBCOMMANDS:|^Subcommands:/{s=1; next} s && /^  [a-z]/{print $1}')
    check "exguardian --help lists subcommands ($(echo $subs))" test -n "$subs"
    for sub in $subs; do
        grep -qE "(^| )$sub( |$)" <<<"$page" || missing+=" $sub"
        for opt in $("$P/bin/exguardian" "$sub" --help | grep -oE '(^| |,)--?[a-z][a-z0-9-]*' | tr -d ' ,' | sort -u); do
            [ "$opt" = --help ] || [ "$opt" = -h ] && continue
            grep -qF -- "$opt" <<<"$page" || missing+=" $sub:$opt"
        done
    done
    check "the page names every subcommand and option of the CLI (missing:${missing:- none})" test -z "$missing"
else
    skip "man: not installed"
fi

# ---- make deb ----------------------------------------------------------------------------------
if command -v dpkg-deb >/dev/null && command -v dpkg-shlibdeps >/dev/null; then
    run env DEB_XZ_LEVEL=1 make -s -C "$SRC" --no-print-directory deb-built BUILD_DIR="$B" DEB_DIR="$T/deb"
    DEB=$(printf '%s\n' "$OUT" | tail -1)
    check "make deb-built (status $STATUS): $DEB" test "$STATUS" = 0 -a -f "$DEB"
    [ "$STATUS" = 0 ] || show_last
    field() { dpkg-deb -f "$DEB" "$1" 2>/dev/null; }
    check "Package: exguardian" test "$(field Package)" = exguardian
    check "Version: the project's ($(field Version))" \
        test "$(field Version)" = "$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$B/CMakeCache.txt")"
    check "Architecture: $(dpkg --print-architecture)" test "$(field Architecture)" = "$(dpkg --print-architecture)"
    check "Maintainer and Description present" test -n "$(field Maintainer)" -a -n "$(field Description)"
    check "Maintainer is a real address, not localhost ($(field Maintainer))" \
        bash -c '[[ $1 =~ ^[^\<]+\ \<[^@\>]+@[a-z0-9-]+(\.[a-z0-9-]+)+\>$ ]] && [[ $1 != *@localhost* ]]' _ "$(field Maintainer)"
    check "Recommends the runtimes ($(field Recommends))" \
        bash -c 'grep -qE "crun \| runc" <<<"$1" && grep -qw runsc <<<"$1" && grep -qw qemu-system-x86 <<<"$1"' _ "$(field Recommends)"
    contents=$(dpkg-deb -c "$DEB")
    for f in ./usr/bin/exguardian ./usr/bin/exguardian-probe ./usr/lib/exguardian/exguardian-init ./usr/share/man/man1/exguardian.1.gz \
             ./usr/share/doc/exguardian/copyright ./usr/share/doc/exguardian/README.md ./etc/apparmor.d/exguardian; do
        check "the .deb holds $f" grep -qE " $f\$" <<<"$contents"
    done
    check "every file in the .deb is root's" test -z "$(awk '$2 != "root/root"' <<<"$contents")"
    X=$T/deb-root
    dpkg-deb -x "$DEB" "$X"
    check "the .deb's AppArmor profile is the source's" cmp -s "$X/etc/apparmor.d/exguardian" "$SRC/packaging/apparmor/exguardian"
    CTRL=$T/deb-control
    dpkg-deb -e "$DEB" "$CTRL"
    check "the profile is a conffile" grep -qx /etc/apparmor.d/exguardian "$CTRL/conffiles"
    check "postinst loads it (apparmor_parser -r) only where AppArmor is active (aa-enabled)" \
        bash -c 'grep -q "aa-enabled --quiet" "$1" && grep -q "apparmor_parser -r -T -W /etc/apparmor.d/exguardian" "$1" && sh -n "$1"' _ "$CTRL/postinst"
    check "prerm unloads it on removal, where AppArmor is active" \
        bash -c 'grep -q "aa-enabled --quiet" "$1" && grep -q "apparmor_parser -R /etc/apparmor.d/exguardian" "$1" && sh -n "$1"' _ "$CTRL/prerm"
    check "the packaged binary is stripped" test -z "$(readelf -S "$X/usr/bin/exguardian" | grep -F .debug_info)"
    check "the copyright file states the license: Apache-2.0 (machine-readable, text in common-licenses)" \
        bash -c 'grep -qx "License: Apache-2.0" "$1" && grep -qF /usr/share/common-licenses/Apache-2.0 "$1" &&
                 ! grep -qi "not yet stated" "$1"' _ "$X/usr/share/doc/exguardian/copyright"
    check "the .deb carries no second copy of the license (LICENSE)" test ! -e "$X/usr/share/doc/exguardian/LICENSE"
    check "the packaged pid 1 is the embedded program" cmp -s "$X/usr/lib/exguardian/exguardian-init" "$B/pid1/exguardian-init"
    if [ -n "$GUEST" ]; then
        for f in vmlinux initramfs.cpio; do
            check "the .deb carries the microVM guest's $f" cmp -s "$X/usr/lib/exguardian/microvm/$f" "$B/microvm/$f"
        done
    fi
    # Depends covers every shared library the packaged binary needs, through the package that ships it.
    deps=$(field Depends)
    uncovered=""
    # (the file the loader would map, as ldd finds it, and the package dpkg says ships that path)
    needed=$(readelf -d "$X/usr/bin/exguardian" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
    check "the packaged binary needs shared libraries ($(echo $needed))" test -n "$needed"
    for so in $needed; do
        path=$(ldd "$X/usr/bin/exguardian" | awk -v so="$so" '$1 == so {print $3}')
        pkg=$(dpkg -S "$path" 2>/dev/null | grep -v '^diversion' | head -1 | cut -d: -f1)
        [ -n "$pkg" ] || pkg=$(dpkg -S "$(realpath "$path")" 2>/dev/null | grep -v '^diversion' | head -1 | cut -d: -f1)
        grep -qE "(^|[ ,|])$pkg( |,|$)" <<<"$deps" || uncovered+=" $so:${path:-?}(${pkg:-no package})"
    done
    check "Depends ($deps) covers every NEEDED library (uncovered:${uncovered:- none})" test -n "$deps" -a -z "$uncovered"
    # ... and the ones it loads on first use (OpenSSL, zlib: cmake/LazyLibs.cmake), which are no NEEDED.
    uncovered=""
    for so in $(cat "$B/generated/lazy_libs.txt" 2>/dev/null); do
        pkg=$(dpkg -S "*/$so" 2>/dev/null | grep -v '^diversion' | head -1 | cut -d: -f1)
        grep -qE "(^|[ ,|])$pkg( |,|$)" <<<"$deps" || uncovered+=" $so(${pkg:-no package})"
    done
    check "Depends covers the libraries loaded on first use ($(cat "$B/generated/lazy_libs.txt" 2>/dev/null | tr '\n' ' ')uncovered:${uncovered:- none})" \
        test -z "$uncovered"
    unmet=""
    for d in $(tr ',' '\n' <<<"$deps" | sed 's/(.*)//; s/|.*//' | tr -d ' '); do
        dpkg-query -W -f='${Status}' "$d" 2>/dev/null | grep -q 'install ok installed' || unmet+=" $d"
    done
    check "the Depends are satisfied on this machine (unmet:${unmet:- none})" test -z "$unmet"
    if [ "${#layers[@]}" -gt 0 ]; then
        line=$(pid1_line "$X/usr/bin/exguardian" "${layers[0]}")
        check "the packaged binary binds the packaged pid 1 ($line)" \
            grep -qF "bound from the installed $X/usr/bin/../lib/exguardian/exguardian-init" <<<"$line"
        if [ -n "$RF" ]; then
            run timeout 90 "$X/usr/bin/exguardian" run --layer "${layers[0]}" --rootfs "$RF" -- /bin/true
            check "the packaged binary runs --layer ${layers[0]} --rootfs busybox (status $STATUS)" test "$STATUS" = 0
        fi
    fi
    check "the .deb was not installed on this machine" bash -c '! dpkg-query -W exguardian >/dev/null 2>&1'
else
    skip "make deb: dpkg-deb or dpkg-shlibdeps not installed (dpkg-dev)"
fi

finish
