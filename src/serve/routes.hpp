// serve's one route table: every endpoint the server answers, each with its
// method, path pattern, who may call it, its handler and what it does. The
// dispatcher (service.cpp) finds a request's route here, the OpenAPI document
// (openapi.cpp) is written from the same rows and the request counters of
// /metrics are labelled with them, so an endpoint is never served without
// being documented, nor documented under another name than it is counted.
// (Firecracker's habit: one routing table, not if-chains per part.)
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "serve/http_server.hpp"

namespace exg::serve {

class Service;
struct Call;

// Who may call a route.
enum class Auth {
  None,       // anyone: the server's health, figures and this document
  ApiKey,     // the control plane: a tenant's X-API-KEY
  EnvdToken,  // a sandbox's envd: a request with E2b-Sandbox-Id, and its X-Access-Token (or its
              // tenant's key; nothing for a sandbox created with secure: false)
};

// One documented answer of a route (an OpenAPI response).
struct AnswerDoc {
  const char* status;            // "200"
  const char* description;
  const char* schema = nullptr;  // a schema of the document's components, or none
};

using RouteHandler = void (Service::*)(Call&);

struct Route {
  http::verb method;
  std::string pattern;  // "/sandboxes/{sandboxID}/pause": a {name} segment is a parameter
  Auth auth;
  RouteHandler handler;
  std::string summary;
  std::vector<AnswerDoc> answers;        // besides those every route of its kind has (openapi.cpp)
  const char* body_schema = nullptr;     // the JSON request body's schema, if it takes one
  std::string label;                     // its name in /metrics: "POST /sandboxes/{sandboxID}/pause", envd's "envd ..."
  // Checked before its {sandboxID} is looked up: a malformed body is 400 whatever the
  // sandbox, as E2B answers (the SDK's InvalidArgumentError, not "sandbox not found").
  std::optional<std::string> (*body_check)(const std::string& body, int64_t max_timeout_s) = nullptr;
};

// A path's parameters by name ("sandboxID" -> the id).
using PathParams = std::map<std::string, std::string, std::less<>>;

// Does `path` (without its query) match `pattern`? Each literal segment
// exactly, each {name} one segment of 1-64 of A-Z a-z 0-9 _ - (what a sandbox
// id is made of), and nothing more or less: a trailing slash, one more
// segment, an empty one or an encoded slash (%2F) is no match. A plain scan,
// not std::regex (libstdc++'s matcher recurses once per character of what any
// client sends). On a match the parameters are put in `params`.
bool match_pattern(std::string_view pattern, std::string_view path, PathParams* params);

// The method as an OpenAPI operation is keyed: "get", "post", "delete", "put".
std::string operation_key(http::verb method);

// Every route, in the order they are tried. Built once.
const std::vector<Route>& route_table();

// The route of a request: among envd's (the request names a sandbox with
// E2b-Sandbox-Id) or the others; nullptr when none has its method and path.
const Route* find_route(http::verb method, std::string_view path, bool envd, PathParams* params);

}  // namespace exg::serve
