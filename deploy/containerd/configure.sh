#!/bin/sh
# Adds exguardian's runtimes to containerd's CRI plugin the way the node's containerd reads them
# (docs/kubernetes.md, "containerd configuration"):
#   containerd 1.6, 1.7: containerd-1.x-runtimes.toml (and containerd-1.x-runc.toml where
#     config.toml names no runtimes.runc) appended to config.toml itself, between marker lines
#     that a later run replaces: 1.x does not merge imported files (one would replace the whole
#     CRI section);
#   containerd 2.x: a drop-in in conf.d, imported from config.toml, in config.toml's config
#     version: containerd-2.x-exguardian.toml (version 3), or containerd-1.x-runtimes.toml's
#     tables as version 2 where config.toml is version 2 (Debian's package ships one).
# SystemdCgroup is set to kubelet's cgroup driver: --cgroup-driver, or cgroupDriver in kubelet's
# config file (kubelet's default, cgroupfs, when the file names none); neither: an error.
#
# configure.sh [--root DIR] [--cgroup-driver systemd|cgroupfs] [--containerd-version V]
#   --root: the node's / (the DaemonSet: /host); files are edited below it.
#   --containerd-version: `containerd --version`'s output or a version (default: run it).
# Prints what it changed; exit 0 (also when nothing changed), 1 with the reason on error.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root="" driver="" version=""
while [ $# -gt 0 ]; do
    case $1 in
        --root) root=${2%/}; shift 2 ;;
        --cgroup-driver) driver=$2; shift 2 ;;
        --containerd-version) version=$2; shift 2 ;;
        *) echo "configure.sh: unknown argument $1" >&2; exit 1 ;;
    esac
done
die() { echo "configure.sh: $*" >&2; exit 1; }
config=$root/etc/containerd/config.toml
confd=$root/etc/containerd/conf.d
kubelet=$root/var/lib/kubelet/config.yaml

if [ -z "$driver" ]; then
    [ -f "$kubelet" ] || die "no --cgroup-driver and no kubelet config at $kubelet: pass --cgroup-driver systemd|cgroupfs (kubelet's cgroupDriver)"
    driver=$(sed -n 's/^cgroupDriver:[[:space:]]*"\{0,1\}\([a-z]*\)"\{0,1\}[[:space:]]*$/\1/p' "$kubelet")
    [ -n "$driver" ] || driver=cgroupfs  # kubelet's own default
fi
case $driver in
    systemd) systemd=true ;;
    cgroupfs) systemd=false ;;
    *) die "cgroup driver '$driver': systemd or cgroupfs (kubelet's cgroupDriver)" ;;
esac

[ -n "$version" ] || version=$(containerd --version 2>/dev/null) || die "containerd --version failed: pass --containerd-version"
# "containerd github.com/containerd/containerd 1.6.20~ds1 ..." or "v2.0.1" or "1.7.2"
major=$(printf '%s\n' "$version" | tr ' ' '\n' | sed -n 's/^v\{0,1\}\([0-9]\{1,\}\)\.[0-9]\{1,\}.*/\1/p' | head -n 1)
minor=$(printf '%s\n' "$version" | tr ' ' '\n' | sed -n 's/^v\{0,1\}[0-9]\{1,\}\.\([0-9]\{1,\}\).*/\1/p' | head -n 1)
[ -n "$major" ] || die "no version in '$version'"

# A template with SystemdCgroup set to the driver's value.
render() { sed "s/^\([[:space:]]*SystemdCgroup = \)false.*/\1$systemd/" "$here/$1"; }

begin="# BEGIN exguardian runtimes (configure.sh replaces this block on its next run)"
end="# END exguardian runtimes"
mkdir -p "$(dirname "$config")"
[ -f "$config" ] || : > "$config"

