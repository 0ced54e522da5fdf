#include "serve/service.hpp"

#include <openssl/crypto.h>

#include <cstdio>

#include "serve/base_tools.hpp"
#include "serve/control_requests.hpp"
#include "serve/file_signature.hpp"
#include "serve/openapi.hpp"
#include "serve/sandbox_host.hpp"

namespace exg::serve {

std::string url_decode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') out += ' ';
    else if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
             std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else out += s[i];
  }
  return out;
}

std::optional<std::string> query_param(const std::string& query, const std::string& name) {
  size_t pos = 0;
  while (pos <= query.size()) {
    size_t amp = query.find('&', pos);
    if (amp == std::string::npos) amp = query.size();
    std::string kv = query.substr(pos, amp - pos);
    auto eq = kv.find('=');
    if (url_decode(kv.substr(0, eq)) == name) return eq == std::string::npos ? "" : url_decode(kv.substr(eq + 1));
    pos = amp + 1;
  }
  return std::nullopt;
}

Service::Service(boost::asio::io_context& io, Tenants tenants, Templates templates, Registry& registry, ServiceOptions opt)
    : io_(io), tenants_(std::move(tenants)), templates_(std::move(templates)), registry_(registry), opt_(opt) {
  registry_.pause_check = [this](Sandbox& sb) { return pause_refusal(sb); };
}

