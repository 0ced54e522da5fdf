#!/usr/bin/env bash
# Privileged tools on the microVM layer (issue 43): as guest root (--microvm-root) the guest
# kernel has what they need and a scratch disk holds their storage.
# In the egress test world (run.sh: the script runs in its client namespace, so the nested
# container's connections to the metadata address and a literal address, were the proxy to let
# them through, would meet the world's own addresses and never a real one).
# One guest boot for every check (TCG: slow), a script run as root in the guest:
#   - podman (the unprivileged user's run only): an image from a local archive (podman load) run
#     on its bridged network, its TCP to the metadata address and a literal address captured and
#     refused by the proxy (audit lines that say "nested container"); its DNS (to the public
#     server podman gives it) taken to the guest's resolver: an allowed name by the policy's
#     wildcard (not in /etc/hosts, so only DNS finds it) resolved (busybox nslookup) and fetched through the proxy (the
#     world's server logs it), a name whose address is the metadata one and a name off the list
#     unresolved; cgroup2 mounted; /etc writable on the disk (root's run instead runs
#     the command `recommend --situation privileged-tools` prints, as printed: a podman --rootfs run)
#   - dockerd and docker (the unprivileged user's run, the same guest): Debian's docker.io unpacked
#     by run.sh (never installed on the host: its postinst starts a dockerd), the same image
#     loaded and run on docker's bridge; its TCP to the metadata address and a literal address
#     refused with audit lines naming its address (172.17.0.2), its allowed name resolved and
#     fetched through the proxy, a name off the list unresolved
#   - pulls (the unprivileged user's run): podman and docker pull an image from the world's
#     registry (run.sh: world_registry_up, Debian's docker-registry unpacked by run.sh, behind TLS
#     on 203.0.113.10:5000 with a certificate from the world's CA, which the guest trusts as the
#     client side does: its /etc/ssl/certs bundle) under an allowed name, tp.wild.test:5000, with
#     TLS verified (no --tls-verify=false, no --insecure-registry), and run it; the registry logs
#     the pulls and the proxy audits them; a pull from denied.test:5000 (off the list) fails,
#     audited as refused, and never reaches it
#   - a VPN (root's run): Debian's openvpn (unpacked by run.sh) over TCP through the proxy to the
#     world's OpenVPN server (run.sh: world_vpn_up) as tp.wild.test:1194: allowed and audited, the
#     tunnel up; the guest's walls still in front of it (a ping into it EPERM, TCP to its far end
#     captured and refused by the proxy, audited as the guest's own, not a nested container's:
#     its source is the tunnel's address); then guest root flushes the guest's nftables (what
#     transparent egress off boots with) and the tunnel carries its request to denied.test's
#     address beyond the endpoint, unseen by the proxy
#   - root's run: `escape-test --layer microvm --run-arg=--microvm-root`, the whole catalogue
#     (guest root's own probes: the view's 9p root bound read-write, the guest's nftables
#     flushed, a nested container's egress and HOME; the host-facing ones; the kernel probes not
#     applicable), each probe or batch a guest of escape-test's own: 0 escaped, 0 failed
#   - root's run: `exguardian serve` with a template for privileged tools (microvm, allowRoot, a
#     policy with the scratch disk's size and the allowed names), driven through envd's API as
#     E2B's SDK calls it: as E2B's root a nested container's fetch allowed and its metadata
#     request refused in the sandbox's audit log ("nested container"), a FUSE mount, a tun
#     device, podman's store kept from one command to the next (the guest-root session serve
#     starts), DELETE ends it
#   - sshfs (root's run): Debian's sshfs (unpacked by run.sh) mounts the world's sshd (run.sh:
#     world_sshd_up, Debian's openssh-server unpacked) as tp.wild.test:2222 through the proxy,
#     reads a file and writes one back
#   - overlayfs mounts and works; /dev/fuse exists and a FUSE filesystem (fuse-overlayfs) mounts
#   - tun: a tun device is made; veth and a bridge; iptables-nft MASQUERADE (nft_compat, xt_),
#     br_netfilter's sysctls
#   - the scratch disk: /var/lib an overlay whose writes go to the disk (the view's /var/lib
#     still readable), /var/lib/docker made, the disk filled to ENOSPC
# On the host: the disk is an unnamed sparse file in EXG_MICROVM_DISK_DIR. As root that
# directory is a 160M tmpfs of a private mount namespace, so what the fill took on the host is
# measured exactly while the guest waits (a handshake through the workspace): at most the disk's
# size, the host's filesystem never full, and nothing left after the run. A disk larger than
# the free space there is refused before the start (125). Skipped (77) without qemu or the image.
# unpacked-debs: docker.io openvpn liblzo2-2 libpkcs11-helper1 libnl-genl-3-200 docker-registry openssh-server sshfs
here=$(cd "$(dirname "$0")" && pwd)
EXG_LAYER=microvm
. "$here/lib.sh"

image=${EXG_BUILD_DIR:-}/microvm
if ! command -v qemu-system-x86_64 >/dev/null; then
    echo "skip: the microvm layer needs qemu-system-x86_64 (make deps installs qemu-system-x86)"; exit 77
fi
if [ ! -s "$image/vmlinux" ] || [ ! -s "$image/initramfs.cpio" ]; then
    echo "skip: no guest image in $image (built by \`make\`: CMake target microvm-guest)"; exit 77
fi
export EXG_MICROVM_IMAGE_DIR=$image
new_workspace || finish

# $O (under the host's /var/lib, read-only in the view): written in the guest, the write stays
# on the scratch disk's overlay, never on the host.
echo "${O:?}" > "$WS/o-path"
disks=$T/disks
mkdir -p "$disks"
disk_mib=64

# The guest's script: one line "NAME=ok" (or NAME=why) per check; after the fill it says
# "filled" in the workspace and waits for the host's "go" (the host measures meanwhile).
cat > "$WS/guest.sh" <<'EOF'
r() { echo "$1=$2"; }
id -u | grep -qx 0 && r root ok
mkdir -p /tmp/l /tmp/u /tmp/w /tmp/m && echo lower > /tmp/l/f
if mount -t overlay ov -o lowerdir=/tmp/l,upperdir=/tmp/u,workdir=/tmp/w /tmp/m && echo upper >> /tmp/m/f \
   && [ "$(cat /tmp/m/f /tmp/u/f | tr '\n' ' ')" = "lower upper lower upper " ] && [ "$(cat /tmp/l/f)" = lower ]; then
    r overlay ok; else r overlay "failed: $(dmesg 2>/dev/null | tail -2)"; fi
[ -c /dev/fuse ] && r fuse_dev ok
if command -v fuse-overlayfs >/dev/null; then
    mkdir -p /tmp/fl /tmp/fu /tmp/fw /tmp/fm && echo fuse-lower > /tmp/fl/g
    if fuse-overlayfs -o lowerdir=/tmp/fl,upperdir=/tmp/fu,workdir=/tmp/fw /tmp/fm 2>/tmp/fuse.err \
       && grep -q "^fuse-overlayfs /tmp/fm fuse" /proc/mounts && echo more >> /tmp/fm/g && grep -qx more /tmp/fu/g; then
        r fuse_mount ok; else r fuse_mount "failed: $(cat /tmp/fuse.err)"; fi
    fusermount3 -u /tmp/fm 2>/dev/null || umount /tmp/fm
