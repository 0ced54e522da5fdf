// Which layers hold a session (`exguardian session`, and so serve's and mcp's sandboxes): an
// agent as pid 1 of the sandbox's own pid namespace, which keeps every process the session
// starts inside and ends them all with it. The one place that says why a layer cannot, read by
// the layer itself, serve's templates and mcp's --layer (a refusal before anything starts).
#pragma once
#include <string_view>

#include "util/layer_kind.hpp"

namespace exg::layer {

inline constexpr std::string_view kLandlockNoSessions =
    "sessions (session, serve, mcp) do not run on the landlock layer: a session's agent is pid 1 of the sandbox's "
    "own pid namespace, which holds every process the session starts and ends them all with it; without "
    "namespaces they would live among the host's processes with nothing to end them (no cgroup either where none "
    "is delegated); run each command with `exguardian run --layer landlock` instead";

// Why a session cannot run on `k`; empty when it can.
inline std::string_view why_no_sessions(Kind k) { return k == Kind::Landlock ? kLandlockNoSessions : std::string_view(); }

}  // namespace exg::layer
