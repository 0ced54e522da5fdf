#include "microvm/guest_image.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <vector>

#include "pid1/provide.hpp"

namespace exg::microvm {

namespace {

bool regular(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
}

}  // namespace

Result<GuestImage> find_guest_image() {
  std::vector<std::string> dirs;
  if (const char* e = std::getenv("EXG_MICROVM_IMAGE_DIR"); e && *e) dirs.emplace_back(e);
  std::string exe = pid1::exe_dir();
  if (!exe.empty()) {
    dirs.push_back(exe + "/microvm");
    dirs.push_back(exe + "/../lib/exguardian/microvm");
  }
  std::string looked;
  for (const auto& d : dirs) {
    GuestImage g{d, d + "/vmlinux", d + "/initramfs.cpio", ""};
    if (regular(g.kernel) && regular(g.initramfs)) {
      std::ifstream v(d + "/kernel-version");
      std::getline(v, g.kernel_version);
      return g;
    }
    looked += (looked.empty() ? "" : ", ") + d;
  }
  return fail(Error::msg("microvm: guest kernel and initramfs",
                         "not found in " + (looked.empty() ? std::string("(no directory)") : looked) +
                             ": build them with `make` (CMake target microvm-guest, from Debian's linux-image-amd64)"));
}

}  // namespace exg::microvm
