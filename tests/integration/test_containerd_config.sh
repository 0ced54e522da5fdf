#!/usr/bin/env bash
# deploy/containerd (issue 46): configure.sh adds exguardian's runtimes to the node's containerd
# so that its CRI plugin loads with the default runtime runc AND exguardian, exguardian-gvisor
# there, SystemdCgroup as kubelet's cgroup driver, and the operator's CRI settings kept (before
# 2.0 an imported drop-in replaced the whole CRI section: no runc, the plugin failed, every pod of
# the node down). Debian's containerd (1.6) is started for real on each shape of config.toml a
# node has: Debian's packaged one (a CRI section naming no runtimes), `containerd config default`
# (runc named, a sandbox image of the operator's), none at all. Each containerd runs in this
# test's own mount and network namespaces with its root, state, socket and opt directories
# under $T (the machine's containerd is never touched); `ctr plugins ls` must show the CRI plugin
# ok. A second run of configure.sh changes nothing. containerd 2.x is not installed here: its
# drop-ins are only rendered and parsed (test_cri_containerd_versions.sh runs pods on Debian's
# 1.7 and 2.x with them). As the unprivileged user: configure.sh on the same files,
# containerd not started.
. "$(dirname "$0")/lib.sh"

need_source_tree deploy/containerd/configure.sh python3
if ! command -v containerd >/dev/null || ! command -v ctr >/dev/null; then
    echo "skip: containerd is not installed (Debian: containerd; make deps installs it)"; exit 77
fi
CONF=$SRC/deploy/containerd/configure.sh
note "$(containerd --version)"

# node NAME: a fresh node root $T/NAME (etc/containerd, var/lib/kubelet) and its own paths.
paths() {  # the top-level keys that keep a containerd of the test under $T/$1
    printf 'root = "%s"\nstate = "%s"\n' "$T/$1/var/lib/containerd" "$T/$1/run/containerd"
}
grpc_table() { printf '[grpc]\n  address = "%s"\n' "$T/$1/run/containerd/containerd.sock"; }
opt_table() { printf '[plugins."io.containerd.internal.v1.opt"]\n  path = "%s"\n' "$T/$1/opt/containerd"; }

# start_ctd NAME: containerd with the node's config.toml, in a mount and network namespace of
# its own; plugins ls and the log are kept in $T/NAME/{plugins,log}.
start_ctd() {
    local n=$1
    timeout 60 unshare -m -n --propagation private bash -c '
        ip link set lo up 2>/dev/null
        containerd --config "$1/etc/containerd/config.toml" >"$1/log" 2>&1 & p=$!
        for i in $(seq 100); do [ -S "$1/run/containerd/containerd.sock" ] && break; sleep 0.1; done
        ctr --address "$1/run/containerd/containerd.sock" plugins ls >"$1/plugins" 2>&1
        kill $p; wait $p' _ "$T/$n"
}
cri_ok() { grep -Eq '^io\.containerd\.grpc\.v1[[:space:]]+cri[[:space:]].*[[:space:]]ok[[:space:]]*$' "$T/$1/plugins"; }
# runtime_in_log NAME RUNTIME WANT: the CRI plugin's config, as it logs it, has RUNTIME with WANT
# in its entry.
runtime_in_log() {
    grep -o 'Start cri plugin with config.*' "$T/$1/log" | grep -Eq "[ \[]$2:\{Type:io\.containerd\.runc\.v2 [^}]*$3"
}
# loads NAME SYSTEMD: the CRI plugin ok, runc (the default) and both exguardian runtimes there,
# each with SystemdCgroup SYSTEMD, the handlers' links as runc binaries.
loads() {
    local n=$1 s=$2
    start_ctd "$n"
    check "$n: containerd's CRI plugin loads (ctr plugins ls: cri ok)" cri_ok "$n"
    cri_ok "$n" || note "$(grep -E 'cri|level=error' "$T/$n/log" | tail -n 3)"
    check "$n: runc (the default runtime) there, SystemdCgroup:$s" runtime_in_log "$n" runc "SystemdCgroup:$s"
    check "$n: exguardian there, BinaryName exguardian-runtime-default, SystemdCgroup:$s" \
        runtime_in_log "$n" exguardian "BinaryName:/usr/local/bin/exguardian-runtime-default SystemdCgroup:$s"
    check "$n: exguardian-gvisor there, BinaryName exguardian-runtime-gvisor, SystemdCgroup:$s" \
        runtime_in_log "$n" exguardian-gvisor "BinaryName:/usr/local/bin/exguardian-runtime-gvisor SystemdCgroup:$s"
    check "$n: exguardian's pod annotations exguardian.dev/* passed" \
        runtime_in_log "$n" exguardian 'PodAnnotations:\[exguardian\.dev/\*\]'
    check "$n: default_runtime_name still runc" grep -q 'DefaultRuntimeName:runc ' "$T/$n/log"
}
# As the unprivileged user configure.sh runs on the same files; containerd is not started.
if [ "$EXG_AS" != root ]; then
    loads() { skip "$1: containerd runs as root only: not started as $EXG_AS"; }
    start_ctd() { :; }
