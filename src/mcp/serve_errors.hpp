// What a failed exchange with `exguardian serve` means, in words the model
// (and whoever configured the client) can act on: the server unreachable, the
// API key refused, the sandbox gone, a quota, a refused request, a failure of
// the server, or a Connect-RPC error of the sandbox's envd (the file missing,
// a write refused). Pure: unit-tested without a server.
#pragma once
#include <optional>
#include <string>

#include "mcp/serve_http.hpp"

namespace exg::mcp {

// The control plane (X-API-KEY: /sandboxes...) or one sandbox's envd (its access token).
enum class Plane { Control, Envd };

// Why the answer is a failure; nothing when it is a success (2xx, and for a stream its end without an error).
std::optional<std::string> serve_failure(const HttpAnswer& a, Plane plane);

// Whether the answer says the sandbox is no longer on the server (control 404, envd 502).
bool sandbox_gone(const HttpAnswer& a, Plane plane);

}  // namespace exg::mcp
