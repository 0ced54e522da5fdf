// Where the guest's kernel and initramfs are: made by `make` in the build
// tree (BUILD/microvm, beside BUILD/exguardian), installed in
// lib/exguardian/microvm. Never downloaded at run time.
#pragma once
#include <string>

#include "util/error.hpp"

namespace exg::microvm {

struct GuestImage {
  std::string dir, kernel, initramfs, kernel_version;
};

// The first directory holding both files: $EXG_MICROVM_IMAGE_DIR, EXE_DIR/microvm,
// EXE_DIR/../lib/exguardian/microvm. The error names what was looked for and `make`.
Result<GuestImage> find_guest_image();

}  // namespace exg::microvm
