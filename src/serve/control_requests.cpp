#include "serve/control_requests.hpp"

#include <strings.h>

#include <algorithm>
#include <cctype>
#include <set>

#include <nlohmann/json.hpp>

#include "util/json_parse.hpp"

namespace exg::serve {

namespace {

std::unexpected<BodyError> bad(std::string why) { return std::unexpected(BodyError{http::status::bad_request, std::move(why)}); }

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A JSON body that must be an object (an empty body counts as {} where allowed).
BodyResult<nlohmann::json> body_object(const std::string& body, bool empty_ok) {
  if (body.empty()) {
    if (empty_ok) return nlohmann::json::object();
    return bad("the request has no JSON body");
  }
  std::string why;
  auto j = parse_json(body, &why);
  if (j.is_discarded()) return bad("the body is " + why);
  if (!j.is_object()) return bad("the body is not a JSON object");
  return j;
}

bool is_env_name(const std::string& s) {
  if (s.empty() || s.size() > kMaxMapKey || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// A timeout in seconds: an integer 1..max. A number past int64 is over the limit, not negative.
std::optional<std::string> timeout_error(const nlohmann::json& v, const std::string& what, int64_t max, int64_t* out) {
  if (!v.is_number_integer()) return what + ": expected an integer number of seconds";
  std::string limit = ": this tenant's limit is " + std::to_string(max) + " seconds";
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(max)) return what + ": " + v.dump() + limit;
  int64_t t = v.get<int64_t>();
  if (t <= 0) return what + ": " + std::to_string(t) + ": must be at least 1 second";
  if (t > max) return what + ": " + std::to_string(t) + limit;
  *out = t;
  return std::nullopt;
}

std::optional<std::string> string_list(const nlohmann::json& v, const std::string& what, std::vector<std::string>* out) {
  if (!v.is_array()) return what + ": expected an array of strings";
  if (v.size() > kMaxHostList) return what + ": at most " + std::to_string(kMaxHostList) + " entries";
  for (auto& e : v) {
    if (!e.is_string() || e.get_ref<const std::string&>().empty() || e.get_ref<const std::string&>().size() > kMaxHostEntry)
      return what + ": expected non-empty strings";
    out->push_back(e.get<std::string>());
  }
  return std::nullopt;
}

bool is_header_token(const std::string& s) {
  static const std::string kTchar = "!#$%&'*+-.^_`|~";
  return !s.empty() && s.size() <= 256 && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || kTchar.find(c) != std::string::npos;
  });
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
  if (v.size() > kMaxRuleHosts) return w + ": at most " + std::to_string(kMaxRuleHosts) + " hosts";
  std::set<std::string> hosts_seen;
  for (auto& [raw_host, list] : v.items()) {
    std::string host = lower(raw_host);
    std::string at = w + "." + raw_host;
    if (!hosts_seen.insert(host).second) return at + ": the host is listed twice";
    if (host.empty() || host.size() > kMaxHostEntry || host == "*") return at + ": expected a host name or *.domain";
    if (host.find('/') != std::string::npos) return at + ": address ranges are not accepted here; name the host";
    std::string bare = host.starts_with("*.") ? host.substr(2) : host;
    // Labels of letters, digits and '-' joined by single dots: ".example.org" would pass as under "*.example.org".
    bool labels = !bare.empty() && bare.front() != '.' && bare.back() != '.' && bare.find("..") == std::string::npos;
    if (!labels || !std::all_of(bare.begin(), bare.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.';
        }))
      return at + ": not a host name (labels of letters, digits and '-' joined by '.'; or *.domain)";
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
            if (val.size() < kMinRuleValue)
              return hat + ": the value is shorter than " + std::to_string(kMinRuleValue) +
                     " bytes (too short to be masked in what comes back)";
            if (val.size() > kMaxRuleValue) return hat + ": the value is longer than " + std::to_string(kMaxRuleValue) + " bytes";
            std::erase_if(mine, [&](const HeaderRule& r) { return strcasecmp(r.header.c_str(), name.c_str()) == 0; });
            mine.push_back({host, name, val});
          }
        }
      }
    }
    out->insert(out->end(), mine.begin(), mine.end());
  }
  if (out->size() > kMaxRuleHeaders) return w + ": at most " + std::to_string(kMaxRuleHeaders) + " headers in all";
  return std::nullopt;
}

