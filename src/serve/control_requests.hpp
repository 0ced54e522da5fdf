// The control plane's request bodies (E2B's REST API: spec/openapi.yml), as
// the SDK sends them, checked and turned into what the registry acts on, or
// one error naming the field. Pure functions of the body and the server's
// configuration: the routes (control_routes.cpp) and the fuzz target
// (fuzz/create_request.cpp) call the same code.
#pragma once
#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "serve/http_server.hpp"
#include "serve/sandbox_registry.hpp"
#include "serve/templates.hpp"

namespace exg::serve {

// Why a body was refused and the status to answer with (400, or 404 for an unknown template).
struct BodyError {
  http::status status = http::status::bad_request;
  std::string message;
};
template <typename T>
using BodyResult = std::expected<T, BodyError>;

// Bounds on what one request may ask for (also what the fuzz target checks).
inline constexpr size_t kMaxMapEntries = 256;          // metadata, envVars
inline constexpr size_t kMaxMapKey = 256;
inline constexpr size_t kMaxMapValue = 64 * 1024;
inline constexpr size_t kMaxHostList = 256;            // allowOut, denyOut
inline constexpr size_t kMaxHostEntry = 253;
inline constexpr size_t kMaxRuleHosts = 64;            // network.rules
inline constexpr size_t kMaxRuleHeaders = 256;
inline constexpr size_t kMinRuleValue = 4, kMaxRuleValue = 8192;

// POST /sandboxes (E2B's NewSandbox): templateID, timeout (1..max_timeout_s),
// metadata, envVars, network {allowOut, denyOut, rules}, autoPause,
// autoPauseMemory, autoResume {enabled}, and the flags this server accepts
// only in their default. The result's tenant is left empty.
BodyResult<CreateRequest> parse_create_body(const std::string& body, const Templates& templates, int64_t max_timeout_s);

// PUT /sandboxes/{id}/network (E2B's SandboxNetworkUpdateConfig): the lists
// replaced whole; rules cannot change here.
struct NetworkUpdate {
  std::vector<std::string> allow_out, deny_out;
};
BodyResult<NetworkUpdate> parse_network_update(const std::string& body);

// A body holding one timeout in seconds under `key` (/timeout: "timeout",
// required; /refreshes: "duration"; /resume and /connect: "timeout"): the
// value, nothing when it may be and is absent (an empty body then counts as {}).
BodyResult<std::optional<int64_t>> parse_timeout_body(const std::string& body, const char* key, bool required,
                                                      int64_t max_timeout_s);

// POST /sandboxes/{id}/pause (the SDK's {memory: keepMemory}): whether the
// pause keeps the sandbox's memory (absent or null: true; false: its files
// only, Registry::pause). An empty body is {}.
BodyResult<bool> parse_pause_body(const std::string& body);

// POST /sandboxes/{id}/snapshots (E2B's {name?}): the snapshot's names (none,
// or the one given: 1-128 of [A-Za-z0-9._:/-]). An empty body is {}.
BodyResult<std::vector<std::string>> parse_snapshot_body(const std::string& body);

// POST /sandboxes/{id}/fork (E2B's SandboxForkRequest): timeout in seconds
// (1..max_timeout_s, E2B's default 15) and count (1..100, default 1).
struct ForkRequest {
  int64_t timeout_s = 15;
  int count = 1;
};
BodyResult<ForkRequest> parse_fork_body(const std::string& body, int64_t max_timeout_s);

// Does an allowOut entry (or a template's domain) let the sandbox reach what
// a rule's host names? Exactly (case-insensitively), or under a *.domain entry.
bool allow_covers(const std::string& allow, const std::string& host);

// /sandboxes/{id}[/action] and /v2/sandboxes/{id}[/action]: the id (1-64 of
// A-Z a-z 0-9 _ -) and the action with its slash ("" when none; lower-case
// letters), or nothing for any other path. For a path no route has (the
// routes match their own patterns, routes.hpp): whether it names a sandbox. A plain scan, not std::regex:
// libstdc++'s matcher recurses once per character of the path, and a path is
// what any client sends.
struct SandboxPath {
  std::string id, action;
};
std::optional<SandboxPath> parse_sandbox_path(std::string_view path);

// Headers the proxy writes or removes itself (as policy "setHeader" refuses them).
bool proxy_owned_header(const std::string& name);

}  // namespace exg::serve