else r fuse_mount "skip: fuse-overlayfs not installed on the host"; fi
ip tuntap add exgtun0 mode tun 2>/tmp/tun.err && ip link show exgtun0 >/dev/null && r tun ok || r tun "failed: $(cat /tmp/tun.err)"
ip link add exgv0 type veth peer name exgv1 && ip link add exgbr0 type bridge && ip link set exgv0 master exgbr0 \
  && ip link set exgbr0 up && r bridge ok
[ -e /proc/sys/net/bridge/bridge-nf-call-iptables ] && r br_netfilter ok
iptables -t nat -A POSTROUTING -s 10.88.0.0/16 ! -o exgbr0 -j MASQUERADE 2>/tmp/ipt.err \
  && iptables -A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT 2>>/tmp/ipt.err \
  && iptables -t nat -S POSTROUTING | grep -q MASQUERADE && r iptables_nft ok || r iptables_nft "failed: $(cat /tmp/ipt.err)"
# podman as guest root (run as the unprivileged user only: one guest's worth of TCG time): an
# image loaded from a local archive, run on podman's default bridged network (its cgroups in the
# guest's cgroup2, its CNI lock and state written to /etc and /var/lib, i.e. the disk). root's
# run tries `recommend --situation privileged-tools`' command instead (podman run --rootfs).
if [ -e podman-checks ]; then
    if podman load -q -i img.tar >/tmp/pl.out 2>&1 && out=$(podman run --rm localhost/exg-bb:1 -c 'echo hi-image; ip -4 addr show eth0
          for a in 169.254.169.254 10.1.2.3; do printf "GET / HTTP/1.0\r\n\r\n" | nc -w 5 $a 80; done
          echo "resolv: $(grep ^nameserver /etc/resolv.conf | tr "\n" " ")"
          for n in tp.wild.test meta.wild.test denied.test; do echo "dns $n: $(nslookup $n 2>&1 | tr "\n\t" "  ")"; done
          a=$(nslookup tp.wild.test 2>/dev/null | sed -n "s/^Address: *\([0-9.]*\)$/\1/p" | head -1)
          echo "fetch: $a $(printf "GET /nested-podman HTTP/1.0\r\nHost: tp.wild.test\r\n\r\n" | nc -w 10 "$a" 80 | tail -1)"' 2>/tmp/pr.err) \
       && echo "$out" | grep -qx hi-image && echo "$out" | grep -q "inet 10\.88\."; then
        r podman_image ok; else r podman_image "failed: $(cat /tmp/pl.out /tmp/pr.err | tail -3 | tr '\n' ' ')"; fi
    # (busybox's nslookup: its own DNS client; its static glibc getaddrinfo finds no NSS in the image)
    echo "$out" | grep -E "^(resolv|dns|fetch):? "
    echo "$out" | grep -q "^dns tp.wild.test: .*Name: *tp.wild.test" && echo "$out" | grep -q "^fetch: 198\.1[89]\.[0-9.]* hello from 203.0.113.10" \
        && r nested_dns ok || r nested_dns "failed: $(echo "$out" | grep -E "^(resolv|dns|fetch):? " | tr '\n' ' ')"
    # Refused: the lookup was made and answered no address for the name (the resolver says so
    # as NXDOMAIN or as an empty answer; either gives the container nothing to connect to).
    # (A resolver that never answered is no refusal: busybox then says "no servers could be reached".)
    no_address() { echo "$out" | grep -qi "^dns $1: .*\(can't find\|Non-authoritative answer\)" \
        && ! echo "$out" | grep -q "^dns $1: .*Name: *$1"; }
    no_address meta.wild.test && no_address denied.test \
        && r nested_dns_refused ok || r nested_dns_refused "failed: $(echo "$out" | grep "^dns" | tr '\n' ' ')"
    # Pulls through the proxy: the world's registry (TLS, its certificate verified against the
    # guest's trust store) under an allowed name, tp.wild.test:5000 (the policy's *.wild.test),
    # then under a name off the list.
    if podman pull -q tp.wild.test:5000/exg-pulled:1 >/tmp/pp.out 2>&1 \
       && [ "$(podman run --rm --network none tp.wild.test:5000/exg-pulled:1 -c 'cat /pulled' 2>>/tmp/pp.out)" = "pulled through the proxy" ]; then
        r podman_pull ok; else r podman_pull "failed: $(tail -3 /tmp/pp.out | tr '\n' ' ')"; fi
    if ! podman pull -q denied.test:5000/exg-pulled:1 >/tmp/pd.out 2>&1; then
        r podman_pull_refused ok; else r podman_pull_refused "failed: the pull from denied.test:5000 worked"; fi
    echo "pull denied.test: $(tail -1 /tmp/pd.out)"
    grep -q "^cgroup2 /sys/fs/cgroup cgroup2 rw" /proc/mounts && r cgroup2 ok
fi
# dockerd as guest root (the unprivileged user's run, beside podman): Debian's docker.io unpacked
# on the host (run.sh, never installed there), seen through the view; containerd and runc the
# host's. Its store on the disk (/var/lib/docker, overlay2 on ext4), its state in the guest's
# /run, its iptables rules through iptables-nft. The same image (docker load reads its
# manifest.json) run on docker's default bridge (172.17.0.0/16): its TCP to the metadata
# address and to 10.1.2.4 met the capture and the proxy, its DNS (docker gives public servers:
# the guest's resolv.conf names only loopback) the guest's resolver.
if [ -e docker-checks ]; then
    dk=$(cat docker-dir)
    export PATH=$dk/usr/sbin:$dk/usr/bin:$PATH DOCKER_HOST=unix:///run/docker.sock
    dockerd --data-root /var/lib/docker --exec-root /run/docker --pidfile /run/docker.pid -H "$DOCKER_HOST" \
        --userland-proxy=false --log-level warn >/tmp/dockerd.log 2>&1 &
    i=0; until docker version >/dev/null 2>&1 || [ $i -ge 1800 ]; do sleep 0.1; i=$((i + 1)); done
    docker version --format 'dockerd {{.Server.Version}}, storage on /var/lib/docker' 2>&1 | head -1
    if docker load -q -i img.tar >/tmp/dl.out 2>&1 && dout=$(docker run --rm localhost/exg-bb:1 -c 'echo hi-docker; ip -4 addr show eth0
          for a in 169.254.169.254 10.1.2.4; do printf "GET / HTTP/1.0\r\n\r\n" | nc -w 5 $a 80; done
          for n in tp.wild.test denied.test; do echo "dns $n: $(nslookup $n 2>&1 | tr "\n\t" "  ")"; done
          a=$(nslookup tp.wild.test 2>/dev/null | sed -n "s/^Address: *\([0-9.]*\)$/\1/p" | head -1)
          echo "fetch: $a $(printf "GET /nested-docker HTTP/1.0\r\nHost: tp.wild.test\r\n\r\n" | nc -w 10 "$a" 80 | tail -1)"' 2>/tmp/dr.err) \
       && echo "$dout" | grep -qx hi-docker && echo "$dout" | grep -q "inet 172\.17\."; then
        r docker_image ok; else r docker_image "failed: $(cat /tmp/dl.out /tmp/dr.err /tmp/dockerd.log 2>/dev/null | tail -4 | tr '\n' ' ')"; fi
    echo "$dout" | grep -E "^(dns|fetch):? " | sed 's/^/docker /'
    echo "$dout" | grep -q "^dns tp.wild.test: .*Name: *tp.wild.test" && echo "$dout" | grep -q "^fetch: 198\.1[89]\.[0-9.]* hello from 203.0.113.10" \
        && r docker_dns ok || r docker_dns "failed: $(echo "$dout" | grep -E "^(dns|fetch):? " | tr '\n' ' ')"
    echo "$dout" | grep -qi "^dns denied.test: .*\(can't find\|Non-authoritative answer\)" && ! echo "$dout" | grep -q "^dns denied.test: .*Name: *denied.test" \
        && r docker_dns_refused ok || r docker_dns_refused "failed: $(echo "$dout" | grep "^dns denied" | tr '\n' ' ')"
    if docker pull -q tp.wild.test:5000/exg-pulled:1 >/tmp/dp.out 2>&1 \
       && [ "$(docker run --rm --network none tp.wild.test:5000/exg-pulled:1 -c 'cat /pulled' 2>>/tmp/dp.out)" = "pulled through the proxy" ]; then
        r docker_pull ok; else r docker_pull "failed: $(tail -3 /tmp/dp.out | tr '\n' ' ')"; fi
    kill "$(cat /run/docker.pid 2>/dev/null)" 2>/dev/null
    i=0; while [ -e /run/docker.pid ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
fi
# sshfs (root's run): Debian's sshfs (unpacked by run.sh) mounts the world's sshd (run.sh:
# world_sshd_up) as tp.wild.test:2222, allowed by name: its ssh connection is captured and goes
# through the proxy like any TCP of the guest; a file read, one written back. (Before the VPN's
# checks: they end with the guest's rules flushed.)
if [ -e sshfs-checks ]; then
    install -m 600 sshfs.key /tmp/sshfs.key && mkdir -p /tmp/sshfs
    if "$(cat sshfs-bin)" -p 2222 -o ssh_command="ssh -F /dev/null -i /tmp/sshfs.key -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes" \
           "root@tp.wild.test:$(cat sshfs-dir)" /tmp/sshfs 2>/tmp/sshfs.err \
       && grep -q " /tmp/sshfs fuse.sshfs " /proc/mounts && [ "$(cat /tmp/sshfs/file)" = "served over sshfs" ] \
       && echo "written in the guest" > /tmp/sshfs/from-guest; then
        r sshfs ok; else r sshfs "failed: $(tail -3 /tmp/sshfs.err | tr '\n' ' ')"; fi
    umount /tmp/sshfs 2>/dev/null
fi
# A VPN (root's run): OpenVPN over TCP through the sandbox's HTTP proxy to the world's server,
# allowed by name (tp.wild.test:1194): the tunnel comes up on a tun device. The guest's own
# walls still hold over it (transparent egress, the default): a ping into the tunnel is dropped
# by the guest's output filter (EPERM), and TCP to the far end is captured and goes to the
# proxy, which refuses the address (an audit line), so nothing of the guest enters the tunnel.
if [ -e vpn-checks ]; then
    LD_LIBRARY_PATH=$(cat vpn-libs) $(cat vpn-bin) --dev tun --proto tcp-client --remote tp.wild.test 1194 \
        --http-proxy 127.0.0.1 3128 --ifconfig 10.8.0.2 10.8.0.1 --secret vpn.key --cipher AES-256-CBC --auth SHA256 \
        --connect-retry-max 3 --verb 3 >/tmp/ovpn.log 2>&1 &
    ovpn=$!
    i=0; until grep -q "Initialization Sequence Completed" /tmp/ovpn.log || [ $i -ge 900 ]; do sleep 0.1; i=$((i + 1)); done
    if grep -q "Initialization Sequence Completed" /tmp/ovpn.log && ip -4 addr show | grep -q "inet 10\.8\.0\.2 peer 10\.8\.0\.1"; then
        r vpn ok; else r vpn "failed: $(grep -iE "error|fail|refus|proxy" /tmp/ovpn.log | tail -3 | tr '\n' ' ')"; fi
    busybox ping -c 1 -W 5 10.8.0.1 >/tmp/ping.out 2>&1
    printf "GET /through-the-tunnel HTTP/1.0\r\n\r\n" | busybox nc -w 5 10.8.0.1 80 >/tmp/tnc.out 2>&1
    grep -q "sendto: Operation not permitted" /tmp/ping.out && ! grep -q "^HTTP/1.[01] 200" /tmp/tnc.out \
        && r vpn_walls ok || r vpn_walls "failed: ping: $(tail -1 /tmp/ping.out); tcp: $(head -1 /tmp/tnc.out)"
    # Transparent egress off (what "network": {"transparent": false} boots: no rules in the
    # guest) is, for guest root, one command away: it flushes the guest's nftables. Then the
    # tunnel carries what guest root routes into it, here to denied.test's address (off the
    # list) beyond the endpoint, and the proxy never sees it: what allowing a VPN endpoint means.
    if nft flush ruleset 2>/tmp/nft.err && [ "$(nft list ruleset | grep -c .)" = 0 ] \
       && ip route add 203.0.113.11/32 dev tun0 2>>/tmp/nft.err; then
        tout=$(printf "GET /unwalled-vpn-request HTTP/1.0\r\nHost: denied.test\r\n\r\n" | busybox nc -w 5 203.0.113.11 80 2>&1 | tail -1)
        echo "vpn unwalled: $tout"
        echo "$tout" | grep -q "hello from 203.0.113.11" && r vpn_unwalled ok || r vpn_unwalled "failed: $tout"
    else r vpn_unwalled "failed: $(cat /tmp/nft.err)"; fi
    kill "$ovpn" 2>/dev/null
fi
echo x > /etc/exg-guest-etc && grep -q "^overlay /etc overlay" /proc/mounts && r etc_cow ok
grep -q "^overlay /var/lib overlay" /proc/mounts && [ -d /var/lib/dpkg ] && r varlib_overlay ok
o=$(cat o-path)
echo x > "$o/from-guest" && [ -n "$o" ] && r varlib_cow ok
mkdir -p /var/lib/docker/x /var/lib/containers/storage /var/lib/exg-new && echo x > /var/lib/containers/storage/probe \
  && grep -q " /var/lib/containers ext4" /proc/mounts && r varlib_write ok || r varlib_write "failed: $(grep /var/lib /proc/mounts)"
size=$(df -k /var/lib/docker | awk 'NR==2 {print $2}')
dd if=/dev/zero of=/var/lib/docker/fill bs=1M 2>/tmp/dd.err; sync
grep -q "No space left on device" /tmp/dd.err && r enospc ok || r enospc "failed: $(cat /tmp/dd.err)"
echo "disk_kib=$size"
echo "filled_kib=$(du -k /var/lib/docker/fill | cut -f1)"
touch filled
i=0; while [ ! -e go ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i + 1)); done
r done ok
EOF

if [ "$EXG_AS" = user ]; then
    need_source_tree tests/integration/oci_image.py python3 busybox
    mkdir -p "$WS/r/bin" && cp "$(command -v busybox)" "$WS/r/bin/" && for a in sh echo ip nc grep tr nslookup sed head tail; do ln -s busybox "$WS/r/bin/$a"; done
    python3 "$SRC/tests/integration/oci_image.py" --docker-manifest "$WS/r" localhost/exg-bb:1 "$WS/img.tar" /bin/sh \
        && touch "$WS/podman-checks"
    # docker.io unpacked by run.sh (the header's unpacked-debs line); containerd and runc installed.
    dk=$(readlink -f "${EXG_TEST_UNPACKED_DEBS:-/nonexistent}/docker.io")
    if [ -x "$dk/usr/sbin/dockerd" ] && command -v containerd runc >/dev/null; then
        echo "$dk" > "$WS/docker-dir" && touch "$WS/docker-checks"
    else
        fail "docker.io unpacked by run.sh (${EXG_TEST_UNPACKED_DEBS:-}/docker.io: '$dk'), containerd and runc are needed for dockerd in the guest"
    fi
fi

# The VPN (root's run): the world's OpenVPN server (run.sh: world_vpn_up) and its static key.
vpn=$(dirname "$EGW_LOG")/vpn
if [ "$EXG_AS" = root ]; then
    if [ -s "$vpn/key" ] && [ -x "${EXG_TEST_UNPACKED_DEBS:-/nonexistent}/openvpn/usr/sbin/openvpn" ]; then
        cp "$vpn/key" "$WS/vpn.key" && cp "$vpn/libs" "$WS/vpn-libs" \
            && readlink -f "$EXG_TEST_UNPACKED_DEBS/openvpn/usr/sbin/openvpn" > "$WS/vpn-bin" && touch "$WS/vpn-checks"
    else fail "the world's OpenVPN server and openvpn unpacked by run.sh are needed for the VPN check ($vpn)"; fi
fi

# sshfs (root's run): the world's sshd (run.sh: world_sshd_up), its client key, Debian's sshfs unpacked.
sshd_dir=$(dirname "$EGW_LOG")/sshd
if [ "$EXG_AS" = root ]; then
    if [ -s "$sshd_dir/client_key" ] && [ -x "${EXG_TEST_UNPACKED_DEBS:-/nonexistent}/sshfs/usr/bin/sshfs" ]; then
        cp "$sshd_dir/client_key" "$WS/sshfs.key" && echo "$sshd_dir/srv" > "$WS/sshfs-dir" \
            && readlink -f "$EXG_TEST_UNPACKED_DEBS/sshfs/usr/bin/sshfs" > "$WS/sshfs-bin" && touch "$WS/sshfs-checks"
    else fail "the world's sshd and sshfs unpacked by run.sh are needed for the sshfs check ($sshd_dir)"; fi
fi

# The host's side of the handshake: waits for "filled", writes what the disk directory's
# filesystem says then, and says "go".
host_side() {
    local i=0
    while [ ! -e "$WS/filled" ] && [ $i -lt 1500 ]; do sleep 0.1; i=$((i + 1)); done
    df -k --output=used,avail "$disks" | tail -1 > "$T/df-filled"
    ls -A "$disks" > "$T/ls-filled"
    touch "$WS/go"
}
used_before=$(df -k --output=used "$disks" | tail -1)
guest() {
    (cd "$WS" && EXG_MICROVM_DISK_DIR=$disks exec timeout -k 5 400 "$EXG" run --layer microvm --microvm-root \
        --scratch-disk ${disk_mib}M --allow-domain '*.wild.test' --audit-log "$T/audit.jsonl" "$@")
}
if [ "$EXG_AS" = root ]; then
    # A tmpfs of 160M in a mount namespace of this test alone: the host's filesystem measured.
    export -f guest host_side
    export WS T EXG disks disk_mib
    run unshare -m --propagation private bash -c '
        mount -t tmpfs -o size=160m,mode=0755 exg-disks "$disks" || exit 99
        df -k --output=used "$disks" | tail -1 > "$T/df-before"
        host_side & h=$!
        guest -- sh guest.sh; s=$?
        wait $h
        df -k --output=used "$disks" | tail -1 > "$T/df-after"
        ls -A "$disks" > "$T/ls-after"
        exit $s'
else
    echo "$used_before" > "$T/df-before"
    host_side & h=$!
    run guest -- sh guest.sh
    wait $h
    df -k --output=used "$disks" | tail -1 > "$T/df-after"
    ls -A "$disks" > "$T/ls-after"
fi
if [ "$STATUS" -eq 0 ] && grep -qx root=ok <<<"$OUT" && grep -qx done=ok <<<"$OUT"; then
    ok "one guest as root with a ${disk_mib}M scratch disk ran the checks"
else fail "the guest's run (status $STATUS)"; show_last; fi
checks="overlay fuse_dev fuse_mount tun bridge br_netfilter iptables_nft etc_cow varlib_overlay varlib_cow varlib_write enospc"
if [ -e "$WS/podman-checks" ]; then checks="$checks podman_image nested_dns nested_dns_refused podman_pull podman_pull_refused cgroup2"
else skip "podman load and run on the bridge: checked by the unprivileged user's run (one guest's worth of TCG time)"; fi
[ -e "$WS/vpn-checks" ] && checks="$checks vpn vpn_walls vpn_unwalled"
[ -e "$WS/sshfs-checks" ] && checks="$checks sshfs"
if [ -e "$WS/docker-checks" ]; then checks="$checks docker_image docker_dns docker_dns_refused docker_pull"
elif [ "$EXG_AS" = root ]; then skip "dockerd and docker run on its bridge: checked by the unprivileged user's run"; fi
for c in $checks; do
    line=$(grep "^$c=" <<<"$OUT" | head -1)
    case $line in
        "$c=ok") ok "in the guest: $c" ;;
        "$c=skip:"*) skip "in the guest: ${line#*=}" ;;
        *) fail "in the guest: $c (${line:-no answer})" ;;
    esac
