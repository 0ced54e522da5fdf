// A container path as the runtime will find it in the bundle's root:
// symlinks of the part that exists followed inside the root (an absolute link
// starts again at the root, ".." stops at it), the rest taken as written.
// crun and runc resolve a mount's destination so before mounting, so two
// destinations are compared here as the kernel will see them: /var/run/secrets
// lies below /run where the image's /var/run links to /run.
// Every step is an openat2(RESOLVE_IN_ROOT) from the root's descriptor: a link
// in the image never leads out of it.
#pragma once
#include <string>

#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace exg::runtime {

class RootfsPaths {
 public:
  // No root: paths are only normalised ("//a/./b/../c" -> "/a/c").
  RootfsPaths() = default;
  // The host directory that is the container's root (config.json's root.path).
  static Result<RootfsPaths> open(const std::string& rootfs);

  // `path` (absolute, in the container) resolved: absolute, normalised.
  std::string resolve(const std::string& path) const;

 private:
  UniqueFd root_;
};

}  // namespace exg::runtime
