#include "mcp/serve_errors.hpp"

#include <nlohmann/json.hpp>

#include "util/json_parse.hpp"

namespace exg::mcp {

namespace {

// What an error body says: E2B's {"code": 404, "message": ...} or Connect's {"code": "not_found", "message": ...}.
std::string body_message(const std::string& body, std::string* connect_code) {
  auto j = parse_json(body);
  if (j.is_object()) {
    if (auto c = j.find("code"); c != j.end() && c->is_string()) *connect_code = c->get<std::string>();
    if (auto m = j.find("message"); m != j.end() && m->is_string()) return m->get<std::string>();
  }
  std::string text = body.substr(0, 300);
  for (char& ch : text)
    if (ch == '\n' || ch == '\r') ch = ' ';
  return text.empty() ? "(no message)" : text;
}

// A Connect error of envd: its message, with what it means inside the sandbox.
std::string rpc_text(const std::string& code, const std::string& message) {
  std::string t = message + " (" + code + ")";
  if (code == "not_found") t += ": no such file, directory or process in the sandbox";
  else if (code == "permission_denied") t += ": refused by the sandbox's policy or the file's permissions (the workspace and /tmp are writable, the rest is not)";
  else if (code == "already_exists") t += ": it exists already";
  else if (code == "unavailable") t += ": the sandbox has ended";
  else if (code == "resource_exhausted") t += ": a limit of the sandbox or the server";
  return t;
}

}  // namespace

std::optional<std::string> serve_failure(const HttpAnswer& a, Plane plane) {
  if (a.status == 0) return a.transport_error.empty() ? std::string("no answer from exguardian serve") : a.transport_error;
  if (a.status >= 200 && a.status < 300) {
    if (a.rpc_error) return rpc_text(a.rpc_error->code, a.rpc_error->message);
    if (!a.transport_error.empty()) return a.transport_error;
    return std::nullopt;
  }
  std::string code;
  std::string msg = body_message(a.body, &code);
  std::string st = std::to_string(a.status);
  if (!code.empty()) return rpc_text(code, msg);  // a unary Connect call's error
  switch (a.status) {
    case 401:
      return plane == Plane::Control ? "exguardian serve refused the API key (401: " + msg + "): check the --api-key-file"
                              : "exguardian serve refused the sandbox's access token (401: " + msg + ")";
    case 403:
      return plane == Plane::Control ? "refused by exguardian serve (403: " + msg + ")"
                                     : "refused in the sandbox (403: " + msg + "): its policy or the file's permissions (the workspace "
                                       "and /tmp are writable, the rest is not)";
    case 404:
      return plane == Plane::Control ? "not found on exguardian serve (404: " + msg + "): the sandbox has ended (its timeout, or destroyed)"
                              : "not found (404: " + msg + "): no such file or directory in the sandbox";
    case 502: return "the sandbox is gone from exguardian serve (502: " + msg + "): it ended (its timeout, or destroyed)";
    case 413: return "too large for exguardian serve (413: " + msg + ")";
    case 429: return "a quota of exguardian serve (429: " + msg + ")";
    default: break;
  }
  if (a.status >= 500) return "exguardian serve failed (" + st + ": " + msg + ")";
  return "exguardian serve refused the request (" + st + ": " + msg + ")";
}

bool sandbox_gone(const HttpAnswer& a, Plane plane) {
  if (plane == Plane::Control) return a.status == 404;
  return a.status == 502;
}

}  // namespace exg::mcp
