#include "microvm/scratch_disk.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>

#include "plan/limits.hpp"
#include "util/host_probe.hpp"

namespace exg::microvm {

std::string scratch_disk_dir() {
  const char* d = std::getenv("EXG_MICROVM_DISK_DIR");
  return d && *d ? d : "/var/tmp";
}

namespace {

// An unnamed file in `dir`; where the filesystem has no O_TMPFILE, a named one unlinked at once.
Result<UniqueFd> unnamed_file(const std::string& dir) {
  UniqueFd fd(::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (fd) return fd;
  if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
    return fail(Error::sys("microvm: scratch disk: open an unnamed file in " + dir));
  std::string tmpl = dir + "/.exguardian-disk.XXXXXX";
  fd.reset(::mkostemp(tmpl.data(), O_CLOEXEC));
  if (!fd) return fail(Error::sys("microvm: scratch disk: create a file in " + dir));
  ::unlink(tmpl.c_str());
  return fd;
}

}  // namespace

Result<ScratchDisk> make_scratch_disk(uint64_t bytes) {
  ScratchDisk d;
  d.dir = scratch_disk_dir();
  d.bytes = bytes;
  const std::string what = "microvm: scratch disk of " + plan::format_bytes(bytes) + " in " + d.dir;
  if (bytes < kMinScratchDiskBytes)
    return fail(Error::msg(what, "too small: at least " + plan::format_bytes(kMinScratchDiskBytes) +
                                     " (\"resources\": {\"scratchDisk\": 0} or --scratch-disk 0: none)"));
  // The host must be able to hold all of it: a guest filling its disk meets
  // ENOSPC in the guest, never the host's filesystem full.
  struct statvfs vfs;
  if (::statvfs(d.dir.c_str(), &vfs) != 0) return fail(Error::sys(what));
  const uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  if (bytes > free_bytes)
    return fail(Error::msg(what, "more than the " + plan::format_bytes(free_bytes) +
                                     " free there (a smaller --scratch-disk / \"resources\": {\"scratchDisk\"}, or "
                                     "EXG_MICROVM_DISK_DIR on a filesystem with room)"));
  auto fd = unnamed_file(d.dir);
  if (!fd) return fail(fd.error());
  d.fd = std::move(*fd);
  if (::ftruncate(d.fd.get(), static_cast<off_t>(bytes)) != 0) return fail(Error::sys(what + ": ftruncate"));
  // The filesystem, made here (natively: in the guest, under TCG, it would take
  // seconds): no journal (the disk ends with the sandbox), no blocks reserved
  // for root (the guest's root is who fills it), lazy inode tables (the guest
  // mounts with noinit_itable: nothing zeroes them behind its back).
  const std::string mke2fs = util::find_in_path("mke2fs");
  if (mke2fs.empty()) return fail(Error::msg(what, "mke2fs not found: install Debian's e2fsprogs"));
  const int disk_fd = d.fd.get();
  auto r = util::in_child(
      [&](int out) {
        int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null >= 0) ::dup2(null, 0);
        ::dup2(out, 1);
        ::dup2(out, 2);
        // The disk as descriptor 3, inherited (the child's copy of the CLOEXEC one).
        if (::dup2(disk_fd, 3) != 3) return 126;
        const char* argv[] = {mke2fs.c_str(), "-q", "-F", "-t", "ext4", "-O", "^has_journal", "-m", "0", "-E",
                              "lazy_itable_init=1,nodiscard", "-L", "exg-scratch", "/proc/self/fd/3", nullptr};
        ::execve(mke2fs.c_str(), const_cast<char* const*>(argv), environ);
        return 127;
      },
      std::chrono::milliseconds(60000));
  if (r.code != 0)
    return fail(Error::msg(what, "mke2fs failed" + (r.text.empty() ? std::string() : ": " + util::trim(r.text))));
  return d;
}

}  // namespace exg::microvm