// allowOut and allow_internet_access together, as create and the network update check them.
std::optional<std::string> internet_error(bool given, bool internet, const std::vector<std::string>& allow_out, const std::string& w) {
  if (given && internet && allow_out.empty())
    return "allow_internet_access: ExGuardian lets a sandbox reach only named hosts: list them in " + w;
  if (given && !internet && !allow_out.empty()) return "allow_internet_access false with " + w + ": choose one";
  for (const auto& d : allow_out)
    if (d.find('/') != std::string::npos) return w + ": " + d + ": address ranges are not accepted here; name the hosts";
  return std::nullopt;
}

}  // namespace

bool allow_covers(const std::string& allow, const std::string& host) {
  std::string a = lower(allow), p = lower(host);
  if (a == p) return true;
  if (!a.starts_with("*.")) return false;
  std::string bare = p.starts_with("*.") ? p.substr(2) : p;
  return bare.size() > a.size() - 2 && bare.ends_with(a.substr(1));
}

std::optional<SandboxPath> parse_sandbox_path(std::string_view path) {
  if (path.starts_with("/v2/")) path.remove_prefix(3);
  constexpr std::string_view kPrefix = "/sandboxes/";
  if (!path.starts_with(kPrefix)) return std::nullopt;
  path.remove_prefix(kPrefix.size());
  size_t slash = path.find('/');
  std::string_view id = path.substr(0, slash), action = slash == std::string_view::npos ? "" : path.substr(slash);
  auto id_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; };
  if (id.empty() || id.size() > 64 || !std::all_of(id.begin(), id.end(), id_char)) return std::nullopt;
  if (!action.empty() && (action.size() < 2 || !std::all_of(action.begin() + 1, action.end(), [](char c) { return c >= 'a' && c <= 'z'; })))
    return std::nullopt;
  return SandboxPath{std::string(id), std::string(action)};
}

bool proxy_owned_header(const std::string& name) {
  std::string l = lower(name);
  for (const char* h : {"host", "connection", "content-length", "transfer-encoding", "te", "upgrade", "trailer", "keep-alive",
                        "proxy-connection", "proxy-authorization", "expect", "accept-encoding"})
    if (l == h) return true;
  return false;
}

BodyResult<std::vector<std::string>> parse_snapshot_body(const std::string& text) {
  auto body = body_object(text, true);
  if (!body) return std::unexpected(body.error());
  std::vector<std::string> names;
  for (auto& [k, v] : body->items()) {
    if (k != "name") return bad(k + ": unknown field (a snapshot takes name)");
    if (v.is_null()) continue;
    if (!v.is_string()) return bad("name: expected a string");
    const std::string& n = v.get_ref<const std::string&>();
    bool ok = !n.empty() && n.size() <= 128 && std::all_of(n.begin(), n.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == ':' || c == '/' || c == '-';
    });
    if (!ok) return bad("name: expected 1-128 characters of A-Z a-z 0-9 . _ : / -");
    names.push_back(n);
  }
  return names;
}

BodyResult<ForkRequest> parse_fork_body(const std::string& text, int64_t max_timeout_s) {
  auto body = body_object(text, true);
  if (!body) return std::unexpected(body.error());
  ForkRequest f;
  f.timeout_s = std::min<int64_t>(15, max_timeout_s);
  for (auto& [k, v] : body->items()) {
    if (v.is_null()) continue;
    if (k == "timeout") {
      if (auto e = timeout_error(v, "timeout", max_timeout_s, &f.timeout_s)) return bad(*e);
    } else if (k == "count") {
      if (!v.is_number_integer() || v.get<int64_t>() < 1 || v.get<int64_t>() > 100) return bad("count: expected an integer 1..100");
      f.count = static_cast<int>(v.get<int64_t>());
    } else {
      return bad(k + ": unknown field (a fork takes timeout and count)");
    }
  }
  return f;
}

