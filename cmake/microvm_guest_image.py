#!/usr/bin/env python3
"""The microVM layer's guest: kernel and initramfs, made at build time from
Debian's generic kernel package (nothing is downloaded when a sandbox runs).

  microvm_guest_image.py --out DIR --init FILE [--deb FILE | --package NAME]

Writes DIR/vmlinux (the uncompressed kernel, booted through PVH),
DIR/initramfs.cpio (newc: FILE as /init, the modules the guest loads in
DIR/... /lib/exg-modules with their load order) and DIR/kernel-version.
The .deb is fetched with `apt-get download` into DIR once and kept there.
"""
import argparse
import io
import lzma
import os
import re
import subprocess
import sys
import tarfile

# In load order (dependencies first); read from the package's config: all are
# modules (=m) in Debian's generic flavour, uncompressed.
MODULES = [
    "kernel/drivers/virtio/virtio_ring.ko",
    "kernel/drivers/virtio/virtio.ko",
    "kernel/drivers/virtio/virtio_mmio.ko",
    "kernel/drivers/char/virtio_console.ko",
    "kernel/fs/netfs/netfs.ko",
    "kernel/fs/fscache/fscache.ko",
    "kernel/net/9p/9pnet.ko",
    "kernel/net/9p/9pnet_virtio.ko",
    "kernel/fs/9p/9p.ko",
    # Transparent egress in the guest (process/capture_rules.hpp): nf_tables
    # with NAT for the redirect. libcrc32c's init asks the crypto API for
    # crc32c, which only crc32c_generic provides here (there is no modprobe
    # in the guest to load it on demand).
    "kernel/crypto/crc32c_generic.ko",
    "kernel/lib/libcrc32c.ko",
    "kernel/net/netfilter/nfnetlink.ko",
    "kernel/net/netfilter/nf_tables.ko",
    "kernel/net/ipv4/netfilter/nf_defrag_ipv4.ko",
    "kernel/net/ipv6/netfilter/nf_defrag_ipv6.ko",
    "kernel/net/netfilter/nf_conntrack.ko",
    "kernel/net/netfilter/nf_nat.ko",
    "kernel/net/netfilter/nft_chain_nat.ko",
    "kernel/net/netfilter/nft_redir.ko",
]
# What privileged tools run as root in the guest (--microvm-root) need from
# its kernel (issue 43): overlayfs and FUSE (podman/docker storage,
# fuse-overlayfs, squashfuse, sshfs), tun (VPN clients), veth and bridges
# (nested containers' networks), loop and ext4 (images, and the scratch disk's
# filesystem), and the netfilter pieces nested container networking calls:
# nf_tables with masquerade/NAT/conntrack/fib, the iptables-nft compatibility
# (nft_compat and the xt_ matches and targets dockerd and netavark/CNI use),
# br_netfilter. By module name; their dependencies are read from each .ko's
# modinfo and loaded first. All are loaded before the template is saved (so a
# restored guest has them at no cost; there is no modprobe in the guest).
PRIVILEGED = [
    "overlay", "fuse", "tun", "veth", "bridge", "br_netfilter", "loop", "ext4",
    "nf_conntrack_netlink", "nft_ct", "nft_nat", "nft_masq", "nft_fib_inet", "nft_reject_inet",
    "nft_limit", "nft_compat", "xt_MASQUERADE", "xt_conntrack", "xt_addrtype", "xt_nat",
    "xt_comment", "xt_mark", "xt_multiport", "xt_tcpudp", "ipt_REJECT",
]
# Loaded only after the hand-over, by a guest that has a scratch disk
# (guest_abi.hpp kDiskModuleOrder): its probe reads the disk, whose blocks must
# never be in a template's page cache.
DISK_MODULES = ["virtio_blk"]
MODULE_DIR = "lib/exg-modules"  # microvm/guest/guest_abi.hpp: kModuleDir


def die(msg):
    print(f"microvm guest image: {msg}", file=sys.stderr)
    sys.exit(1)


