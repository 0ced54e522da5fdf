// The control plane: E2B's REST API for sandboxes (spec/openapi.yml), as the
// SDK calls it, each call authenticated by a tenant's X-API-KEY. Another
// tenant's sandbox is answered exactly like an unknown one (404).
#include <algorithm>
#include <cmath>
#include <regex>
#include <set>
#include <strings.h>

#include "serve/service.hpp"

namespace exg::serve {

namespace {

const char* state_name(Sandbox::State s) {
  switch (s) {
    case Sandbox::State::Paused: return "paused";
    case Sandbox::State::Starting: return "starting";
    case Sandbox::State::Ending: return "killing";
    default: return "running";
  }
}

// A JSON body that must be an object (an empty body counts as {} where allowed).
std::optional<nlohmann::json> body_object(const Request& req, bool empty_ok, std::string* err) {
  if (req.body().empty()) {
    if (empty_ok) return nlohmann::json::object();
    *err = "the request has no JSON body";
    return std::nullopt;
  }
  auto j = nlohmann::json::parse(req.body(), nullptr, false);
  if (j.is_discarded()) {
    *err = "the body is not valid JSON";
    return std::nullopt;
  }
  if (!j.is_object()) {
    *err = "the body is not a JSON object";
    return std::nullopt;
  }
  return j;
}

bool is_env_name(const std::string& s) {
  if (s.empty() || s.size() > 256 || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// timeout in seconds: an integer 1..max.
std::optional<std::string> timeout_error(const nlohmann::json& v, int64_t max, int64_t* out) {
  if (!v.is_number_integer()) return "timeout: expected an integer number of seconds";
  int64_t t = v.get<int64_t>();
  if (t <= 0) return "timeout: " + std::to_string(t) + ": must be at least 1 second";
  if (t > max) return "timeout: " + std::to_string(t) + ": this tenant's limit is " + std::to_string(max) + " seconds";
  *out = t;
  return std::nullopt;
}

std::optional<std::string> string_list(const nlohmann::json& v, const std::string& what, std::vector<std::string>* out) {
  if (!v.is_array()) return what + ": expected an array of strings";
  if (v.size() > 256) return what + ": at most 256 entries";
  for (auto& e : v) {
    if (!e.is_string() || e.get<std::string>().empty() || e.get<std::string>().size() > 253) return what + ": expected non-empty strings";
    out->push_back(e.get<std::string>());
  }
  return std::nullopt;
}

// The proxy writes or removes these itself (as policy "setHeader" refuses them).
bool proxy_owned_header(std::string l) {
  for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const char* h : {"host", "connection", "content-length", "transfer-encoding", "te", "upgrade", "trailer", "keep-alive",
                        "proxy-connection", "proxy-authorization", "expect", "accept-encoding"})
    if (l == h) return true;
  return false;
}

bool is_header_token(const std::string& s) {
  static const std::string kTchar = "!#$%&'*+-.^_`|~";
  return !s.empty() && s.size() <= 256 && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || kTchar.find(c) != std::string::npos;
  });
}

// Does an allowOut entry (or a template's domain) let the sandbox reach what the
// rule pattern names? Exactly, or under a wildcard entry.
bool allow_covers(const std::string& allow, const std::string& pattern) {
  auto low = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  std::string a = low(allow), p = low(pattern);
  if (a == p) return true;
  if (!a.starts_with("*.")) return false;
  std::string host = p.starts_with("*.") ? p.substr(2) : p;
  return host.size() > a.size() - 2 && host.ends_with(a.substr(1));
}

// E2B's network.rules: {host: [{"transform": {"headers": {name: value}}}]},
// each header then set by the sandbox's proxy on HTTPS requests to that host.
// Within a host later rules and headers override earlier ones (names compared
// case-insensitively). Every host must also be reachable (allowOut or the
// template's domains): a header goes only where the sandbox may connect.
std::optional<std::string> header_rules(const nlohmann::json& v, const std::vector<std::string>& allowed,
                                        std::vector<HeaderRule>* out) {
  const std::string w = "network.rules";
  if (!v.is_object()) return w + ": expected an object of host -> [rules]";
  if (v.size() > 64) return w + ": at most 64 hosts";
  std::set<std::string> hosts_seen;
  for (auto& [raw_host, list] : v.items()) {
    std::string host = raw_host;
    for (char& c : host) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::string at = w + "." + raw_host;
    if (!hosts_seen.insert(host).second) return at + ": the host is listed twice";
    if (host.empty() || host.size() > 253 || host == "*") return at + ": expected a host name or *.domain";
    if (host.find('/') != std::string::npos) return at + ": address ranges are not accepted here; name the host";
    std::string bare = host.starts_with("*.") ? host.substr(2) : host;
    if (bare.empty() || !std::all_of(bare.begin(), bare.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.';
        }))
      return at + ": not a host name (letters, digits, '-' and '.'; or *.domain)";
    if (std::none_of(allowed.begin(), allowed.end(), [&](const std::string& a) { return allow_covers(a, host); }))
      return at + ": not in network.allowOut: a rule's headers go only to a host the sandbox may reach (add it there)";
    if (!list.is_array()) return at + ": expected an array of rules";
    std::vector<HeaderRule> mine;
    for (size_t i = 0; i < list.size(); ++i) {
      const auto& rule = list[i];
      std::string rat = at + "[" + std::to_string(i) + "]";
      if (!rule.is_object()) return rat + ": expected an object {\"transform\": {\"headers\": {...}}}";
      for (auto& [rk, rv] : rule.items()) {
        if (rk != "transform") return rat + "." + rk + ": unknown field (a rule has \"transform\")";
        if (rv.is_null()) continue;
        if (!rv.is_object()) return rat + ".transform: expected an object";
        for (auto& [tk, tv] : rv.items()) {
          if (tk != "headers") return rat + ".transform." + tk + ": not supported (headers is)";
          if (tv.is_null()) continue;
          if (!tv.is_object()) return rat + ".transform.headers: expected an object of header -> value";
          for (auto& [name, value] : tv.items()) {
            std::string hat = rat + ".transform.headers." + name;
            if (!is_header_token(name)) return hat + ": not a header name";
            if (proxy_owned_header(name)) return hat + ": the proxy sets or removes this header itself";
            if (!value.is_string()) return hat + ": expected a string";
            const std::string& val = value.get_ref<const std::string&>();
            if (val.find_first_of(std::string("\r\n\0", 3)) != std::string::npos) return hat + ": the value holds a line break or NUL";
            if (val.size() < 4) return hat + ": the value is shorter than 4 bytes (too short to be masked in what comes back)";
            if (val.size() > 8192) return hat + ": the value is longer than 8192 bytes";
            std::erase_if(mine, [&](const HeaderRule& r) { return strcasecmp(r.header.c_str(), name.c_str()) == 0; });
            mine.push_back({host, name, val});
          }
        }
      }
    }
    out->insert(out->end(), mine.begin(), mine.end());
  }
  if (out->size() > 256) return w + ": at most 256 headers in all";
  return std::nullopt;
}

}  // namespace