fi

# 1. Debian's packaged config.toml: a CRI section (CNI paths) naming no runtime. Kubelet's config
# names the systemd driver.
n=debian
mkdir -p "$T/$n/etc/containerd" "$T/$n/var/lib/kubelet"
{ echo "version = 2"; paths $n; echo; grpc_table $n; echo
  cat <<'TOML'
[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "/etc/cni/net.d"
TOML
  opt_table $n | sed 's/^/  /'; } > "$T/$n/etc/containerd/config.toml"
printf 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncgroupDriver: systemd\n' \
    > "$T/$n/var/lib/kubelet/config.yaml"
mkdir -p "$T/$n/etc/containerd/conf.d"
echo '# the drop-in of earlier versions of deploy/' > "$T/$n/etc/containerd/conf.d/exguardian.toml"
expect_output_contains "SystemdCgroup = true" sh "$CONF" --root "$T/$n"
check "$n: the earlier versions' drop-in in conf.d removed (1.6 would replace the CRI section with it)" \
    test ! -e "$T/$n/etc/containerd/conf.d/exguardian.toml"
loads $n true
[ "$EXG_AS" = root ] && check "$n: the operator's CNI bin_dir kept" grep -q 'NetworkPluginBinDir:/usr/lib/cni ' "$T/$n/log"
cp "$T/$n/etc/containerd/config.toml" "$T/$n/first.toml"
expect_output_contains "unchanged:" sh "$CONF" --root "$T/$n"
check "$n: a second run leaves config.toml as it was" cmp -s "$T/$n/first.toml" "$T/$n/etc/containerd/config.toml"

# 2. `containerd config default` (kubeadm's instructions): runc named, a sandbox image of the
# operator's; kubelet's config names no driver (kubelet's default: cgroupfs).
n=default
mkdir -p "$T/$n/etc/containerd" "$T/$n/var/lib/kubelet"
containerd config default 2>/dev/null | sed -e "s|\"/var/lib/containerd\"|\"$T/$n/var/lib/containerd\"|" \
    -e "s|\"/run/containerd|\"$T/$n/run/containerd|" -e "s|\"/opt/containerd\"|\"$T/$n/opt/containerd\"|" \
    -e 's|sandbox_image = .*|sandbox_image = "example.invalid/pause:exg-test"|' > "$T/$n/etc/containerd/config.toml"
check "$n: the config names only the test's paths" bash -c \
    "! grep -Eq '\"/(var/lib|run|opt)/containerd' '$T/$n/etc/containerd/config.toml'"
printf 'apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n' > "$T/$n/var/lib/kubelet/config.yaml"
expect_output_contains "SystemdCgroup = false" sh "$CONF" --root "$T/$n"
loads $n false
[ "$EXG_AS" = root ] && check "$n: the operator's sandbox image kept" grep -q 'SandboxImage:example.invalid/pause:exg-test ' "$T/$n/log"
check "$n: runc named once (the operator's table, none added)" \
    test "$(grep -c 'runtimes\.runc\]' "$T/$n/etc/containerd/config.toml")" = 1
# The operator changes kubelet's driver: a run of configure.sh follows it.
expect_output_contains "SystemdCgroup = true" sh "$CONF" --root "$T/$n" --cgroup-driver systemd
check "$n: after the driver changed, exguardian's SystemdCgroup follows" bash -c \
    "[ \$(grep -c 'SystemdCgroup = true' '$T/$n/etc/containerd/config.toml') = 2 ] && [ \$(grep -c 'BEGIN exguardian' '$T/$n/etc/containerd/config.toml') = 1 ]"

# 3. No config.toml at all, no kubelet config: the driver must be named.
n=none
mkdir -p "$T/$n"
run sh "$CONF" --root "$T/$n"
check "$n: no kubelet config and no --cgroup-driver: an error naming both" bash -c \
    "[ $STATUS = 1 ] && grep -q 'cgroup-driver' <<<\"\$1\" && grep -q 'kubelet' <<<\"\$1\"" _ "$ERR"
expect_status 0 sh "$CONF" --root "$T/$n" --cgroup-driver cgroupfs
# This containerd's own paths: a config.toml written by configure.sh, with the test's keys in front.
{ paths $n; cat "$T/$n/etc/containerd/config.toml"; echo; grpc_table $n; opt_table $n; } > "$T/$n/c.toml"
mv "$T/$n/c.toml" "$T/$n/etc/containerd/config.toml"
loads $n false

run sh "$CONF" --root "$T/$n" --cgroup-driver docker
check "a cgroup driver that is none of kubelet's: exit 1, named" bash -c "[ $STATUS = 1 ] && grep -q \"'docker'\" <<<\"\$1\"" _ "$ERR"

# The way deploy/ said before (issue 46): the runtimes as a drop-in through `imports` on 1.6.
# containerd replaces config.toml's CRI section with the drop-in's: the plugin fails to load.
# (The check above can fail, and this is why configure.sh edits config.toml on 1.x.)
n=imports
mkdir -p "$T/$n/etc/containerd/conf.d"
{ echo "version = 2"; paths $n; echo "imports = [\"$T/$n/etc/containerd/conf.d/*.toml\"]"; echo; grpc_table $n; echo
  opt_table $n; } > "$T/$n/etc/containerd/config.toml"
{ echo "version = 2"; sed 's/^\([[:space:]]*SystemdCgroup = \)false.*/\1true/' "$SRC/deploy/containerd/containerd-1.x-runtimes.toml"; } \
    > "$T/$n/etc/containerd/conf.d/exguardian.toml"
start_ctd $n
old_way_fails() { ! cri_ok $n && grep -q 'no corresponding runtime configured' "$T/$n/log"; }
[ "$EXG_AS" = root ] && check "1.6 with the runtimes as an imported drop-in: the CRI plugin fails (runc gone)" old_way_fails

# containerd 2.x (not installed here): the drop-in in conf.d, imports added to config.toml; parsed.
n=v2
mkdir -p "$T/$n/etc/containerd"
printf 'version = 3\n\n[plugins."io.containerd.cri.v1.images"]\n  snapshotter = "overlayfs"\n' > "$T/$n/etc/containerd/config.toml"
expect_output_contains "SystemdCgroup = true" sh "$CONF" --root "$T/$n" --cgroup-driver systemd --containerd-version "containerd github.com/containerd/containerd/v2 v2.0.4 1a43cb6a"
run python3 - "$T/$n/etc/containerd" <<'PY'
import sys, tomllib
d = sys.argv[1]
c = tomllib.load(open(d + "/config.toml", "rb"))
x = tomllib.load(open(d + "/conf.d/exguardian.toml", "rb"))
assert c["imports"] == ["/etc/containerd/conf.d/*.toml"], c
assert c["plugins"]["io.containerd.cri.v1.images"]["snapshotter"] == "overlayfs"
r = x["plugins"]["io.containerd.cri.v1.runtime"]["containerd"]["runtimes"]
assert x["version"] == 3 and set(r) == {"runc", "exguardian", "exguardian-gvisor"}, r
assert all(v["options"]["SystemdCgroup"] is True for v in r.values()), r
print("v2-ok")
PY
check "containerd 2.x: conf.d/exguardian.toml (version 3, SystemdCgroup true) and imports in config.toml" \
    grep -q v2-ok <<<"$OUT"
[ "$STATUS" = 0 ] || show_last
# containerd 2.x on a version 2 config.toml (Debian's 2.x package ships one; a node upgraded
# from 1.x, whose block of configure.sh's goes to the drop-in): the drop-in is version 2 too, as
# 2.x merges only a drop-in of config.toml's own version (test_cri_containerd_versions.sh runs
# pods on it). `containerd config default`'s `imports = []` gets the glob.
n=v2-on-2x
mkdir -p "$T/$n/etc/containerd"
printf 'version = 2\n\n[plugins]\n  [plugins."io.containerd.grpc.v1.cri"]\n    sandbox_image = "example.invalid/pause:exg-test"\n' > "$T/$n/etc/containerd/config.toml"
expect_status 0 sh "$CONF" --root "$T/$n" --cgroup-driver cgroupfs --containerd-version 1.7.24
expect_output_contains "config version 2" sh "$CONF" --root "$T/$n" --cgroup-driver systemd --containerd-version "containerd github.com/containerd/containerd/v2 2.1.9+unknown"
printf 'version = 3\nimports = []\n' > "$T/$n/v3.toml"
mkdir -p "$T/$n-3/etc/containerd" && cp "$T/$n/v3.toml" "$T/$n-3/etc/containerd/config.toml"
expect_output_contains "config version 3" sh "$CONF" --root "$T/$n-3" --cgroup-driver systemd --containerd-version 2.1.9
run python3 - "$T/$n/etc/containerd" "$T/$n-3/etc/containerd" <<'PY2'
import sys, tomllib
d, d3 = sys.argv[1:3]
c = tomllib.load(open(d + "/config.toml", "rb"))
x = tomllib.load(open(d + "/conf.d/exguardian.toml", "rb"))
assert c["imports"] == ["/etc/containerd/conf.d/*.toml"], c
assert c["plugins"]["io.containerd.grpc.v1.cri"] == {"sandbox_image": "example.invalid/pause:exg-test"}, c
r = x["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]["runtimes"]
assert x["version"] == 2 and set(r) == {"runc", "exguardian", "exguardian-gvisor"}, x
assert all(v["options"]["SystemdCgroup"] is True for v in r.values()), r
c3 = tomllib.load(open(d3 + "/config.toml", "rb"))
assert c3["imports"] == ["/etc/containerd/conf.d/*.toml"], c3
assert tomllib.load(open(d3 + "/conf.d/exguardian.toml", "rb"))["version"] == 3
print("v2-on-2x-ok")
PY2
check "containerd 2.x on a version 2 config.toml: a version 2 drop-in (runc too), the 1.x block gone, the operator's table kept; imports = [] filled" \
    grep -q v2-on-2x-ok <<<"$OUT"
[ "$STATUS" = 0 ] || show_last
finish
