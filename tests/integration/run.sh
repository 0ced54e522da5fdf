#!/usr/bin/env bash
# Runs one integration test script as root or as the unprivileged user `exgtest`.
#
#   bash tests/integration/run.sh <root|user> <script> <path-to-exguardian> <build-dir> [layer]
#
# layer: process (default; also from EXG_LAYER), container, gvisor or microvm: every `exguardian run` of
# the script runs with --layer LAYER (lib.sh's EXG_RUN). A layer whose runtime is not installed
# is skipped: exit 77 with one line saying what is missing (CMake: SKIP_RETURN_CODE 77).
#
# Creates (once) the user exgtest, a per-test directory under /tmp (mode 755) holding a copy
# of the binary and of the scripts (so any user can run them), then runs the script with a
# clean environment:
#   PATH, HOME=$T/home, LANG=C.UTF-8, EXG=<copied binary>, T=<temp dir owned by the runner>,
#   O=<temp dir under /var/lib owned by the runner: outside the workspace, /tmp and /var/tmp>, EXG_AS=root|user, EXG_BUILD_DIR=<build dir>,
#   EXG_LAYER=process|container|gvisor
# Removes everything afterwards and returns the script's exit status.
set -uo pipefail

if [ $# -ne 4 ] && [ $# -ne 5 ]; then
    echo "usage: $0 <root|user> <script> <exguardian> <build-dir> [process|container|gvisor|microvm]" >&2
    exit 2
fi
as=$1 script=$2 exe=$3 builddir=$4 layer=${5:-${EXG_LAYER:-process}}
test_user=exgtest
here=$(cd "$(dirname "$0")" && pwd)

case "$as" in root|user) ;; *) echo "run.sh: first argument must be root or user" >&2; exit 2 ;; esac
case "$layer" in
    process) ;;
    container)
        if ! command -v crun >/dev/null && ! command -v runc >/dev/null; then
            echo "skip: the container layer needs crun or runc, neither is installed (make deps installs them)"
            exit 77
        fi ;;
    gvisor)
        if ! command -v runsc >/dev/null; then
            echo "skip: the gvisor layer needs runsc, which is not installed (make deps installs it)"
            exit 77
        fi ;;
    microvm)
        # (by hand, not in `make test`: the layer scripts boot one guest per sandbox under TCG)
        if ! command -v qemu-system-x86_64 >/dev/null || [ ! -s "$builddir/microvm/vmlinux" ]; then
            echo "skip: the microvm layer needs qemu-system-x86_64 and the guest image in $builddir/microvm"
            exit 77
        fi ;;
    *) echo "run.sh: layer must be process, container, gvisor or microvm (got '$layer')" >&2; exit 2 ;;
esac
if [ "$(id -u)" -ne 0 ]; then
    echo "run.sh: must run as root (it creates the test user and runs tests as root and as $test_user)" >&2
    exit 1
fi
if [ ! -x "$exe" ]; then
    echo "run.sh: exguardian binary not found or not executable: $exe" >&2
    exit 1
fi
if [ ! -f "$script" ]; then
    echo "run.sh: no such test script: $script" >&2
    exit 1
fi

# The test user, created once (serialised: root and user runs may overlap under ctest -j).
if ! id -u "$test_user" >/dev/null 2>&1; then
    (
        flock 9
        id -u "$test_user" >/dev/null 2>&1 || useradd -m -s /bin/bash "$test_user"
    ) 9>/run/lock/exguardian-it-useradd.lock || { echo "run.sh: useradd $test_user failed" >&2; exit 1; }
fi
# A member of Debian's group `users` (gid 100) as well, so that scripts can give a workspace
# directory a group that is not the user's own (test_workspace_places.sh), as shared setups do.
if getent group users >/dev/null && ! id -nG "$test_user" | tr ' ' '\n' | grep -qx users; then
    usermod -aG users "$test_user" || { echo "run.sh: usermod -aG users $test_user failed" >&2; exit 1; }
fi

if [ "$as" = user ]; then
    # Report (never change) the host's rules for unprivileged user namespaces.
    for k in /proc/sys/kernel/unprivileged_userns_clone /proc/sys/user/max_user_namespaces \
             /proc/sys/kernel/apparmor_restrict_unprivileged_userns; do
        [ -r "$k" ] && echo "# ${k#/proc/sys/} = $(cat "$k")"
    done
    runner=$test_user