nlohmann::json Service::sandbox_json(const Sandbox& sb, bool detail) const {
  nlohmann::json j = {
      {"templateID", sb.tmpl.name},
      {"sandboxID", sb.id},
      {"clientID", "exguardian"},
      {"startedAt", rpc::rfc3339(sb.started_at)},
      {"endAt", rpc::rfc3339(sb.end_at)},
      {"cpuCount", static_cast<int>(std::ceil(sb.tmpl.cpus))},
      {"memoryMB", sb.tmpl.memory_mb},
      {"diskSizeMB", 0},
      {"metadata", sb.metadata},
      {"state", state_name(sb.state)},
      {"envdVersion", kEnvdVersion},
      {"volumeMounts", nlohmann::json::array()},
  };
  if (detail) {
    j["envdAccessToken"] = sb.access_token;
    j["allowInternetAccess"] = !sb.allow_out.empty() || !sb.tmpl.allow_domains.empty();
    j["network"] = {{"allowOut", sb.allow_out}, {"denyOut", sb.deny_out}};
    if (!sb.rules_shown.empty()) j["network"]["rules"] = sb.rules_shown;
    j["lifecycle"] = {{"onTimeout", "kill"}, {"autoResume", false}};
    j["layer"] = sb.tmpl.layer;  // not E2B's: the isolation layer (exguardian mcp --server reports it)
  }
  return j;
}

