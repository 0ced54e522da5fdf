// The policy `exguardian runtime` applies to a container (issue 17): the
// handler's file, HANDLERS_DIR/NAME.json (an ordinary ExGuardian policy,
// srt-compatible; filesystem paths are the container's own and must be
// absolute), narrowed, never widened, by the profile a container's
// `exguardian.dev/profile` annotation names (another file of the same
// directory: pod authors choose among what the node's admin wrote, and can
// only take away).
#pragma once
#include <string>

#include "oci/spec.hpp"
#include "policy/policy.hpp"
#include "util/error.hpp"

namespace exg::runtime {

inline constexpr const char* kProfileAnnotation = "exguardian.dev/profile";
inline constexpr const char* kDefaultHandlersDir = "/etc/exguardian/handlers";

struct RuntimePolicy {
  std::string handler;
  std::string profile;  // the annotation's profile applied, or ""
  policy::Policy policy;
  oci::Runtime runtime = oci::Runtime::Crun;  // runsc when the policy's layer is "gvisor"
};

// A handler or profile name: [a-z0-9][a-z0-9._-]* (at most 63), never a path.
bool valid_handler_name(const std::string& name);

// The handler's file narrowed by `profile` (may be empty). An error names the
// file and what is wrong (missing, invalid, a relative path, a profile that
// would add secrets).
Result<RuntimePolicy> load_runtime_policy(const std::string& dir, const std::string& handler, const std::string& profile);

// `base` narrowed by `profile` (pure): allowed domains and CIDRs only where
// base allows them too, denies and masks added, writable paths only inside
// base's, resource limits the smaller, gVisor over container. Secrets,
// secret files and environment in a profile are an error (they would add).
Result<policy::Policy> narrow_policy(const policy::Policy& base, const policy::Policy& profile);

}  // namespace exg::runtime