done
# The nested container's connections (bridged in the guest, forwarded there) met the same
# transparent capture and proxy: the metadata address and a literal address off the list refused,
# with audit lines that say they came from a nested container; its allowed name went through the
# proxy to the world's server, resolved by the guest's resolver. (The guest has no NIC: nothing
# of it could reach an address without the proxy.)
if [ -e "$WS/podman-checks" ]; then
    nested='"origin":"nested container"'
    if audit_has "$T/audit.jsonl" "{\"event\":\"egress\",\"decision\":\"refused\",\"protocol\":\"transparent\",\"host\":\"169.254.169.254\",\"port\":80,$nested}" \
         "{\"event\":\"egress\",\"decision\":\"refused\",\"protocol\":\"transparent\",\"host\":\"10.1.2.3\",\"port\":80,$nested}"; then
        ok "a nested container's TCP to the metadata address and to 10.1.2.3 went to the proxy and was refused, with audit lines saying \"nested container\""
    else fail "a nested container's TCP: no refusal from a nested container in the audit log"; fi
    if audit_has "$T/audit.jsonl" "{\"event\":\"egress\",\"decision\":\"allowed\",\"protocol\":\"transparent\",\"host\":\"tp.wild.test\",\"port\":80,\"address\":\"203.0.113.10\",$nested}" \
         '{"event":"dns","host":"tp.wild.test","qtype":"A","decision":"allowed"}' \
         '{"event":"dns","host":"meta.wild.test","decision":"refused"}' '{"event":"dns","host":"denied.test","decision":"refused"}' \
       && grep -q '^203\.0\.113\.10 GET /nested-podman host=tp\.wild\.test' "$EGW_LOG"; then
        ok "a nested container's fetch of an allowed name: resolved by the guest's resolver, through the proxy (audit: nested container), the world's server logged it"
    else fail "a nested container's fetch of an allowed name (the server's log: $(grep nested "$EGW_LOG" | tr '\n' ' '))"; fi
    # The resolver's lines say so too: the query came through the guest's DNAT from the
    # container (the relay sends who asked), so its lines carry the nested origin.
    if audit_has "$T/audit.jsonl" "{\"event\":\"dns\",\"host\":\"tp.wild.test\",\"qtype\":\"A\",\"decision\":\"allowed\",$nested}" \
         "{\"event\":\"dns\",\"host\":\"meta.wild.test\",\"decision\":\"refused\",$nested}" \
         "{\"event\":\"dns\",\"host\":\"denied.test\",\"decision\":\"refused\",$nested}"; then
        ok "the resolver's audit lines for a nested container's queries (allowed and refused) say \"nested container\""
    else fail "the resolver's audit lines of a nested container's queries carry no nested origin"; fi
    if [ -e "$WS/docker-checks" ]; then
        docker_nested='"origin":"nested container","origin_address":"172.17.0.2"'
        if audit_has "$T/audit.jsonl" "{\"event\":\"egress\",\"decision\":\"refused\",\"protocol\":\"transparent\",\"host\":\"169.254.169.254\",\"port\":80,$docker_nested}" \
             "{\"event\":\"egress\",\"decision\":\"refused\",\"protocol\":\"transparent\",\"host\":\"10.1.2.4\",\"port\":80,$docker_nested}"; then
            ok "a docker container's TCP (172.17.0.2, dockerd's bridge) to the metadata address and to 10.1.2.4 went to the proxy and was refused, with audit lines saying \"nested container\""
        else fail "a docker container's TCP: no refusal from 172.17.0.2 in the audit log"; fi
        if audit_has "$T/audit.jsonl" "{\"event\":\"egress\",\"decision\":\"allowed\",\"protocol\":\"transparent\",\"host\":\"tp.wild.test\",\"port\":80,\"address\":\"203.0.113.10\",$docker_nested}" \
           && grep -q '^203\.0\.113\.10 GET /nested-docker host=tp\.wild\.test' "$EGW_LOG"; then
            ok "a docker container's fetch of an allowed name went through the proxy (audit: nested container 172.17.0.2), the world's server logged it"
        else fail "a docker container's fetch of an allowed name (the server's log: $(grep nested "$EGW_LOG" | tr '\n' ' '))"; fi
        if audit_has "$T/audit.jsonl" "{\"event\":\"dns\",\"host\":\"tp.wild.test\",\"qtype\":\"A\",\"decision\":\"allowed\",$docker_nested}" \
             "{\"event\":\"dns\",\"host\":\"denied.test\",\"decision\":\"refused\",$docker_nested}"; then
            ok "the docker container's queries (to the public server dockerd gave it) met the guest's resolver, audited as 172.17.0.2's"
        else fail "the resolver's audit lines of the docker container's queries"; fi
    fi
    # The pulls: the registry (TLS only) served them under the allowed name, through the proxy
    # (its audit line), to podman and to dockerd (their user agents: each store is its own); the
    # name off the list was refused (a line of the guest's own, no nested origin) and never
    # reached the registry. Its log, JSON lines, as "METHOD URI host=HOST agent=AGENT".
    reglog=$(dirname "$EGW_LOG")/registry/registry.log
    python3 - "$reglog" > "$T/registry.requests" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    try:
        e = json.loads(line)
    except ValueError:
        continue
    if e.get("msg") == "response completed":
        print(e.get("http.request.method"), e.get("http.request.uri"), "host=" + str(e.get("http.request.host")),
              "agent=" + str(e.get("http.request.useragent", "")).split("/")[0])