std::optional<Response> Service::check_quota(const Tenant& t, const Template& tmpl) const {
  auto mine = registry_.of_tenant(t.id);
  uint64_t mem = tmpl.memory_mb;
  double cpus = tmpl.cpus;
  for (auto& sb : mine) mem += sb->tmpl.memory_mb, cpus += sb->tmpl.cpus;
  auto refuse = [&](const std::string& why) { return api_error(http::status::too_many_requests, why); };
  if (mine.size() + 1 > t.quota.max_sandboxes)
    return refuse("quota: tenant " + t.id + " may hold " + std::to_string(t.quota.max_sandboxes) + " sandboxes at once");
  if (mem > t.quota.max_memory_mb)
    return refuse("quota: tenant " + t.id + " may use " + std::to_string(t.quota.max_memory_mb) + " MB of sandbox memory at once");
  if (cpus > t.quota.max_cpus + 1e-9)
    return refuse("quota: tenant " + t.id + " may use " + std::to_string(t.quota.max_cpus) + " CPUs at once");
  if (registry_.count() + 1 > opt_.max_sandboxes)
    return refuse("quota: this server holds at most " + std::to_string(opt_.max_sandboxes) + " sandboxes");
  return std::nullopt;
}

void Service::control(Request& req, ExchangePtr ex, const std::string& path, const std::string& query) {
  std::string key(req["X-API-KEY"]);
  const Tenant* t = tenants_.authenticate(key);
  if (!t) {
    ++metrics_.auth_failures;
    return reply(ex, "auth", api_error(http::status::unauthorized, key.empty() ? "missing X-API-KEY" : "invalid X-API-KEY"));
  }
  auto m = req.method();
  if ((path == "/sandboxes" || path == "/v2/sandboxes") && m == http::verb::post) return create_sandbox(req, ex, *t);
  if ((path == "/sandboxes" || path == "/v2/sandboxes") && m == http::verb::get) return list_sandboxes(req, ex, *t, query, path == "/v2/sandboxes");

  // /sandboxes/{id}[/action] and /v2/sandboxes/{id}/connect
  static const std::regex one(R"(^(/v2)?/sandboxes/([A-Za-z0-9_-]{1,64})(/[a-z]+)?$)");
  std::smatch mm;
  if (!std::regex_match(path, mm, one)) return reply(ex, "unknown", api_error(http::status::not_found, "no such endpoint: " + path));
  std::string id = mm[2], action = mm[3];
  std::string route = "/sandboxes/{id}" + action;
  auto sb = registry_.find(id);
  if (!sb || sb->tenant != t->id || sb->state == Sandbox::State::Ending || sb->state == Sandbox::State::Starting)
    return reply(ex, route, api_error(http::status::not_found, "sandbox " + id + " not found"));
  std::string err;

  if (action.empty() && m == http::verb::get) return reply(ex, route, json_response(http::status::ok, sandbox_json(*sb, true).dump()));
  if (action.empty() && m == http::verb::delete_) {
    registry_.kill(sb, [this, ex, route]() mutable { reply(ex, route, Response{http::status::no_content, 11}); });
    return;
  }
  if ((action == "/timeout" || action == "/refreshes") && m == http::verb::post) {
    auto body = body_object(req, action == "/refreshes", &err);
    if (!body) return reply(ex, route, api_error(http::status::bad_request, err));
    const char* k = action == "/timeout" ? "timeout" : "duration";
    int64_t secs = 60;
    if (body->contains(k) || action == "/timeout") {
      if (!body->contains(k)) return reply(ex, route, api_error(http::status::bad_request, "timeout: missing"));
      if (auto e = timeout_error((*body)[k], t->quota.max_timeout_s, &secs)) return reply(ex, route, api_error(http::status::bad_request, *e));
    }
    registry_.set_timeout(sb, std::chrono::seconds(secs));
    return reply(ex, route, Response{http::status::no_content, 11});
  }
  if (action == "/pause" && m == http::verb::post) {
    if (sb->state == Sandbox::State::Paused) return reply(ex, route, api_error(http::status::conflict, "sandbox " + id + " is already paused"));
    if (!opt_.cgroup_limits)
      return reply(ex, route, api_error(http::status::conflict, "pause: this server runs sandboxes without cgroups (--no-cgroup-limits): it cannot freeze them"));
    if (auto r = registry_.pause(sb); !r) return reply(ex, route, api_error(http::status::internal_server_error, r.error().str()));
    return reply(ex, route, Response{http::status::no_content, 11});
  }
  if ((action == "/resume" || action == "/connect") && m == http::verb::post) {
    auto body = body_object(req, true, &err);
    if (!body) return reply(ex, route, api_error(http::status::bad_request, err));
    if (auto it = body->find("timeout"); it != body->end() && !it->is_null()) {
      int64_t secs = 0;
      if (auto e = timeout_error(*it, t->quota.max_timeout_s, &secs)) return reply(ex, route, api_error(http::status::bad_request, *e));
      // connect only ever extends the life of a sandbox (E2B's rule).
      auto want = std::chrono::system_clock::now() + std::chrono::seconds(secs);
      if (action == "/resume" || want > sb->end_at) registry_.set_timeout(sb, std::chrono::seconds(secs));
    }
    bool was_paused = sb->state == Sandbox::State::Paused;
    if (action == "/resume" && !was_paused) return reply(ex, route, api_error(http::status::conflict, "sandbox " + id + " is not paused"));
    if (was_paused)
      if (auto r = registry_.resume(sb); !r) return reply(ex, route, api_error(http::status::internal_server_error, r.error().str()));
    nlohmann::json j = {{"templateID", sb->tmpl.name}, {"sandboxID", sb->id}, {"clientID", "exguardian"},
                        {"envdVersion", kEnvdVersion}, {"envdAccessToken", sb->access_token}};
    return reply(ex, route, json_response(was_paused ? http::status::created : http::status::ok, j.dump()));
  }
  if (action == "/metrics" && m == http::verb::get) {
    auto u = registry_.usage(sb);
    auto now = std::chrono::system_clock::now();
    nlohmann::json metric = {
        {"timestamp", rpc::rfc3339(now)},
        {"timestampUnix", std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count()},
        {"cpuCount", static_cast<int>(std::ceil(sb->tmpl.cpus))},
        {"cpuUsedPct", u.cpu_pct},
        {"memUsed", u.mem_bytes},
        {"memTotal", sb->tmpl.memory_mb * 1024 * 1024},
        {"memCache", u.mem_cache},
        {"diskUsed", 0},
        {"diskTotal", 0},
    };
    return reply(ex, route, json_response(http::status::ok, nlohmann::json::array({metric}).dump()));
  }
  if (action == "/network" && m == http::verb::put) return update_network(req, ex, sb);
  return reply(ex, route, api_error(http::status::not_found, "no such endpoint: " + std::string(http::to_string(m)) + " " + path));
}