def kernel_package():
    """The versioned package linux-image-amd64 depends on (e.g. linux-image-6.1.0-57-amd64)."""
    try:
        out = subprocess.run(["apt-cache", "depends", "linux-image-amd64"], check=True,
                             capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        die(f"apt-cache depends linux-image-amd64: {e}")
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("Depends: linux-image-") and line.endswith("-amd64"):
            return line.split()[1]
    die("apt-cache depends linux-image-amd64 names no linux-image-*-amd64 package")


def fetch_deb(out, package):
    for f in sorted(os.listdir(out)):
        if f.startswith(package + "_") and f.endswith(".deb"):
            return os.path.join(out, f)
    r = subprocess.run(["apt-get", "download", package], cwd=out)
    if r.returncode != 0:
        die(f"apt-get download {package} failed (Debian's package mirror is needed once, at build time)")
    for f in sorted(os.listdir(out)):
        if f.startswith(package + "_") and f.endswith(".deb"):
            return os.path.join(out, f)
    die(f"apt-get download {package} left no .deb in {out}")


def deb_data(deb):
    """The data.tar.* member of a .deb (an ar archive), opened as a tarfile."""
    with open(deb, "rb") as f:
        if f.read(8) != b"!<arch>\n":
            die(f"{deb}: not a .deb (ar) file")
        while True:
            hdr = f.read(60)
            if len(hdr) < 60:
                die(f"{deb}: no data.tar member")
            name = hdr[:16].decode().strip().rstrip("/")
            size = int(hdr[48:58].decode().strip())
            body = f.read(size)
            if size % 2:
                f.read(1)
            if name.startswith("data.tar"):
                return tarfile.open(fileobj=io.BytesIO(body), mode="r:*")


def vmlinux_from_bzimage(bz):
    """Debian's bzImage carries the kernel as one xz stream; PVH boots it uncompressed."""
    at = bz.find(b"\xfd7zXZ\x00")
    if at < 0:
        die("no xz payload in the kernel image (is it xz-compressed?)")
    elf = lzma.LZMADecompressor().decompress(bz[at:])
    if not elf.startswith(b"\x7fELF"):
        die("the kernel's xz payload is not an ELF vmlinux")
    return elf


def mod_name(path):
    return os.path.basename(path)[:-3].replace("-", "_")


def depends(ko):
    """The modules a .ko needs loaded first (its modinfo's depends=)."""
    m = re.search(rb"depends=([^\0]*)\0", ko)
    return [d.replace("-", "_") for d in m.group(1).decode().split(",") if d] if m else []


def load_order(wanted, kos, loaded):
    """`wanted` (module names) with their dependencies, each after what it needs;
    what is in `loaded` already is skipped. `kos`: name -> (path, bytes)."""
    order = []

    def visit(n, chain):
        if n in loaded or n in order:
            return
        if n not in kos:
            die(f"module {n} (needed by {' <- '.join(chain) or 'the guest'}) is not in the package (built in?)")
        if n in chain:
            die(f"module dependency cycle: {' -> '.join(chain + [n])}")
        for d in depends(kos[n][1]):
            visit(d, chain + [n])
        order.append(n)

    for w in wanted:
        visit(w.replace("-", "_"), [])
    return order


def newc(entries):
    """cpio newc archive of (name, mode, data) entries, directories first."""
    out = io.BytesIO()
    ino = 1
    for name, mode, data in entries + [("TRAILER!!!", 0, b"")]:
        nb = name.encode() + b"\0"
        fields = [ino, mode, 0, 0, 1 if mode & 0o170000 != 0o040000 else 2, 0, len(data), 0, 0, 0, 0, len(nb), 0]
        out.write(b"070701" + b"".join(b"%08X" % v for v in fields) + nb)
        out.write(b"\0" * ((4 - (110 + len(nb)) % 4) % 4))
        out.write(data)
        out.write(b"\0" * ((4 - len(data) % 4) % 4))
        ino += 1
    return out.getvalue()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--init", required=True)
    ap.add_argument("--deb")
    ap.add_argument("--package")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    deb = a.deb or fetch_deb(a.out, a.package or kernel_package())
    tar = deb_data(deb)
    vmlinuz, modules, version = None, {}, None
    kos = {}  # every module of the package: name -> (path, bytes)
    for m in tar.getmembers():
        n = m.name.lstrip("./")
        if n.startswith("boot/vmlinuz-"):
            vmlinuz = tar.extractfile(m).read()
            version = n[len("boot/vmlinuz-"):]
        elif n.startswith("lib/modules/"):
            rel = n.split("/", 3)[3] if n.count("/") >= 3 else ""
            if rel.endswith(".ko") and m.isfile():
                data = tar.extractfile(m).read()
                kos[mod_name(rel)] = (rel, data)
                if rel in MODULES:
                    modules[rel] = data
    if vmlinuz is None:
        die(f"{deb}: no boot/vmlinuz-*")
    missing = [m for m in MODULES if m not in modules]
    if missing:
        die(f"{deb}: modules missing (built in? another flavour?): {', '.join(missing)}")
    boot = {mod_name(m) for m in MODULES}
    privileged = load_order(PRIVILEGED, kos, boot)
    disk = load_order(DISK_MODULES, kos, boot | set(privileged))

    with open(a.init, "rb") as f:
        init = f.read()
    dirs = ["dev", "proc", "sys", "view", "lib", MODULE_DIR]
    entries = [(d, 0o040755, b"") for d in dirs]
    entries.append(("init", 0o100755, init))
    order = []
    for m in MODULES:
        base = os.path.basename(m)
        entries.append((f"{MODULE_DIR}/{base}", 0o100644, modules[m]))
        order.append(base)
    for n in privileged:
        base = os.path.basename(kos[n][0])
        entries.append((f"{MODULE_DIR}/{base}", 0o100644, kos[n][1]))
        order.append(base)
    entries.append((f"{MODULE_DIR}/order", 0o100644, ("\n".join(order) + "\n").encode()))
    disk_order = []
    for n in disk:
        base = os.path.basename(kos[n][0])
        entries.append((f"{MODULE_DIR}/{base}", 0o100644, kos[n][1]))
        disk_order.append(base)
    entries.append((f"{MODULE_DIR}/order-disk", 0o100644, ("\n".join(disk_order) + "\n").encode()))

    def write(name, data):
        tmp = os.path.join(a.out, name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, os.path.join(a.out, name))

    write("vmlinux", vmlinux_from_bzimage(vmlinuz))
    write("initramfs.cpio", newc(entries))
    write("kernel-version", (version + "\n").encode())


if __name__ == "__main__":
    main()