PY
    grep -v "host=203\.0\.113\.10:" "$T/registry.requests" | sed 's/^/# registry: /'  # (not the pushes that filled it)
    manifests() { grep -cE "^(GET|HEAD) /v2/exg-pulled/manifests/[^ ]+ host=tp\.wild\.test:5000 agent=$1\$" "$T/registry.requests"; }
    blobs() { grep -cE "^GET /v2/exg-pulled/blobs/sha256:[0-9a-f]+ host=tp\.wild\.test:5000 agent=$1\$" "$T/registry.requests"; }
    if [ "$(manifests containers)" -ge 1 ] && [ "$(blobs containers)" -ge 1 ] \
       && audit_has "$T/audit.jsonl" '{"event":"egress","decision":"allowed","host":"tp.wild.test","port":5000}'; then
        ok "podman pulled from the world's TLS registry (Debian's docker-registry) under an allowed name, the certificate verified, through the proxy ($(manifests containers) manifest, $(blobs containers) blob requests; audit: allowed tp.wild.test:5000)"
    else fail "podman's pull from the TLS registry under an allowed name ($(grep -c . "$T/registry.requests") registry requests)"; show_last; fi
    if [ ! -e "$WS/docker-checks" ]; then :
    elif [ "$(manifests docker)" -ge 1 ] && [ "$(blobs docker)" -ge 1 ]; then
        ok "dockerd pulled from the same TLS registry through the proxy, its certificate verified ($(manifests docker) manifest, $(blobs docker) blob requests)"
    else fail "dockerd's pull from the TLS registry: no requests of docker's in its log"; fi
    if ! grep -q 'host=denied\.test' "$T/registry.requests" && python3 - "$T/audit.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