// E2B's SandboxNetworkUpdateConfig: the egress rules replaced whole (an
// omitted list is cleared), checked as at create, put in force by the
// supervisor's set_network (docs/agent-protocol.md).
void Service::update_network(Request& req, ExchangePtr ex, std::shared_ptr<Sandbox> sb) {
  const std::string route = "/sandboxes/{id}/network";
  std::string err;
  auto body = body_object(req, false, &err);
  auto bad = [&](const std::string& why) { reply(ex, route, api_error(http::status::bad_request, why)); };
  if (!body) return bad(err);
  std::vector<std::string> allow_out, deny_out;
  bool internet = false, internet_given = false;
  for (auto& [k, v] : body->items()) {
    if (v.is_null()) continue;
    if (k == "allowOut") {
      if (auto e = string_list(v, "allowOut", &allow_out)) return bad(*e);
    } else if (k == "denyOut") {
      if (auto e = string_list(v, "denyOut", &deny_out)) return bad(*e);
    } else if (k == "allow_internet_access") {
      if (!v.is_boolean()) return bad("allow_internet_access: expected true or false");
      internet = v.get<bool>(), internet_given = true;
    } else if (k == "rules") {
      return bad("rules: the header rules of a running sandbox cannot be changed here (give them at create; a PUT without "
                 "rules keeps them)");
    } else if (k == "egressProxy") {
      return bad(k + ": not supported by this server (allowOut and denyOut are)");
    } else {
      return bad(k + ": unknown field");
    }
  }
  std::erase(deny_out, std::string("0.0.0.0/0"));
  if (internet_given && internet && allow_out.empty())
    return bad("allow_internet_access: ExGuardian lets a sandbox reach only named hosts: list them in allowOut");
  if (internet_given && !internet && !allow_out.empty()) return bad("allow_internet_access false with allowOut: choose one");
  for (const auto& d : allow_out)
    if (d.find('/') != std::string::npos) return bad("allowOut: " + d + ": address ranges are not accepted here; name the hosts");
  if (sb->state != Sandbox::State::Running)
    return reply(ex, route, api_error(http::status::conflict, "sandbox " + sb->id + " is not running"));
  if (!sb->tmpl.policy.empty())
    return reply(ex, route, api_error(http::status::conflict, "the template " + sb->tmpl.name + " has its own policy file: its rules are fixed"));
  if (!sb->agent || !sb->agent->open())
    return reply(ex, route, api_error(http::status::internal_server_error, "the sandbox's supervisor is not reachable"));
  // The template's own domains stay: a sandbox never has less than its template gives.
  std::vector<std::string> allow = sb->tmpl.allow_domains;
  allow.insert(allow.end(), allow_out.begin(), allow_out.end());
  nlohmann::json h = {{"op", "set_network"}, {"allow", allow}, {"deny", deny_out}};
  sb->agent->call(h, {}, [this, ex, route, sb, allow_out, deny_out](const agent::Frame& r) mutable {
    std::string e = reply_errno(r);
    if (e.empty()) {
      sb->allow_out = allow_out;
      sb->deny_out = deny_out;
      return reply(ex, route, Response{http::status::no_content, 11});
    }
    std::string text = r.header.value("message", reply_error_text(r));
    // The supervisor names its own fields ("set_network: allow X: why"); the client wrote allowOut / denyOut.
    for (auto [ours, theirs] : {std::pair{"set_network: allow: ", "allowOut: "}, std::pair{"set_network: allow ", "allowOut: "},
                                std::pair{"set_network: deny ", "denyOut: "}})
      if (text.starts_with(ours)) text = theirs + text.substr(std::string(ours).size());
    if (e == "EINVAL") return reply(ex, route, api_error(http::status::bad_request, text));
    if (e == "ENOTSUP") return reply(ex, route, api_error(http::status::conflict, text + "; create it with network.allowOut"));
    reply(ex, route, api_error(http::status::internal_server_error, text));
  });
}

