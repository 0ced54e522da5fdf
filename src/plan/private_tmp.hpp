// Where a sandbox's own temporary directory (its TMPDIR) is on the host, for
// the layer that shares the host's /tmp (landlock): the layer makes it, mode
// 0700 and the sandbox's uid, and removes it at the end. One rule for the
// layer that makes it and for serve, which puts E2B's base tools in it.
#pragma once
#include <string>

namespace exg::plan {

inline std::string host_private_tmp(const std::string& sandbox_id) { return "/tmp/exguardian-" + sandbox_id; }

}  // namespace exg::plan