sys.exit(0 if any(l.get("host") == "denied.test" and l.get("decision") == "refused" and "origin" not in l for l in lines) else 1)
PY
    then ok "a pull from a registry under a name off the list (denied.test:5000) was refused and audited, and reached nothing"
    else fail "the pull from denied.test:5000: $(grep "^pull denied" <<<"$OUT") (registry log: $(grep -c denied "$T/registry.requests") lines)"; fi
    if ! grep -qE '^169\.254\.169\.254 |^10\.1\.2\.[34] |nested-(meta|denied)' "$EGW_LOG"; then
        ok "nothing of the nested container reached the metadata server or a name off the list"
    else fail "the world's servers saw: $(grep -E '^169|nested-' "$EGW_LOG" | tr '\n' ' ')"; fi
fi
# The VPN's transport was one connection the proxy judged by name (and audited); the server saw
# its client come from the proxy's side of the world (the client namespace, 198.51.100.1).
if [ -e "$WS/vpn-checks" ]; then
    if audit_has "$T/audit.jsonl" '{"event":"egress","decision":"allowed","host":"tp.wild.test","port":1194}' \
       && grep -q "Initialization Sequence Completed" "$vpn/server.log" && grep -q "198\.51\.100\.1" "$vpn/server.log"; then
        ok "OpenVPN over TCP through the proxy: allowed by name (tp.wild.test:1194, audited), the world's server brought the tunnel up"
    else fail "the VPN's transport through the proxy (server log: $(grep -E "Peer Connection|Initialization|TCP connection established" "$vpn/server.log" | tr '\n' ' '))"; fi
    # Its source was the tunnel's address (10.8.0.2, the route's choice), an address of the
    # guest's own: the line says it was the guest's (no "origin"), never a nested container's.
    if audit_has "$T/audit.jsonl" '{"event":"egress","decision":"refused","protocol":"transparent","host":"10.8.0.1","port":80}' \
       && ! grep '"host":"10\.8\.0\.1"' "$T/audit.jsonl" | grep -q '"origin"' \
       && ! grep -q "GET /through-the-tunnel " "$EGW_LOG"; then
        ok "the guest's TCP to the tunnel's far end was captured and refused by the proxy, audited as the guest's own (not a nested container's), never entering the tunnel"
    else fail "the guest's TCP to 10.8.0.1:80: no refusal of the guest's own in the audit log ($(grep -h '10\.8\.0\.' "$T/audit.jsonl" | tr '\n' ' '))"; fi
    # The tunnel's transport: OpenVPN's own CONNECT through the HTTP proxy, the guest's too.
    if ! grep '"port":1194' "$T/audit.jsonl" | grep -q '"origin"'; then
        ok "the VPN's transport (tp.wild.test:1194 through the HTTP proxy) is audited as the guest's own"
    else fail "the VPN's transport audited with an origin: $(grep '"port":1194' "$T/audit.jsonl" | head -1)"; fi
    # With the guest's rules gone (guest root flushed them, as transparent egress off never
    # sets them), the tunnel carried the guest's request to an address off the list; the proxy
    # saw only the tunnel's transport (no line of the guest's for 203.0.113.11).
    if grep -q '^203\.0\.113\.11 GET /unwalled-vpn-request' "$EGW_LOG" \
       && ! grep -q '"host":"203\.0\.113\.11"' "$T/audit.jsonl"; then
        ok "with the guest's rules flushed (transparent egress off), the tunnel carried the guest's request to denied.test's address beyond the endpoint, unseen by the proxy (what allowing a VPN endpoint means)"
    else fail "the unwalled tunnel: the world's log has $(grep -c unwalled-vpn-request "$EGW_LOG") such requests"; fi