void Service::create_sandbox(Request& req, ExchangePtr ex, const Tenant& t) {
  const std::string route = "POST /sandboxes";
  std::string err;
  auto body = body_object(req, false, &err);
  auto bad = [&](const std::string& why) { reply(ex, route, api_error(http::status::bad_request, why)); };
  if (!body) return bad(err);
  CreateRequest cr;
  cr.tenant = t.id;
  std::string template_id = "base";
  bool internet = false, internet_given = false;
  int64_t timeout = 300;
  const nlohmann::json* rules = nullptr;
  for (auto& [k, v] : body->items()) {
    if (v.is_null()) continue;
    if (k == "templateID") {
      if (!v.is_string()) return bad("templateID: expected a string");
      template_id = v.get<std::string>();
    } else if (k == "timeout") {
      if (auto e = timeout_error(v, t.quota.max_timeout_s, &timeout)) return bad(*e);
    } else if (k == "metadata" || k == "envVars") {
      if (!v.is_object()) return bad(k + ": expected an object of strings");
      if (v.size() > 256) return bad(k + ": at most 256 entries");
      for (auto& [mk, mv] : v.items()) {
        if (!mv.is_string()) return bad(k + "." + mk + ": expected a string");
        if (mk.size() > 256 || mv.get<std::string>().size() > 64 * 1024) return bad(k + "." + mk + ": too long");
        if (k == "envVars") {
          if (!is_env_name(mk)) return bad("envVars: " + mk + ": not a variable name ([A-Za-z_][A-Za-z0-9_]*)");
          cr.env_vars[mk] = mv.get<std::string>();
        }
      }
      if (k == "metadata") cr.metadata = v;
    } else if (k == "secure") {
      if (!v.is_boolean()) return bad("secure: expected true or false");
      // Every sandbox here has an envd access token, secure or not.
    } else if (k == "allow_internet_access") {
      if (!v.is_boolean()) return bad("allow_internet_access: expected true or false");
      internet = v.get<bool>(), internet_given = true;
    } else if (k == "network") {
      if (!v.is_object()) return bad("network: expected an object");
      for (auto& [nk, nv] : v.items()) {
        if (nv.is_null()) continue;
        if (nk == "rules") {
          rules = &nv;  // checked once allowOut is known
        } else if (nk == "allowOut") {
          if (auto e = string_list(nv, "network.allowOut", &cr.allow_out)) return bad(*e);
        } else if (nk == "denyOut") {
          if (auto e = string_list(nv, "network.denyOut", &cr.deny_out)) return bad(*e);
        } else if (nk == "allowPublicTraffic" || nk == "maskRequestHost") {
          if (!nv.is_boolean()) return bad("network." + nk + ": expected true or false");
          if (nk == "allowPublicTraffic" && nv.get<bool>()) return bad("network.allowPublicTraffic: sandboxes here take no inbound traffic");
        } else {
          return bad("network." + nk + ": not supported by this server (allowOut, denyOut and rules are)");
        }
      }
    } else if (k == "autoPause" || k == "autoPauseMemory") {
      if (!v.is_boolean()) return bad(k + ": expected true or false");
      if (v.get<bool>()) return bad(k + ": pausing on timeout is not supported (a timeout kills)");
    } else if (k == "mcp" || k == "iam" || k == "volumeMounts" || k == "autoResume") {
      if (k == "volumeMounts" && v.is_array() && v.empty()) continue;
      return bad(k + ": not supported by this server");
    } else {
      return bad(k + ": unknown field");
    }
  }
  // denyOut 0.0.0.0/0 is the SDK's "everything": our default already.
  std::erase(cr.deny_out, std::string("0.0.0.0/0"));
  if (internet_given && internet && cr.allow_out.empty())
    return bad("allow_internet_access: ExGuardian lets a sandbox reach only named hosts: list them in network.allowOut");
  if (internet_given && !internet && !cr.allow_out.empty())
    return bad("allow_internet_access false with network.allowOut: choose one");
  for (const auto& d : cr.allow_out)
    if (d.find('/') != std::string::npos)
      return bad("network.allowOut: " + d + ": address ranges are not accepted here; name the hosts");
  const Template* tmpl = templates_.find(template_id);
  if (!tmpl) return reply(ex, route, api_error(http::status::not_found, "template " + template_id + " not found"));
  if (rules) {
    std::vector<std::string> reachable = cr.allow_out;
    reachable.insert(reachable.end(), tmpl->allow_domains.begin(), tmpl->allow_domains.end());
    if (auto e = header_rules(*rules, reachable, &cr.header_rules)) return bad(*e);
    if (!cr.header_rules.empty() && !tmpl->policy.empty())
      return bad("network.rules: the template " + tmpl->name + " has its own policy file; put the rules there as secrets with setHeader");
  }
  cr.tmpl = *tmpl;
  cr.timeout = std::chrono::seconds(timeout);
  if (auto q = check_quota(t, *tmpl)) {
    ++metrics_.quota_refusals;
    return reply(ex, route, std::move(*q));
  }
  registry_.create(cr, [this, ex, route](std::shared_ptr<Sandbox> sb, const std::string& error) mutable {
    // A host name the egress rules refuse is the request's fault; anything else the server's.
    if (!sb && error.find("--allow-domain") != std::string::npos)
      return reply(ex, route, api_error(http::status::bad_request, "network.allowOut: " + error));
    if (!sb && error.find("E2B_RULE_") != std::string::npos)
      return reply(ex, route, api_error(http::status::bad_request, "network.rules: " + error));
    if (!sb) return reply(ex, route, api_error(http::status::internal_server_error, "the sandbox did not start: " + error));
    nlohmann::json j = {{"templateID", sb->tmpl.name}, {"sandboxID", sb->id}, {"clientID", "exguardian"},
                        {"envdVersion", kEnvdVersion}, {"envdAccessToken", sb->access_token}};
    reply(ex, route, json_response(http::status::created, j.dump()));
  });
}