case $major in
1)
    [ "$minor" -ge 6 ] || die "containerd $major.$minor: 1.6 or later is needed"
    # What is in config.toml without a block of an earlier run.
    rest=$(sed "/^$begin\$/,/^$end\$/d" "$config")
    if printf '%s\n' "$rest" | grep -q '^[[:space:]]*version[[:space:]]*=[[:space:]]*2'; then :
    elif ! printf '%s\n' "$rest" | grep -q '[^[:space:]]'; then rest="version = 2"
    else die "$config is not a version 2 config (its tables would not name the CRI plugin as these do): convert it with 'containerd config migrate' or write 'version = 2' tables"
    fi
    {
        printf '%s\n' "$rest"
        echo "$begin"
        printf '%s\n' "$rest" | grep -q '^[[:space:]]*\[plugins\."io\.containerd\.grpc\.v1\.cri"\.containerd\.runtimes\.runc\]' ||
            render containerd-1.x-runc.toml
        render containerd-1.x-runtimes.toml
        echo "$end"
    } > "$config.exguardian-new"
    if cmp -s "$config.exguardian-new" "$config"; then rm -f "$config.exguardian-new"; echo "unchanged: $config"
    else mv "$config.exguardian-new" "$config"; echo "changed: $config (containerd $major.$minor, SystemdCgroup = $systemd)"; fi
    # The drop-in earlier versions of deploy/ installed: imported on 1.x, it replaces the CRI section.
    if [ -e "$confd/exguardian.toml" ]; then
        rm -f "$confd/exguardian.toml"
        echo "changed: removed $confd/exguardian.toml (containerd $major.$minor would replace the CRI section with it)"
    fi
    ;;
*)
    # 2.x merges an imported file into config.toml table by table, but only one of config.toml's
    # own config version: Debian's 2.x package ships a version 2 config.toml, and with a version 3
    # drop-in 2.1 dropped config.toml's CRI settings (CNI paths, sandbox image: "Ignoring unknown
    # key"), and containerd's later sources refuse to start with it ("drop-in config version 3
    # higher than root config version 2"). So the drop-in is written in config.toml's version: 3 (or none given), or 2,
    # the 1.x tables, which 2.x migrates as it does config.toml.
    cfgver=$(sed "/^$begin\$/,/^$end\$/d" "$config" | sed -n 's/^[[:space:]]*version[[:space:]]*=[[:space:]]*\([0-9]\{1,\}\).*/\1/p' | head -n 1)
    mkdir -p "$confd"
    case ${cfgver:-3} in
        3) render containerd-2.x-exguardian.toml > "$confd/exguardian.toml.new" ;;
        2) { echo "# containerd 2.x whose config.toml is version 2: exguardian's runtimes as a version 2 drop-in"
             echo "# (deploy/containerd/configure.sh; containerd-1.x-runtimes.toml's tables, merged by 2.x)"
             echo "version = 2"
             # runc named too (the 2.x drop-in's reason): its SystemdCgroup is kubelet's driver as well
             { render containerd-1.x-runc.toml; render containerd-1.x-runtimes.toml; } | grep -v '^#'; } > "$confd/exguardian.toml.new" ;;
        *) die "$config is config version $cfgver: containerd $major.$minor reads 2 or 3" ;;
    esac
    if cmp -s "$confd/exguardian.toml.new" "$confd/exguardian.toml"; then rm -f "$confd/exguardian.toml.new"; echo "unchanged: $confd/exguardian.toml"
    else mv "$confd/exguardian.toml.new" "$confd/exguardian.toml"; echo "changed: $confd/exguardian.toml (containerd $major.$minor, config version ${cfgver:-3}, SystemdCgroup = $systemd)"; fi
    # A node upgraded from 1.x keeps the block configure.sh appended there: the drop-in has it now.
    if grep -q "^$begin\$" "$config"; then
        sed "/^$begin\$/,/^$end\$/d" "$config" > "$config.exguardian-new" && mv "$config.exguardian-new" "$config"
        echo "changed: $config (the 1.x block of exguardian runtimes removed: conf.d/exguardian.toml has them)"
    fi
    glob=/etc/containerd/conf.d/*.toml
    if ! grep -q '^[[:space:]]*imports[[:space:]]*=.*/etc/containerd/conf\.d/\*\.toml' "$config"; then
        if grep -q '^[[:space:]]*imports[[:space:]]*=[[:space:]]*\[[^]]*\][[:space:]]*$' "$config"; then
            # A one-line list (`containerd config default` writes imports = []): the glob added to it.
            sed 's|^\([[:space:]]*imports[[:space:]]*=[[:space:]]*\[\)[[:space:]]*\([^]]*[^][:space:]]\)\{0,1\}[[:space:]]*\]|\1\2, "'"$glob"'"]|; s|\[, "|["|' \
                "$config" > "$config.exguardian-new"
        elif grep -q '^[[:space:]]*imports[[:space:]]*=' "$config"; then
            die "$config has an imports list over several lines without $glob: add it there"
        else
            # A top-level key: before the first table.
            awk -v line="imports = [\"$glob\"]" 'BEGIN { done = 0 } !done && /^[[:space:]]*\[/ { print line; done = 1 }
                 { print } END { if (!done) print line }' "$config" > "$config.exguardian-new"
        fi
        mv "$config.exguardian-new" "$config"
        echo "changed: $config (imports $glob)"
    fi
    ;;
esac