fi
# sshfs: the world's sshd served the guest's mount through the proxy (allowed by name, audited;
# the server saw its client come from the proxy's side), and the guest's write reached it.
if [ -e "$WS/sshfs-checks" ]; then
    if audit_has "$T/audit.jsonl" '{"event":"egress","decision":"allowed","host":"tp.wild.test","port":2222}' \
       && grep -q "Accepted publickey for root from 198\.51\.100\.1" "$sshd_dir/log" \
       && [ "$(cat "$sshd_dir/srv/from-guest" 2>/dev/null)" = "written in the guest" ]; then
        ok "sshfs to an allowed host (tp.wild.test:2222) mounted through the proxy (audited), a file read and one written back"
    else fail "sshfs through the proxy (sshd's log: $(grep -E "Accepted|Connection|error" "$sshd_dir/log" | tail -2 | tr '\n' ' '))"; fi
fi
if [ ! -e /etc/exg-guest-etc ]; then ok "the guest's write to /etc stayed on its disk (nothing in the host's /etc)"
else fail "a guest write to /etc reached the host"; fi
if [ ! -e "$O/from-guest" ]; then ok "the guest's write below the host's /var/lib stayed on its disk (nothing on the host)"
else fail "a guest write below /var/lib reached the host ($O/from-guest)"; fi
disk_kib=$(sed -n 's/^disk_kib=//p' <<<"$OUT")
filled_kib=$(sed -n 's/^filled_kib=//p' <<<"$OUT")
if [ -n "$disk_kib" ] && [ "$disk_kib" -gt 0 ] && [ "$disk_kib" -le $((disk_mib * 1024)) ] \
   && [ -n "$filled_kib" ] && [ "$filled_kib" -gt $((disk_mib * 1024 / 2)) ]; then
    ok "the scratch disk is ${disk_kib} KiB in the guest; the fill wrote ${filled_kib} KiB before ENOSPC"
else fail "scratch disk sizes in the guest (disk '$disk_kib' KiB, filled '$filled_kib' KiB)"; fi

if [ "$EXG_AS" = root ]; then
    read -r used_filled avail_filled < "$T/df-filled" 2>/dev/null || used_filled=""
    if [ -n "$used_filled" ] && [ "$used_filled" -ge $((filled_kib / 2)) ] \
       && [ "$used_filled" -le $((disk_mib * 1024 + 1024)) ] && [ "$avail_filled" -gt 0 ]; then
        ok "on the host, while the disk was full: ${used_filled} KiB used of the disk directory's 160M (at most the disk's ${disk_mib}M), ${avail_filled} KiB still free"
    else fail "host space while the guest's disk was full: used '${used_filled}' KiB, free '${avail_filled:-}' KiB"; fi
    if [ "$(cat "$T/df-after")" -le 4 ] 2>/dev/null; then ok "after the run the disk directory's filesystem is empty again (the file is gone)"
    else fail "after the run the disk directory's filesystem still holds $(cat "$T/df-after") KiB"; fi
else
    skip "the host's space during the fill is measured as root (a tmpfs of the test's own)"
fi
if [ ! -s "$T/ls-filled" ] && [ ! -s "$T/ls-after" ]; then
    ok "the disk file has no name in its directory, during the run and after"
else fail "names in the disk directory: $(cat "$T/ls-filled" "$T/ls-after" | tr '\n' ' ')"; fi

# A disk larger than the free space of its directory is refused before anything starts.
free_kib=$(df -k --output=avail "$disks" | tail -1)
run bash -c "cd '$WS' && EXG_MICROVM_DISK_DIR='$disks' exec timeout -k 5 60 '$EXG' run --layer microvm --microvm-root \
    --scratch-disk $((free_kib / 1024 + 1024))M -- true"