BodyResult<CreateRequest> parse_create_body(const std::string& text, const Templates& templates, int64_t max_timeout_s) {
  auto body = body_object(text, false);
  if (!body) return std::unexpected(body.error());
  CreateRequest cr;
  std::string template_id = "base";
  bool internet = false, internet_given = false;
  int64_t timeout = 300;
  bool pause_memory = true;
  const nlohmann::json* rules = nullptr;
  for (auto& [k, v] : body->items()) {
    if (v.is_null()) continue;
    if (k == "templateID") {
      if (!v.is_string()) return bad("templateID: expected a string");
      template_id = v.get<std::string>();
    } else if (k == "timeout") {
      if (auto e = timeout_error(v, "timeout", max_timeout_s, &timeout)) return bad(*e);
    } else if (k == "metadata" || k == "envVars") {
      if (!v.is_object()) return bad(k + ": expected an object of strings");
      if (v.size() > kMaxMapEntries) return bad(k + ": at most " + std::to_string(kMaxMapEntries) + " entries");
      for (auto& [mk, mv] : v.items()) {
        if (!mv.is_string()) return bad(k + "." + mk + ": expected a string");
        const std::string& val = mv.get_ref<const std::string&>();
        if (mk.size() > kMaxMapKey || val.size() > kMaxMapValue) return bad(k + "." + mk + ": too long");
        if (k == "envVars") {
          if (!is_env_name(mk)) return bad("envVars: " + mk + ": not a variable name ([A-Za-z_][A-Za-z0-9_]*)");
          // The environment is C strings: a NUL would cut the value short without a word.
          if (val.find('\0') != std::string::npos) return bad("envVars." + mk + ": the value holds a NUL character");
          cr.env_vars[mk] = val;
        }
      }
      if (k == "metadata") cr.metadata = v;
    } else if (k == "secure") {
      if (!v.is_boolean()) return bad("secure: expected true or false");
      cr.secure = v.get<bool>();  // absent: secure (the SDK sends true unless told otherwise)
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
        } else if (nk == "maskRequestHost") {
          // E2B types it a string: the Host header of requests to the sandbox's ports, ${PORT} the port.
          if (!nv.is_string()) return bad("network.maskRequestHost: expected a string (a host, ${PORT} for the port)");
          const auto& h = nv.get_ref<const std::string&>();
          if (h.empty() || h.size() > 255 || !std::all_of(h.begin(), h.end(), [](char c) { return c > 0x20 && c < 0x7f; }))
            return bad("network.maskRequestHost: 1-255 printable characters without spaces");
          cr.mask_request_host = h;
        } else if (nk == "allowPublicTraffic") {
          if (!nv.is_boolean()) return bad("network." + nk + ": expected true or false");
          if (nv.get<bool>())
            return bad("network.allowPublicTraffic: true is not served: a sandbox's ports are reached only with its "
                       "trafficAccessToken (or its envd token, or its tenant's key)");
        } else {
          return bad("network." + nk + ": not supported by this server (allowOut, denyOut and rules are)");
        }
      }
    } else if (k == "autoPause") {  // the SDK's lifecycle.onTimeout "pause"
      if (!v.is_boolean()) return bad(k + ": expected true or false");
      cr.auto_pause = v.get<bool>();
    } else if (k == "autoPauseMemory") {  // onTimeout.keepMemory: false, the timeout's pause keeps the files only
      if (!v.is_boolean()) return bad(k + ": expected true or false");
      pause_memory = v.get<bool>();
    } else if (k == "autoResume") {  // E2B's SandboxAutoResumeConfig {enabled}
      if (!v.is_object()) return bad("autoResume: expected an object {enabled: true|false}");
      for (auto& [ak, av] : v.items()) {
        if (ak != "enabled") return bad("autoResume." + ak + ": unknown field (autoResume takes enabled)");
        if (!av.is_boolean()) return bad("autoResume.enabled: expected true or false");
        cr.auto_resume = av.get<bool>();
      }
    } else if (k == "mcp" || k == "iam" || k == "volumeMounts") {
      if (k == "volumeMounts" && v.is_array() && v.empty()) continue;
      return bad(k + ": not supported by this server");
    } else {
      return bad(k + ": unknown field");
    }
  }
  // E2B's rules (the SDK checks them too): traffic resumes only a sandbox its timeout paused, with its memory.
  if (cr.auto_resume && !cr.auto_pause) return bad("autoResume: enabled only with autoPause (lifecycle.onTimeout \"pause\")");
  if (cr.auto_resume && !pause_memory)
    return bad("autoResume: not with autoPauseMemory false (a filesystem-only pause is resumed by connect, not by traffic)");
  cr.auto_pause_memory = pause_memory;
  // denyOut 0.0.0.0/0 is the SDK's "everything": our default already.
  std::erase(cr.deny_out, std::string("0.0.0.0/0"));
  if (auto e = internet_error(internet_given, internet, cr.allow_out, "network.allowOut")) return bad(*e);
  const Template* tmpl = templates.find(template_id);
  if (!tmpl) return std::unexpected(BodyError{http::status::not_found, "template " + template_id + " not found"});
  if (rules) {
    std::vector<std::string> reachable = cr.allow_out;
    reachable.insert(reachable.end(), tmpl->allow_domains.begin(), tmpl->allow_domains.end());
    if (auto e = header_rules(*rules, reachable, &cr.header_rules)) return bad(*e);
    if (!cr.header_rules.empty() && !tmpl->policy.empty())
      return bad("network.rules: the template " + tmpl->name + " has its own policy file; put the rules there as secrets with setHeader");
  }
  cr.tmpl = *tmpl;
  cr.timeout = std::chrono::seconds(timeout);
  return cr;
}