else
    runner=root
fi

D=$(mktemp -d /tmp/exg-it.XXXXXX) || exit 1
O=$(mktemp -d /var/lib/exg-it.XXXXXX) || { rm -rf "$D"; exit 1; }
cleanup() {
    # --one-file-system: never descend into a mount a broken sandbox may have left behind.
    rm -rf --one-file-system "$D" "$O" 2>/dev/null || rm -rf "$D" "$O"
}
trap cleanup EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

chmod 755 "$D" "$O"
install -m 755 "$exe" "$D/exguardian"
# escape-test --sandbox runs the static probe program found beside exguardian in foreign sandboxes.
[ -x "$(dirname "$exe")/exguardian-probe" ] && install -m 755 "$(dirname "$exe")/exguardian-probe" "$D/exguardian-probe"
# exguardian alone: it carries the containers' pid 1 (src/pid1/image.hpp).
install -m 644 "$here/lib.sh" "$D/lib.sh"
name=$(basename "$script")
install -m 644 "$script" "$D/$name"
T=$D/t
mkdir -m 755 "$T" "$T/home"
chown "$runner:" "$T" "$T/home" "$O"

# npm packages the client scripts need (lib.sh's npm_pinned), kept between runs and clones, one
# cache per runner (a user's install is never what root runs).
npm_cache=/var/cache/exguardian-tests/npm/$runner
mkdir -p "$npm_cache" && chown "$runner:" "$npm_cache"