if [ "$STATUS" -eq 125 ] && grep -q "scratch disk .* free there" <<<"$ERR"; then
    ok "a scratch disk larger than the host's free space there is refused (125)"
else fail "oversized scratch disk (status $STATUS)"; show_last; fi

# recommend --situation privileged-tools: its command works as printed (root's run: one more
# guest; the unprivileged user's run has podman in its guest above).
if [ "$EXG_AS" = root ]; then
    cmd=$("$EXG" recommend --situation privileged-tools | sed -n '/^try it/{n;s/^  //;p}')
    read -ra words <<<"$cmd"
    if [ "${words[0]:-}" = exguardian ]; then
        words[0]=$EXG
        run bash -c 'cd "$1" && shift && exec timeout -k 5 300 "$@"' _ "$WS" "${words[@]}"
        if [ "$STATUS" -eq 0 ] && grep -qx "hello from a nested container" <<<"$OUT"; then
            ok "recommend --situation privileged-tools: its command works as printed ($cmd)"
        else fail "recommend's command ($cmd): status $STATUS"; show_last; fi
    else fail "recommend --situation privileged-tools printed no command to try ('$cmd')"; fi
fi

# escape-test as guest root, the whole catalogue (root's run; each probe, or batch of probes,
# a guest restored from escape-test's own template, in its own test world): the host as safe
# as with an unprivileged guest user. Nothing escaped and nothing failed; the probes only
# guest root can try (the view's 9p root bound read-write, the guest's nftables flushed, a
# nested container's egress and HOME) and the host-facing ones (HOME, credentials, host
# sockets, the metadata address, the host's processes, set-id files) held. What is not
# applicable is listed (the test's output) and is only of two kinds: a call that reached the
# guest's own kernel, which guest root owns (allowed, or failed only on the probe's harmless
# arguments: no probe is held on such an answer; one the guest's kernel refuses, or that must
# be allowed, is judged), and limit-memory (a guest needs 384M).
# Under TCG here the whole catalogue took 321 s (213 probes, load 7-10), in place of the 12
# probes run before (docs/microvm.md).
if [ "$EXG_AS" = root ]; then
    esc_start=$SECONDS
    run bash -c 'cd "$1" && shift && exec timeout -k 5 1200 "$@"' _ "$WS" "$EXG" escape-test --layer microvm \
        --run-arg=--microvm-root --json "$T/escape.json"
    esc_secs=$((SECONDS - esc_start))
    verdicts=$(python3 - "$T/escape.json" <<'PY'
import json, sys
for p in json.load(open(sys.argv[1]))["probes"]:
    print(p["id"], p["verdict"], p["evidence"][:160].replace("\n", " "))
PY
)
    guest_kernel="skipped not applicable: guest root (--microvm-root) holds the guest kernel's privileges"
    echo "# escape-test, not applicable (the call reached the guest's own kernel): $(grep " $guest_kernel" <<<"$verdicts" | cut -d' ' -f1 | tr '\n' ' ')"
    grep -v " held " <<<"$verdicts" | grep -v " $guest_kernel" | sed 's/^/# escape-test (not held): /'
    count() { grep -ic " $1 " <<<"$verdicts"; }  # (the report writes ESCAPED and FAILED in capitals)
    must_hold="sandbox-in-place guest-own-kernel guest-root-view-write guest-root-flush-walls guest-root-nested-container
        seed-read-credentials persist-home-bashrc seed-docker-socket host-unix-socket net-direct-metadata proc-host-kill setid-file-left"
    bad=""
    for p in $must_hold; do grep -q "^$p held " <<<"$verdicts" || bad="$bad $p"; done
    odd_skips=$(grep " skipped " <<<"$verdicts" | grep -v " $guest_kernel" \
        | grep -v "^limit-memory skipped a guest needs at least" | cut -d' ' -f1 | tr '\n' ' ')
    # Held means refused: never a call the guest's kernel took and failed on its arguments.
    odd_held=$(grep " held .*NOT AS EXPECTED: failed: E" <<<"$verdicts" | grep -vE "failed: E(PERM|ACCES|NOSYS)" | cut -d' ' -f1 | tr '\n' ' ')
    total=$(grep -c . <<<"$verdicts")
    if [ "$STATUS" -eq 0 ] && [ "$total" -ge 200 ] && [ "$(count escaped)" = 0 ] && [ "$(count failed)" = 0 ] && [ -z "$bad" ] \
       && [ -z "$odd_skips" ] && [ -z "$odd_held" ] && grep -q "^kernel-mount-tmpfs skipped not applicable: guest root" <<<"$verdicts"; then
        ok "escape-test --layer microvm --run-arg=--microvm-root, the whole catalogue in ${esc_secs}s: $total probes, $(count held) held, 0 escaped, 0 failed, $(count skipped) not applicable (listed above: the guest's own kernel's calls, limit-memory)"
    else fail "escape-test as guest root (status $STATUS, $total probes, $(count escaped) escaped, $(count failed) failed; not held:$bad; skipped for another reason: $odd_skips; held on a call the guest's kernel took: $odd_held)"; show_last; fi
fi

