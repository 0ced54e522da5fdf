// The scratch disk of a microVM sandbox run as guest root (issue 43): a
// writable virtio-blk disk for what privileged tools store (podman's and
// dockerd's images and layers, caches), instead of the guest's RAM. On the
// host it is one sparse file of the policy's size ("resources.scratchDisk",
// --scratch-disk), made without a name (O_TMPFILE) in the sandbox's disk
// directory, so it is gone when the last descriptor closes however the run
// ends (even a SIGKILL of exguardian); qemu gets only that descriptor. An
// ext4 is made on it on the host (mke2fs, before qemu starts); the guest's
// init mounts it (guest/init.cpp mount_disk). The file cannot grow past its
// size (a full disk is ENOSPC in the guest), and a size that does not fit in
// the free space of its directory's filesystem is refused before the start,
// so a sandbox filling its disk cannot fill the host's.
#pragma once
#include <cstdint>
#include <string>

#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace exg::microvm {

// Without a size from the policy or --scratch-disk: 4 GiB (sparse: only what
// the guest writes takes space on the host).
inline constexpr uint64_t kDefaultScratchDiskBytes = 4ull << 30;
// Smaller than this holds no useful ext4.
inline constexpr uint64_t kMinScratchDiskBytes = 16ull << 20;

struct ScratchDisk {
  UniqueFd fd;        // read-write, no name
  uint64_t bytes = 0;
  std::string dir;    // where it was made (for messages)
};

// Where the disks are made: $EXG_MICROVM_DISK_DIR, else /var/tmp (a disk,
// where /tmp may be RAM).
std::string scratch_disk_dir();

// A fresh disk of `bytes` with an empty ext4 on it; an error names the size,
// the directory and why (too small, no room, no mke2fs).
Result<ScratchDisk> make_scratch_disk(uint64_t bytes);

}  // namespace exg::microvm