# Debian packages a script runs unpacked, never installed: its header names them on a line
# "# unpacked-debs: PKG...". (docker.io: its postinst would start a dockerd on this host.) Each
# is fetched with apt-get download once per version and unpacked into
# /var/cache/exguardian-tests/debs/PKG_VERSION (kept between runs and clones: docker.io is 36 MB
# and 145 MB unpacked), built aside and renamed into place; /var/cache/exguardian-tests/debs/PKG
# links to it. Here, as root and before an egress script enters its world (no mirror there). A
# package that cannot be fetched is said here; the script's checks that need it then fail.
unpacked=/var/cache/exguardian-tests/debs
mkdir -p "$unpacked"
for pkg in $(sed -n 's/^# unpacked-debs: //p' "$script"); do
    (
        flock 9
        ver=$(apt-cache policy "$pkg" 2>/dev/null | sed -n 's/^ *Candidate: //p')
        case $ver in ""|"(none)") echo "# run.sh: no candidate version of $pkg (apt-get update?)"; exit 1 ;; esac
        dir=$unpacked/${pkg}_${ver//:/%}
        if [ ! -d "$dir" ]; then
            tmp=$(mktemp -d "$unpacked/.unpack.XXXXXX") || exit 1
            if (cd "$tmp" && apt-get download -q "$pkg=$ver" >/dev/null 2>&1) && dpkg-deb -x "$tmp"/*.deb "$tmp/root"; then
                chmod 755 "$tmp/root" && mv -T "$tmp/root" "$dir"
            else echo "# run.sh: apt-get download $pkg=$ver or its unpacking failed"; fi
            rm -rf "$tmp"
        fi
        [ -d "$dir" ] && ln -sfn "$(basename "$dir")" "$unpacked/$pkg"
    ) 9>/run/lock/exguardian-it-debs.lock
done
env_vars=(
    EXG_TEST_UNPACKED_DEBS="$unpacked"
    EXG_TEST_NPM_CACHE="$npm_cache"
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
    HOME="$T/home" LANG=C.UTF-8
    EXG="$D/exguardian" T="$T" O="$O" EXG_AS="$as" EXG_BUILD_DIR="$builddir" EXG_LAYER="$layer"
    EXG_IT_GVISOR_SDK="${EXG_IT_GVISOR_SDK:-1}"  # test_serve's SDK run on gVisor (0 skips it)
    EXG_MICROVM_IMAGE_DIR="$builddir/microvm"   # (the copied binary finds no image beside it)
    EXG_IT_MICROVM_FULL="${EXG_IT_MICROVM_FULL:-0}"   # (1: the microvm scripts' long parts too)
)

echo "# $name as $as on the $layer layer (runner=$runner, T=$T)"
cd "$T" || exit 1
# npm packages a script needs that the test world cannot fetch (it has no registry): its
# "# npm: SPEC..." line (pinned name@version), installed by lib.sh's npm_pinned into the runner's
# cache first; the script's own npm_pinned with the same SPECs then only links them.
npm_specs=$(sed -n 's/^# npm: //p' "$script" | head -n 1)
if [ -n "$npm_specs" ]; then
    npm_as=(); [ "$as" = root ] || npm_as=(runuser -u "$test_user" --)
    "${npm_as[@]}" env -i "${env_vars[@]}" bash -c 'source "$0" && npm_pinned "$T/npm" $1' "$D/lib.sh" "$npm_specs" </dev/null ||
        echo "run.sh: npm install of $npm_specs failed ($T/npm/npm.log)" >&2
fi
if [[ "$name" == test_egress_sandbox* ]]; then
    # Egress tests run inside a test world of network namespaces that root builds here
    # (tests/integration/egress_world.sh); the script itself runs in its client namespace,
    # as root or as the test user, and reads the world's layout from EGW_* variables.
    # shellcheck source=egress_world.sh
    source "$here/egress_world.sh"
    trap '_egw_exit; cleanup' EXIT
    world_up || { echo "run.sh: the test world did not come up" >&2; exit 1; }
    if [[ "$name" == test_egress_sandbox_tools* ]]; then
        # shellcheck source=egress_world_extra.sh
        source "$here/egress_world_extra.sh"
        world_extra_up || { echo "run.sh: the test world's extra servers did not come up" >&2; exit 1; }
    fi
    if [[ "$name" == test_egress_sandbox_microvm_privileged* ]]; then
        # (the registry's certificate is from the world's CA: world_secrets_up makes it and the trust store)
        # shellcheck source=egress_world_secrets.sh
        source "$here/egress_world_secrets.sh"
        world_secrets_up || { echo "run.sh: the test world's CA and HTTPS servers did not come up" >&2; exit 1; }
        world_registry_up "$here" "$unpacked" || { echo "run.sh: the test world's registry did not come up" >&2; exit 1; }
        world_vpn_up "$unpacked" || echo "# run.sh: the test world's OpenVPN server did not come up (the script's VPN check fails)"
        world_sshd_up "$unpacked" || echo "# run.sh: the test world's sshd did not come up (the script's sshfs check fails)"
    fi
    # (test_egress_sandbox_serve: network.rules' headers; as the user it stops before them.)
    if [[ "$name" == test_egress_sandbox_secrets* || "$name" == test_egress_sandbox.sh || ( "$name" == test_egress_sandbox_serve* && "$as" = root ) ]]; then
        # shellcheck source=egress_world_secrets.sh
        source "$here/egress_world_secrets.sh"
        world_secrets_up || { echo "run.sh: the test world's HTTPS echo servers did not come up" >&2; exit 1; }
    fi
    if [[ "$name" == test_egress_sandbox.sh ]]; then  # (srt's parentProxy: a proxy of the user's)
        world_parent_proxy_up || { echo "run.sh: the test world's parent proxy did not come up" >&2; exit 1; }
        install -m 644 "$here/parent_proxy.py" "$T/parent_proxy.py"
    fi
    env_vars+=(EGW_LOG="$EGW_LOG" EGW_BIG_SHA="$EGW_BIG_SHA" EGW_PARENT_LOG="$EGW_PARENT_LOG")
    if [ "$as" = root ]; then
        in_client env -i "${env_vars[@]}" bash "$D/$name" </dev/null
    else
        in_client_as "$test_user" env -i "${env_vars[@]}" bash "$D/$name" </dev/null
    fi
elif [ "$as" = root ]; then
    env -i "${env_vars[@]}" bash "$D/$name" </dev/null
else
    runuser -u "$test_user" -- env -i "${env_vars[@]}" bash "$D/$name" </dev/null
fi
status=$?
echo "# $name as $as on the $layer layer: exit $status"
exit "$status"