# The same through `exguardian serve` (root's run: one more guest), E2B's API over a template
# for privileged tools: "layer": "microvm", "allowRoot": true and a policy of its own with the
# scratch disk's size and the allowed names. serve starts each sandbox as an `exguardian
# session --microvm-root` (the session's guest root held open between commands), so this is
# the session's check too. As E2B's root, through envd's process.Process/Start as E2B's SDK
# calls it (envd_start.py): a nested container (podman --rootfs, bridged) fetches an allowed
# name and the metadata address, a FUSE filesystem mounts, a tun device is made, and podman's
# store on the disk is still there in the next command; the sandbox's audit log (serve's, per
# sandbox) has the nested container's lines: its fetch allowed through the proxy, the metadata
# address refused, both saying "nested container"; DELETE ends the guest and its disk.
if [ "$EXG_AS" = root ]; then
    need_source_tree tests/integration/envd_start.py curl jq
    cat > "$T/priv-policy.json" <<JSON
{"resources": {"scratchDisk": "${disk_mib}M"}, "network": {"allowedDomains": ["*.wild.test"]}}
JSON
    cat > "$T/serve-templates.json" <<JSON
{"templates": {"privileged": {"layer": "microvm", "allowRoot": true, "memoryMB": 1024, "policy": "$T/priv-policy.json"}}}
JSON
    SKEY=priv-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
    echo "{\"tenants\": [{\"id\": \"p\", \"keys\": [\"$("$EXG" serve --hash-key "$SKEY")\"]}]}" > "$T/serve-tenants.json"
    (cd "$WS" && EXG_MICROVM_DISK_DIR=$disks exec "$EXG" serve --listen 127.0.0.1:0 --tenants "$T/serve-tenants.json" \
        --templates "$T/serve-templates.json" --state-dir "$T/serve-state") > "$T/serve.log" 2>&1 &
    serve_pid=$!
    track_bg "$serve_pid"
    _serve_up() { grep -q 'listening on 127.0.0.1:' "$T/serve.log" || ! kill -0 "$serve_pid" 2>/dev/null; }
    wait_for 20 _serve_up
    surl=http://127.0.0.1:$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$T/serve.log" | head -1)
    created=$(curl -s -m 300 -w '\n%{http_code}' -X POST "$surl/sandboxes" -H "X-API-KEY: $SKEY" \
        -H 'Content-Type: application/json' -d '{"templateID": "privileged", "timeout": 900}')
    sid=$(sed '$d' <<<"$created" | jq -r '.sandboxID // empty' 2>/dev/null)
    stok=$(sed '$d' <<<"$created" | jq -r '.envdAccessToken // empty' 2>/dev/null)
    # as_root LINE: one command as E2B's root; OUT its output, STATUS its exit code.
    as_root() {
        EXG_ENVD_TIMEOUT=300 python3 "$SRC/tests/integration/envd_start.py" "$surl" "$sid" "$stok" "$1" root > "$T/envd.out" 2>&1
        STATUS=$(sed -n 's/^#status //p' "$T/envd.out"); OUT=$(grep -v '^#status ' "$T/envd.out") ERR=""
    }
    if [ "$(tail -1 <<<"$created")" = 201 ] && [ -n "$sid" ]; then
        ok "serve: a sandbox from a microvm template with allowRoot and a policy of its own (scratch disk ${disk_mib}M, *.wild.test)"
        as_root 'id -u; df -k /var/lib/containers | awk "NR==2 {print \"disk_kib=\" \$2}"
            podman run --rm --http-proxy=false --rootfs /:O sh -c "echo in-nested; curl -sS -m 20 http://tp.wild.test/serve-nested; echo; curl -sS -m 10 http://169.254.169.254/serve-meta; echo meta=\$?" 2>&1
            podman images -q | wc -l > /var/lib/containers/exg-mark
            if command -v fuse-overlayfs >/dev/null; then
                mkdir -p /tmp/fl /tmp/fu /tmp/fw /tmp/fm && echo fuse-lower > /tmp/fl/g
                fuse-overlayfs -o lowerdir=/tmp/fl,upperdir=/tmp/fu,workdir=/tmp/fw /tmp/fm && grep -q "^fuse-overlayfs /tmp/fm fuse" /proc/mounts \
                    && cat /tmp/fm/g && fusermount3 -u /tmp/fm
            else echo fuse-overlayfs-absent; fi
            ip tuntap add exgtun0 mode tun && ip link show exgtun0 >/dev/null && echo tun-made'
        sed 's/^/# serve: /' <<<"$OUT"
        if [ "$STATUS" = 0 ] && [ "$(head -1 <<<"$OUT")" = 0 ] && grep -qx "disk_kib=[0-9]*" <<<"$OUT" \
           && [ "$(sed -n 's/^disk_kib=//p' <<<"$OUT")" -le $((disk_mib * 1024)) ]; then
            ok "serve: E2B's root is root of the guest (id -u 0), /var/lib/containers on the template's ${disk_mib}M scratch disk"
        else fail "serve: root and the scratch disk (status $STATUS)"; fi
        if grep -qx in-nested <<<"$OUT" && grep -q "hello from 203.0.113.10" <<<"$OUT" && grep -qE "^meta=(52|56)$" <<<"$OUT"; then
            ok "serve: podman run as E2B's root: the nested container fetched an allowed name, the metadata address got nothing"
        else fail "serve: the nested container's fetches"; fi
        if grep -qx fuse-overlayfs-absent <<<"$OUT"; then skip "serve: FUSE mount (fuse-overlayfs not installed on the host)"
        elif grep -qx fuse-lower <<<"$OUT"; then ok "serve: a FUSE filesystem (fuse-overlayfs) mounted and read as E2B's root"
        else fail "serve: the FUSE mount"; fi
        grep -qx tun-made <<<"$OUT" && ok "serve: a tun device made as E2B's root" || fail "serve: tun"
        as_root 'cat /var/lib/containers/exg-mark && podman run --rm --rootfs /:O echo again'
        [ "$STATUS" = 0 ] && grep -qx again <<<"$OUT" && grep -qx "[0-9]*" <<<"$(head -1 <<<"$OUT")" \
            && ok "serve: the next command finds podman's store on the disk and runs again (guest root held open)" \
            || { fail "serve: the second command (status $STATUS)"; show_last; }
        saudit=$T/serve-state/sandboxes/$sid/audit.jsonl
        nested='"origin":"nested container"'
        if audit_has "$saudit" "{\"event\":\"egress\",\"decision\":\"allowed\",\"protocol\":\"transparent\",\"host\":\"tp.wild.test\",\"port\":80,$nested}" \
             "{\"event\":\"egress\",\"decision\":\"refused\",\"protocol\":\"transparent\",\"host\":\"169.254.169.254\",\"port\":80,$nested}" \
           && grep -q '^203\.0\.113\.10 GET /serve-nested host=tp\.wild\.test' "$EGW_LOG" && ! grep -q 'serve-meta' "$EGW_LOG" \
           && jq -e -s "all(.tenant == \"p\" and .e2b_sandbox == \"$sid\")" "$saudit" >/dev/null; then
            ok "serve: the nested container's egress went through the sandbox's proxy: allowed tp.wild.test and refused 169.254.169.254, audited as \"nested container\" (tenant and sandbox tagged); the world saw only the allowed one"
        else fail "serve: the sandbox's audit lines of the nested container"; sed 's/^/#      /' "$saudit" 2>/dev/null | tail -8; fi
        sup=$(pgrep -f -- "--audit-tag e2b_sandbox=$sid" | head -1)
        del=$(curl -s -m 60 -o /dev/null -w '%{http_code}' -X DELETE "$surl/sandboxes/$sid" -H "X-API-KEY: $SKEY")
        _sandbox_gone() { [ -z "$sup" ] || ! kill -0 "$sup" 2>/dev/null; }
        if [ "$del" = 204 ] && [ -n "$sup" ] && wait_for 60 _sandbox_gone; then ok "serve: DELETE ended the sandbox (its supervisor and guest)"
        else fail "serve: DELETE of the sandbox ($del; supervisor '$sup' still there)"; fi
    else fail "serve: create from the privileged template: $created"; sed 's/^/#      /' "$T/serve.log" | tail -5; fi
    kill -TERM "$serve_pid" 2>/dev/null; wait "$serve_pid" 2>/dev/null
fi

# Without --microvm-root no disk is attached (the plan says so; no boot needed).
run bash -c "cd '$WS' && exec '$EXG' run --layer microvm --dry-run -- true"
run_root=$(cd "$WS" && "$EXG" run --layer microvm --microvm-root --dry-run -- true 2>&1)
if ! grep -q "scratch disk" <<<"$OUT$ERR" && grep -q "scratch disk: 4G" <<<"$run_root"; then
    ok "the plan: a 4G scratch disk by default as guest root, none for an unprivileged guest user"
else fail "scratch disk in --dry-run"; fi

finish