BodyResult<NetworkUpdate> parse_network_update(const std::string& text) {
  auto body = body_object(text, false);
  if (!body) return std::unexpected(body.error());
  NetworkUpdate u;
  bool internet = false, internet_given = false;
  for (auto& [k, v] : body->items()) {
    if (v.is_null()) continue;
    if (k == "allowOut") {
      if (auto e = string_list(v, "allowOut", &u.allow_out)) return bad(*e);
    } else if (k == "denyOut") {
      if (auto e = string_list(v, "denyOut", &u.deny_out)) return bad(*e);
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
  std::erase(u.deny_out, std::string("0.0.0.0/0"));
  if (auto e = internet_error(internet_given, internet, u.allow_out, "allowOut")) return bad(*e);
  return u;
}

BodyResult<bool> parse_pause_body(const std::string& text) {
  auto body = body_object(text, true);
  if (!body) return std::unexpected(body.error());
  bool memory = true;
  for (auto& [k, v] : body->items()) {
    if (k != "memory") return bad(k + ": unknown field (a pause takes memory)");
    if (v.is_null()) continue;
    if (!v.is_boolean()) return bad("memory: expected true or false");
    memory = v.get<bool>();
  }
  return memory;
}

BodyResult<std::optional<int64_t>> parse_timeout_body(const std::string& text, const char* key, bool required,
                                                      int64_t max_timeout_s) {
  auto body = body_object(text, !required);
  if (!body) return std::unexpected(body.error());
  auto it = body->find(key);
  if (it == body->end() || it->is_null()) {
    if (required) return bad(std::string(key) + ": missing");
    return std::optional<int64_t>();
  }
  int64_t secs = 0;
  if (auto e = timeout_error(*it, key, max_timeout_s, &secs)) return bad(*e);
  return std::optional<int64_t>(secs);
}

}  // namespace exg::serve