Response Service::api_error(http::status st, const std::string& message) {
  nlohmann::json j = {{"code", static_cast<unsigned>(st)}, {"message", message}};
  return json_response(st, j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

void Service::reply(ExchangePtr& ex, const std::string& route, Response r) {
  metrics_.count_request(route, static_cast<unsigned>(r.result_int()));
  ex->respond(std::move(r));
}

std::string Service::absolute_path(const Sandbox& sb, const std::string& p) {
  if (!p.empty() && p[0] == '/') return p;
  if (p.empty() || p == ".") return sb.home;
  if (p == "~") return sb.home;
  if (p.starts_with("~/")) return sb.home + p.substr(1);
  return sb.home + "/" + p;
}

std::optional<std::string> Service::user_error(const Request& req, const std::string& query_user, const Sandbox& sb) {
  std::string user = query_user;
  if (user.empty()) {
    std::string auth(req[http::field::authorization]);
    if (auth.starts_with("Basic ")) {
      auto dec = rpc::base64_decode(auth.substr(6));
      if (!dec) return "Authorization: not valid base64";
      user = dec->substr(0, dec->find(':'));
    }
  }
  if (user.empty() || user == "user") return std::nullopt;
  if (user == "root") {
    if (sb.tmpl.allow_root) return std::nullopt;  // its one user is uid 0 of gVisor's kernel or of the guest's
    return root_refusal(sb.tmpl);
  }
  return "user " + user + ": unknown (this sandbox has one user: \"user\")";
}

void Service::handle(Request& req, ExchangePtr ex) {
  // A value of an unexpected JSON type deep in a message must not take the
  // server down: whatever the handlers did not validate is a 400 here.
  try {
    route(req, ex);
  } catch (const std::exception& e) {
    if (ex->open()) reply(ex, "error", api_error(http::status::bad_request, std::string("bad request: ") + e.what()));
  }
}

void Service::route(Request& req, ExchangePtr ex) {
  std::string target(req.target());
  auto qm = target.find('?');
  std::string path = target.substr(0, qm), query = qm == std::string::npos ? "" : target.substr(qm + 1);
  // A request with E2b-Sandbox-Id is for one sandbox's envd (the SDK with
  // E2B_SANDBOX_URL), or a port of it (E2b-Sandbox-Port); so is one whose
  // Host is the name getHost(port) gives (PORT-ID.DOMAIN, with --domain).
  auto named = parse_sandbox_host(std::string_view(req[http::field::host]), opt_.domain);
  bool for_envd = named || req.find("E2b-Sandbox-Id") != req.end();
  PathParams params;
  const Route* r = find_route(req.method(), path, for_envd, &params);
  static const Route kNone{};  // a Call's route until one is found
  Call call{req, ex, r ? *r : kNone, path, query, std::move(params)};
  if (named) {
    // One sandbox and port per request: headers naming others are refused, not silently overridden.
    for (auto [header, want] : {std::pair{"E2b-Sandbox-Id", named->id}, std::pair{"E2b-Sandbox-Port", named->port}})
      if (auto h = req.find(header); h != req.end() && std::string(h->value()) != want)
        return reply(ex, "envd", api_error(http::status::bad_request, std::string(header) + " names another than the Host " +
                                                                          std::string(req[http::field::host]).substr(0, 128)));
    return envd(req, ex, r, std::move(call), named->id, named->port);
  }
  if (for_envd) return envd(req, ex, r, std::move(call), std::string(req["E2b-Sandbox-Id"]), std::string(req["E2b-Sandbox-Port"]));
  // A signed /files URL of the SDK (uploadUrl, downloadUrl) names no sandbox
  // when E2B_SANDBOX_URL is set: its signature does.
  if (!r && path == "/files" && query_param(query, "signature"))
    if (const Route* fr = find_route(req.method(), path, /*for_envd=*/true, nullptr))
      return signed_files(req, ex, *fr, path, query);
  if (r && r->auth == Auth::None) return (this->*r->handler)(call);
  control(req, ex, r, std::move(call));
}

// Another tenant's sandbox, or one starting or ending, is answered exactly like an unknown one.
std::shared_ptr<Sandbox> Service::tenants_sandbox(const Tenant& t, const std::string& id) const {
  auto sb = registry_.find(id);
  if (!sb || sb->tenant != t.id || sb->state == Sandbox::State::Ending || sb->state == Sandbox::State::Starting) return nullptr;
  return sb;
}

// Auth::ApiKey: the key is checked before the path, so a caller without one
// learns nothing of which paths exist; then the sandbox a {sandboxID} names.
void Service::control(Request& req, ExchangePtr ex, const Route* r, Call call) {
  std::string key(req["X-API-KEY"]);
  const Tenant* t = tenants_.authenticate(key);
  if (!t) {
    ++metrics_.auth_failures;
    return reply(ex, "auth", api_error(http::status::unauthorized, key.empty() ? "missing X-API-KEY" : "invalid X-API-KEY"));
  }
  ex->log_tenant = t->id;
  if (!r) return no_control_route(req, ex, *t, call.path);
  call.tenant = t;
  if (r->body_check)
    if (auto bad = r->body_check(req.body(), t->quota.max_timeout_s))
      return reply(ex, r->label, api_error(http::status::bad_request, *bad));
  if (auto id = call.params.find("sandboxID"); id != call.params.end()) {
    ex->log_sandbox = id->second;
    auto sb = tenants_sandbox(*t, id->second);
    if (!sb) return reply(ex, r->label, api_error(http::status::not_found, "sandbox " + id->second + " not found"));
    call.sb = std::move(sb);
  }
  (this->*r->handler)(call);
}

// No route: a path of one sandbox ([/v2]/sandboxes/{id}/action) is looked up
// first, so that an unknown id answers the same whatever the action.
// An endpoint this server does not offer is 501 saying so: E2B's SDKs read a
// 404 as "sandbox not found" and a 502 as a timeout, both misleading here.
void Service::no_control_route(Request& req, ExchangePtr ex, const Tenant& t, const std::string& path) {
  const std::string what = std::string(http::to_string(req.method())) + " " + path;
  auto one = parse_sandbox_path(path);
  if (!one) return reply(ex, "unknown", api_error(http::status::not_implemented, not_served(what)));
  ex->log_sandbox = one->id;
  if (!tenants_sandbox(t, one->id))
    return reply(ex, "unknown", api_error(http::status::not_found, "sandbox " + one->id + " not found"));
  reply(ex, "unknown", api_error(http::status::not_implemented, not_served(what)));
}

std::string Service::not_served(const std::string& what) {
  return "not served by exguardian serve: " + what + " (GET /openapi.json lists what is)";
}

// Auth::EnvdToken: every request naming a sandbox, routed or not, passes the
// same checks, so that nothing tells which ids exist.
void Service::envd(Request& req, ExchangePtr ex, const Route* r, Call call, const std::string& id, const std::string& port) {
  ex->log_sandbox = id.substr(0, 64);
  auto sb = registry_.find(id);
  // Who may: the sandbox's access token, its tenant's key, or anyone when it
  // was created with secure false (no token). The same checks run whether
  // the id exists or not.
  bool authed = false, owner = false;
  auto same = [](const std::string& given, const std::string& want) {
    return !given.empty() && given.size() == want.size() && CRYPTO_memcmp(given.data(), want.data(), given.size()) == 0;
  };
  // A request for another port of the sandbox: port_proxy.cpp.
  bool other_port = !port.empty() && port != kEnvdPort;
  if (sb && sb->access_token.empty()) authed = owner = true;
  if (!authed && sb && same(std::string(req["X-Access-Token"]), sb->access_token)) authed = owner = true;
  // E2B's traffic access token reaches the sandbox's ports, never its envd.
  if (!authed && sb && other_port && same(std::string(req["E2B-Traffic-Access-Token"]), sb->traffic_token)) authed = owner = true;
  // A signed /files URL (uploadUrl, downloadUrl) sent with the sandbox's id: that one operation, unexpired.
  if (!authed && sb && !other_port && r && r->handler != nullptr && call.path == "/files")
    if (auto u = signed_file_url(req, call.query); u && signature_matches(*u, sb->access_token)) {
      auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
      if (!u->expiration || *u->expiration >= now) authed = owner = true;
    }
  if (!authed) {
    if (const Tenant* t = tenants_.authenticate(std::string(req["X-API-KEY"]))) {
      authed = true;
      owner = sb && t->id == sb->tenant;
    }
  }
  if (!authed) ++metrics_.auth_failures;
  // An unknown id, a starting or ending sandbox, another tenant's, and a
  // request without the right credentials all get this one answer: a caller
  // learns nothing of which ids exist. 502 is what E2B's proxy answers for a
  // sandbox that is not there (the SDK reads it as "not running").
  if (!sb || !owner || sb->state == Sandbox::State::Ending || sb->state == Sandbox::State::Starting)
    return reply(ex, "envd", api_error(http::status::bad_gateway,
                                       "sandbox " + id + " not found (or X-Access-Token / X-API-KEY does not grant it)"));
  ex->log_tenant = sb->tenant;
  if (auto failed = auto_resume(sb)) return reply(ex, "envd", std::move(*failed));
  if (sb->state == Sandbox::State::Paused || sb->pausing)
    return reply(ex, "envd", api_error(http::status::bad_gateway, "sandbox " + id + (sb->pausing ? " is being paused" : " is paused") +
                                                                  " (Sandbox.connect resumes it)"));
  if (other_port) {
    call.sb = std::move(sb);
    return port_proxy(call, port);
  }
  if (!r) return no_envd_route(req, ex, sb, call.path);
  call.sb = std::move(sb);
  (this->*r->handler)(call);
}

// E2B's autoResume: the owner's traffic resumes a sandbox its timeout (or a request) paused. Not
// one kept across a restart (dormant: its processes are gone; connect starts it again, as E2B's
// filesystem-only pauses).
std::optional<Response> Service::auto_resume(const std::shared_ptr<Sandbox>& sb) {
  if (sb->state != Sandbox::State::Paused || !sb->auto_resume || sb->dormant || sb->pausing) return std::nullopt;
  if (auto resumed = registry_.resume(sb); !resumed)
    return api_error(http::status::internal_server_error, "sandbox " + sb->id + ": autoResume failed: " + resumed.error().str());
  return std::nullopt;
}

// What a signed /files URL asks: the operation its method is, on its ?path= as ?username=.
std::optional<SignedFileUrl> Service::signed_file_url(const Request& req, const std::string& query) {
  auto sig = query_param(query, "signature");
  if (!sig) return std::nullopt;
  SignedFileUrl u{*sig, query_param(query, "path").value_or(""), req.method() == http::verb::get ? "read" : "write",
                  query_param(query, "username").value_or(""), std::nullopt};
  if (auto e = query_param(query, "signature_expiration")) {
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(e->c_str(), &end, 10);
    if (e->empty() || *end || errno) return std::nullopt;
    u.expiration = v;
  }
  return u;
}

// envd's answers (401): an unknown or wrong signature, then an expired one.
// Every live sandbox's token is tried, so a URL reaches only the sandbox whose
// token signed it; the one answer for no match tells nothing of which exist.
void Service::signed_files(Request& req, ExchangePtr ex, const Route& r, const std::string& path, const std::string& query) {
  auto url = signed_file_url(req, query);
  if (!url) return reply(ex, "envd", api_error(http::status::bad_request, "signature_expiration: not a unix time in seconds"));
  std::shared_ptr<Sandbox> hit;
  for (const auto& t : tenants_.all())
    for (auto& sb : registry_.of_tenant(t.id))
      if (sb->state != Sandbox::State::Ending && sb->state != Sandbox::State::Starting && signature_matches(*url, sb->access_token))
        hit = sb;
  if (!hit) {
    ++metrics_.auth_failures;
    return reply(ex, "envd", api_error(http::status::unauthorized, "invalid signature"));
  }
  ex->log_sandbox = hit->id;
  ex->log_tenant = hit->tenant;
  auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (url->expiration && *url->expiration < now)
    return reply(ex, r.label, api_error(http::status::unauthorized, "signature is already expired"));
  if (auto failed = auto_resume(hit)) return reply(ex, r.label, std::move(*failed));
  if (hit->state == Sandbox::State::Paused || hit->pausing)
    return reply(ex, r.label, api_error(http::status::bad_gateway, "sandbox " + hit->id + (hit->pausing ? " is being paused" : " is paused") +
                                                                   " (Sandbox.connect resumes it)"));
  Call call{req, ex, r, path, query, {}};
  call.sb = std::move(hit);
  (this->*r.handler)(call);
}

// No route: a method a Connect-RPC service does not have is answered by the
// service (its message is read first, then Unimplemented), anything else 404.
void Service::no_envd_route(Request& req, ExchangePtr ex, const std::shared_ptr<Sandbox>& sb, const std::string& path) {
  const std::string route = "envd unknown";
  auto m = req.method();
  if (path.starts_with("/process.Process/") && m == http::verb::post) return process_rpc(req, ex, sb, path.substr(17), route);
  if (path.starts_with("/filesystem.Filesystem/") && m == http::verb::post) return filesystem_rpc(req, ex, sb, path.substr(23), route);
  reply(ex, route, api_error(http::status::not_implemented, not_served("envd " + std::string(http::to_string(m)) + " " + path)));
}

void Service::health(Call& c) {
  reply(c.ex, c.route.label, json_response(http::status::ok, opt_.cgroup_limits ? "{\"status\":\"ok\"}"
      : "{\"status\":\"ok\",\"weakened\":[\"--no-cgroup-limits: sandboxes run without memory, pids and cpu limits and cannot be paused\"]}"));
}

void Service::openapi(Call& c) { reply(c.ex, c.route.label, json_response(http::status::ok, openapi_document())); }

void Service::server_metrics(Call& c) {
  size_t paused = 0;
  for (const auto& t : tenants_.all())
    for (auto& sb : registry_.of_tenant(t.id)) paused += sb->state == Sandbox::State::Paused;
  Response r{http::status::ok, 11};
  r.set(http::field::content_type, "text/plain; version=0.0.4");
  r.body() = metrics_.text(registry_.count(), paused, registry_.created_total(), registry_.failed_total(), registry_.expired_total(),
                           registry_.egress_counts(), opt_.cgroup_limits);
  reply(c.ex, c.route.label, std::move(r));
}

void Service::rpc_fail(Request& req, ExchangePtr& ex, const std::string& route, bool streaming, const rpc::RpcError& e) {
  if (streaming && rpc::is_stream_request(req)) {
    metrics_.count_request(route, 200);
    rpc::ServerStream s(ex);
    s.end(e);
  } else {
    reply(ex, route, rpc::unary_error(e));
  }
}

std::optional<nlohmann::json> Service::rpc_message(Request& req, ExchangePtr& ex, const std::string& route,
                                                   const std::string& method, bool streaming) {
  rpc::RpcError err{};
  auto msg = rpc::read_message(req, &err);
  if (!msg) {
    rpc_fail(req, ex, route, streaming, err);
    return std::nullopt;
  }
  if (streaming != rpc::is_stream_request(req)) {
    rpc_fail(req, ex, route, streaming,
             {rpc::Code::InvalidArgument, method + (streaming ? " is a server stream: send application/connect+json"
                                                              : " is unary: send application/json")});
    return std::nullopt;
  }
  return msg;
}

}  // namespace exg::serve
