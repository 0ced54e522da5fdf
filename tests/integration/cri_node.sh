# cri_node_config NODE SOCKET: writes NODE/etc/containerd/config.toml for a containerd with the
# CRI plugin whose root, state, socket, opt directory and CNI configuration are all under NODE
# (the machine's containerd, if any, untouched), the pause image localhost/exg-pause:1, CNI
# plugins from Debian's containernetworking-plugins. Shared by tests/integration/test_cri.sh and
# bench/cri.sh; deploy/containerd/configure.sh --root NODE then adds exguardian's runtimes.
cri_node_config() {
    local n=$1 sock=$2
    mkdir -p "$n/etc/containerd" "$n/etc/cni/net.d"
    cat > "$n/etc/containerd/config.toml" <<TOML
version = 2
root = "$n/var/lib/containerd"
state = "$n/run/containerd"

[grpc]
  address = "$sock"

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "$n/opt/containerd"
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "localhost/exg-pause:1"
    netns_mounts_under_state_dir = true
    disable_apparmor = true
    # This machine's root cannot lower its oom_score_adj (a root shell's echo -998 fails too; the
    # pause container's -998 failed in crun with EACCES): containerd's switch for such nodes.
    restrict_oom_score_adj = true
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "$n/etc/cni/net.d"
TOML
}