void Service::list_sandboxes(Request&, ExchangePtr ex, const Tenant& t, const std::string& query, bool v2) {
  const std::string route = v2 ? "GET /v2/sandboxes" : "GET /sandboxes";
  auto bad = [&](const std::string& why) { reply(ex, route, api_error(http::status::bad_request, why)); };
  std::map<std::string, std::string> want_meta;
  if (auto meta = query_param(query, "metadata"); meta && !meta->empty()) {
    size_t pos = 0;
    while (pos <= meta->size()) {
      size_t amp = meta->find('&', pos);
      if (amp == std::string::npos) amp = meta->size();
      std::string kv = meta->substr(pos, amp - pos);
      auto eq = kv.find('=');
      if (eq == std::string::npos) return bad("metadata: expected key=value pairs joined by &");
      // The SDK encodes each key and value, then the pairs as a query string.
      want_meta[url_decode(url_decode(kv.substr(0, eq)))] = url_decode(url_decode(kv.substr(eq + 1)));
      pos = amp + 1;
    }
  }
  std::vector<std::string> states = {"running"};
  if (v2) states.push_back("paused");
  if (auto st = query_param(query, "state"); st && !st->empty()) {
    states.clear();
    size_t pos = 0;
    while (pos <= st->size()) {
      size_t c = st->find(',', pos);
      if (c == std::string::npos) c = st->size();
      std::string s = st->substr(pos, c - pos);
      if (s != "running" && s != "paused") return bad("state: " + s + ": expected running or paused");
      states.push_back(s);
      pos = c + 1;
    }
  }
  size_t limit = 100;
  if (auto l = query_param(query, "limit")) {
    char* end = nullptr;
    long v = std::strtol(l->c_str(), &end, 10);
    if (l->empty() || *end || v < 1 || v > 1000) return bad("limit: expected an integer 1..1000");
    limit = static_cast<size_t>(v);
  }
  std::string after = query_param(query, "nextToken").value_or("");
  auto all = registry_.of_tenant(t.id);
  std::sort(all.begin(), all.end(), [](auto& a, auto& b) { return a->started_at != b->started_at ? a->started_at < b->started_at : a->id < b->id; });
  nlohmann::json out = nlohmann::json::array();
  bool passed = after.empty();
  std::string next;
  for (auto& sb : all) {
    if (!passed) {
      passed = sb->id == after;
      continue;
    }
    std::string st = sb->state == Sandbox::State::Paused ? "paused" : sb->state == Sandbox::State::Running ? "running" : "";
    if (std::find(states.begin(), states.end(), st) == states.end()) continue;
    bool match = true;
    for (auto& [k, v] : want_meta)
      if (!sb->metadata.contains(k) || sb->metadata[k] != v) match = false;
    if (!match) continue;
    if (out.size() == limit) {
      next = out.back()["sandboxID"];
      break;
    }
    out.push_back(sandbox_json(*sb, false));
  }
  if (!after.empty() && !passed) return bad("nextToken: not a token this server gave (or its sandbox is gone)");
  Response r = json_response(http::status::ok, out.dump());
  if (!next.empty()) r.set("X-Next-Token", next);
  reply(ex, route, std::move(r));
}

}  // namespace exg::serve
