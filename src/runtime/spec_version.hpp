// The OCI runtime-spec version a config claims, fitted to what crun accepts.
// containerd 1.7.2x and 2.x write `"ociVersion": "1.2.x"` into every config;
// Debian 12's crun (1.8.1) takes 1.0 and 1.1 only and refuses the rest
// ("unknown version specified"), so no pod, not even its pause container,
// started on such a node (issue 46). A config that uses nothing the 1.2 spec
// added means the same under 1.1.0, so its claim is lowered to that; one that
// uses 1.2's additions keeps its version, and crun judges it.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace exg::runtime {

// The first 1.2 addition CONFIG uses ("process.ioPriority", ...), or "".
std::string spec_1_2_feature(const nlohmann::json& config);

// Lowers a 1.2.x ociVersion to 1.1.0 when CONFIG uses no 1.2 addition; true
// when it changed CONFIG. A version below 1.2 or above 1.x is left alone.
bool fit_spec_version_for_crun(nlohmann::json& config);

}  // namespace exg::runtime
