// parse_policy: the schema. Every key is known (or rejected with a position),
// srt keys we accept but do not enforce are recorded as notes, and keys that
// would weaken the sandbox are refused: a policy that says more than we can
// do must not run quietly with less.
#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "policy/extract_pattern.hpp"
#include "policy/json_positions.hpp"
#include "policy/policy.hpp"
#include "util/layer_kind.hpp"

namespace exg::policy {

namespace {

using Json = nlohmann::ordered_json;
using Check = std::optional<PolicyError>;  // an error, or nothing when all is well

struct Node {
  const Json* v;
  std::string ptr;   // JSON pointer, for positions
  std::string path;  // for messages: "network.allowedDomains[2]"
};

std::string in_quotes(std::string_view s) { return "\"" + std::string(s) + "\""; }

std::string type_name(const Json& v) {
  switch (v.type()) {
    case Json::value_t::object: return "object";
    case Json::value_t::array: return "array";
    case Json::value_t::string: return "string";
    case Json::value_t::boolean: return "boolean";
    case Json::value_t::null: return "null";
    default: return "number";
  }
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                  std::tolower(static_cast<unsigned char>(b[j - 1]));
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (same ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::optional<std::string_view> closest(std::string_view key, const std::vector<std::string_view>& known) {
  std::size_t limit = key.size() <= 4 ? 1 : key.size() <= 8 ? 2 : 3;
  std::optional<std::string_view> best;
  std::size_t best_d = limit + 1;
  for (auto k : known) {
    std::size_t d = edit_distance(key, k);
    if (d < best_d) {
      best_d = d;
      best = k;
    }
  }
  return best;
}

// "10.0.0.0/8", "fc00::/7", "192.0.2.7" (a single address): the same syntax the
// egress rules accept (egress::parse_cidr), checked here without depending on
// the egress module. Host bits must be clear, so a typo cannot widen a range.
std::optional<std::string> check_cidr(const std::string& s) {
  const std::string q = in_quotes(s);
  if (s.empty()) return std::string("empty CIDR");
  auto slash = s.find('/');
  std::string addr = s.substr(0, slash);
  if (addr.size() >= 2 && addr.front() == '[' && addr.back() == ']') addr = addr.substr(1, addr.size() - 2);
  unsigned char bytes[16] = {};
  int max = 0;
  if (addr.find(':') == std::string::npos) {
    if (inet_pton(AF_INET, addr.c_str(), bytes) == 1) max = 32;
  } else if (inet_pton(AF_INET6, addr.c_str(), bytes) == 1) {
    max = 128;
  }
  if (max == 0) return "invalid address in CIDR " + q + " (expected like 10.0.0.0/8 or fc00::/7)";
  int prefix = max;
  if (slash != std::string::npos) {
    std::string p = s.substr(slash + 1);
    bool digits = !p.empty() && p.size() <= 3 && std::all_of(p.begin(), p.end(), [](char c) {
      return c >= '0' && c <= '9';
    });
    if (!digits || (p.size() > 1 && p[0] == '0') || std::stoi(p) > max) {
      return "invalid prefix length in CIDR " + q + " (expected 0-" + std::to_string(max) + ")";
    }
    prefix = std::stoi(p);
  }
  for (int bit = prefix; bit < max; ++bit) {
    if (bytes[bit / 8] & (0x80 >> (bit % 8))) {
      return "CIDR " + q + " has bits set after the prefix length (did you mean the network address?)";
    }
  }
  return std::nullopt;
}

class Validator {
 public:
  Validator(const PositionedJson& doc, const std::string& name, const std::string& base_dir)
      : doc_(doc), name_(name), base_dir_(base_dir) {}

  PResult<Policy> run() {
    Node root{&doc_.root, "", ""};
    if (auto e = top_level(root)) return std::unexpected(std::move(*e));
    return std::move(policy_);
  }

 private:
  using Handler = std::function<Check(const Node&)>;
  struct Field {
    std::string_view key;
    Handler handle;
  };
  struct Refused {
    std::string_view key;
    std::string why;
  };

  // ---- positions and errors ----

  SourcePos pos_of(const std::unordered_map<std::string, TextPos>& map, const std::string& ptr) const {
    auto it = map.find(ptr);
    if (it == map.end()) return SourcePos{name_, 0, 0};
    return SourcePos{name_, it->second.line, it->second.column};
  }
  SourcePos value_pos(const Node& n) const { return pos_of(doc_.value_pos, n.ptr); }
  SourcePos key_pos(const Node& n) const {
    auto p = pos_of(doc_.key_pos, n.ptr);
    return p.line ? p : value_pos(n);
  }
  PolicyError error_at(const SourcePos& where, const Node& n, const std::string& msg) const {
    return PolicyError{where.str() + ": " + (n.path.empty() ? "" : n.path + ": ") + msg};
  }
  Check bad_value(const Node& n, const std::string& msg) const { return error_at(value_pos(n), n, msg); }
  Check bad_key(const Node& n, const std::string& msg) const { return error_at(key_pos(n), n, msg); }
  Check wrong_type(const Node& n, std::string_view expected) const {
    return bad_value(n, "expected " + std::string(expected) + ", got " + type_name(*n.v));
  }

  // What an srt key did here, for --dry-run and -v.
  void note(const Node& n, const std::string& what) {
    policy_.notes.push_back(key_pos(n).str() + ": " + n.path + ": " + what);
  }

  static Node member(const Node& obj, const std::string& key, const Json& v) {
    return Node{&v, obj.ptr + "/" + json_pointer_token(key), obj.path.empty() ? key : obj.path + "." + key};
  }
  static Node element(const Node& arr, std::size_t i, const Json& v) {
    return Node{&v, arr.ptr + "/" + std::to_string(i), arr.path + "[" + std::to_string(i) + "]"};
  }

  // ---- generic shapes ----

  Check object(const Node& n, const std::vector<Field>& fields, const std::vector<Refused>& refused = {}) {
    if (!n.v->is_object()) return wrong_type(n, "an object");
    for (const auto& [key, value] : n.v->items()) {
      Node m = member(n, key, value);
      auto f = std::find_if(fields.begin(), fields.end(), [&](const Field& f) { return f.key == key; });
      if (f != fields.end()) {
        if (auto e = f->handle(m)) return e;
        continue;
      }
      auto r = std::find_if(refused.begin(), refused.end(), [&](const Refused& r) { return r.key == key; });
      if (r != refused.end()) return bad_key(m, r->why);
      std::vector<std::string_view> known;
      for (const auto& f : fields) known.push_back(f.key);
      std::string msg = "unknown key " + in_quotes(key);
      if (!n.path.empty()) msg += " in " + n.path;
      if (auto s = closest(key, known)) msg += " (did you mean " + in_quotes(*s) + "?)";
      // Unknown keys carry no path prefix: the key itself is the subject.
      return PolicyError{key_pos(m).str() + ": " + msg};
    }
    return std::nullopt;
  }

  Check each_element(const Node& n, std::string_view expected, const std::function<Check(const Node&)>& each) {
    if (!n.v->is_array()) return wrong_type(n, expected);
    for (std::size_t i = 0; i < n.v->size(); ++i) {
      if (auto e = each(element(n, i, (*n.v)[i]))) return e;
    }
    return std::nullopt;
  }

  Check string_array(const Node& n, const std::function<Check(const Node&, const std::string&)>& each) {
    return each_element(n, "an array of strings", [&](const Node& el) -> Check {
      if (!el.v->is_string()) return wrong_type(el, "a string");
      return each(el, el.v->get_ref<const std::string&>());
    });
  }

  Check any_string_array(const Node& n) {
    return string_array(n, [](const Node&, const std::string&) -> Check { return std::nullopt; });
  }

  Check boolean(const Node& n, bool* out = nullptr) {
    if (!n.v->is_boolean()) return wrong_type(n, "true or false");
    if (out) *out = n.v->get<bool>();
    return std::nullopt;
  }

  Check string(const Node& n, std::string* out = nullptr) {
    if (!n.v->is_string()) return wrong_type(n, "a string");
    if (out) *out = n.v->get<std::string>();
    return std::nullopt;
  }

  Check non_empty_string(const Node& n, std::string* out) {
    if (auto e = string(n, out)) return e;
    if (out->empty()) return bad_value(n, "must not be empty");
    if (out->find('\0') != std::string::npos) return bad_value(n, "contains a NUL byte");
    return std::nullopt;
  }

  Check integer(const Node& n, std::int64_t lo, std::int64_t hi, std::int64_t* out = nullptr) {
    std::string range = std::to_string(lo) + "-" + std::to_string(hi);
    if (!n.v->is_number_integer()) return wrong_type(n, "an integer " + range);
    // nlohmann stores non-negative integers as unsigned, larger ones may not fit int64.
    bool ok = n.v->is_number_unsigned()
                  ? n.v->get<std::uint64_t>() <= static_cast<std::uint64_t>(hi) &&
                        (lo <= 0 || n.v->get<std::uint64_t>() >= static_cast<std::uint64_t>(lo))
                  : n.v->get<std::int64_t>() >= lo && n.v->get<std::int64_t>() <= hi;
    if (!ok) return bad_value(n, "must be " + range + ", got " + n.v->dump());
    if (out) *out = n.v->get<std::int64_t>();
    return std::nullopt;
  }

  // srt keys whose whole effect here is what `what` says (type-checked; the
  // text is shown by --dry-run and -v).
  Field noted(std::string_view key, std::function<Check(const Node&)> type, std::string what) {
    return Field{key, [this, type = std::move(type), what = std::move(what)](const Node& n) -> Check {
                   if (auto e = type(n)) return e;
                   note(n, what);
                   return std::nullopt;
                 }};
  }
  // srt switches that would weaken the sandbox: false is harmless, true is refused.
  Field weakening(std::string_view key, std::string why) {
    return Field{key, [this, why = std::move(why)](const Node& n) -> Check {
                   bool v = false;
                   if (auto e = boolean(n, &v)) return e;
                   if (v) return bad_value(n, why);
                   return std::nullopt;
                 }};
  }

  std::function<Check(const Node&)> is_bool() {
    return [this](const Node& n) { return boolean(n); };
  }
  std::function<Check(const Node&)> is_string() {
    return [this](const Node& n) { return string(n); };
  }
  std::function<Check(const Node&)> is_object() {
    return [this](const Node& n) -> Check {
      if (!n.v->is_object()) return wrong_type(n, "an object");
      return std::nullopt;
    };
  }
  std::function<Check(const Node&)> is_string_array() {
    return [this](const Node& n) { return any_string_array(n); };
  }
  std::function<Check(const Node&)> is_port() {
    return [this](const Node& n) { return integer(n, 1, 65535); };
  }

  // ---- the schema ----

  Check top_level(const Node& root) {
    if (!root.v->is_object()) return wrong_type(root, "an object at the top level");
    return object(root,
        {
            {"$schema", is_string()},
            {"network", [this](const Node& n) { return network(n); }},
            {"filesystem", [this](const Node& n) { return filesystem(n); }},
            {"resources", [this](const Node& n) { return resources(n); }},
            {"env", [this](const Node& n) { return env(n); }},
            {"secrets", [this](const Node& n) { return secrets(n); }},
            {"secretFiles", [this](const Node& n) { return secret_files(n); }},
            {"credentials", [this](const Node& n) { return credentials(n); }},
            {"layer", [this](const Node& n) { return layer(n); }},
            {"minLayer", [this](const Node& n) { return min_layer(n); }},
            {"landlock", [this](const Node& n) { return landlock(n); }},
            {"audit", [this](const Node& n) { return audit(n); }},
            noted("ignoreViolations", [this](const Node& n) { return object_of_string_arrays(n); },
                  "nothing to silence: ExGuardian reports no per-path filesystem violations (a refused write fails "
                  "with EROFS or EACCES inside, unlogged); refused syscalls and egress are still reported"),
            {"mandatoryDenySearchDepth",
             [this](const Node& n) -> Check {
               std::int64_t depth = 0;
               if (auto e = integer(n, 1, 10, &depth)) return e;
               note(n, "srt looks " + std::to_string(depth) +
                           " levels deep for dangerous names; ExGuardian protects them at every depth, which covers it");
               return std::nullopt;
             }},
            noted("allowPty", is_bool(), "macOS only in srt; here the command always gets a pty of its own when it "
                                         "runs on a terminal, never the host's"),
            noted("ripgrep", is_object(), "srt runs ripgrep to find dangerous names; ExGuardian finds them itself, "
                                          "the command is not run"),
            {"git", [this](const Node& n) { return git(n); }},
            noted("seccomp", is_object(), "the path of srt's apply-seccomp helper; ExGuardian installs its own "
                                          "seccomp filter and runs no helper"),
            noted("windows", is_object(), "Windows only: no effect on Linux (as in srt)"),
            noted("bwrapPath", is_string(), "srt's bubblewrap binary; ExGuardian builds the sandbox itself"),
            noted("socatPath", is_string(), "srt's socat binary; ExGuardian's proxy needs no relay"),
            {"javaAgentJarPath",
             [this](const Node& n) -> Check {
               std::string s;
               if (auto e = non_empty_string(n, &s)) return e;
               if (!s.starts_with('/')) return bad_value(n, "must be an absolute path (srt refuses a relative one too)");
               if (s.find_first_of(" \t\n\"'") != std::string::npos)
                 return bad_value(n, "a path with spaces or quotes cannot go into JAVA_TOOL_OPTIONS");
               policy_.java_agent_jar = s;
               note(n, "JAVA_TOOL_OPTIONS=-javaagent:" + s + " inside, so that Java uses the proxy");
               return std::nullopt;
             }},
            noted("allowAppleEvents", is_bool(), "macOS only: no effect on Linux (as in srt)"),
            noted("enableWeakerNetworkIsolation", is_bool(), "macOS only: no effect on Linux (as in srt)"),
            weakening("enableWeakerNestedSandbox",
                      "ExGuardian does not weaken its sandbox to run nested; remove the key or set it to false"),
            weakening("allowNestedUserNamespaces",
                      "ExGuardian does not let the command create user namespaces; remove the key or set it "
                      "to false"),
        });
  }

  Check network(const Node& n) {
    auto& net = policy_.network;
    auto domains = [this](bool denied, std::vector<DomainEntry>* out) {
      return [this, denied, out](const Node& list) {
        return string_array(list, [&](const Node& el, const std::string& s) -> Check {
          if (auto e = check_domain_pattern(s, denied)) return bad_value(el, *e);
          out->push_back(DomainEntry{s, value_pos(el)});
          return std::nullopt;
        });
      };
    };
    auto cidrs = [this](std::vector<DomainEntry>* out) {
      return [this, out](const Node& list) {
        return string_array(list, [&](const Node& el, const std::string& s) -> Check {
          if (auto e = check_cidr(s)) return bad_value(el, *e);
          out->push_back(DomainEntry{s, value_pos(el)});
          return std::nullopt;
        });
      };
    };
    // A switch of srt's proxy, applied: `on` / `off` say what it does here.
    auto flag = [this](std::optional<bool>* out, std::string on, std::string off) {
      return [this, out, on = std::move(on), off = std::move(off)](const Node& v) -> Check {
        bool b = false;
        if (auto e = boolean(v, &b)) return e;
        *out = b;
        note(v, b ? on : off);
        return std::nullopt;
      };
    };
    return object(n,
        {
            {"allowedDomains", domains(false, &net.allowed_domains)},
            {"deniedDomains", domains(true, &net.denied_domains)},
            {"allowedCidrs", cidrs(&net.allowed_cidrs)},
            {"resolver",
             [this](const Node& v) -> Check {
               bool b = false;
               if (auto e = boolean(v, &b)) return e;
               policy_.network.resolver = b;
               return std::nullopt;
             }},
            {"transparent",
             [this](const Node& v) -> Check {
               bool b = false;
               if (auto e = boolean(v, &b)) return e;
               policy_.network.transparent = b;
               return std::nullopt;
             }},
            {"allowUnixSockets", [this](const Node& list) { return path_entries(list, &policy_.network.allow_unix_sockets); }},
            {"allowAllUnixSockets",
             [this](const Node& v) -> Check {
               bool b = false;
               if (auto e = boolean(v, &b)) return e;
               policy_.network.allow_all_unix_sockets = b;
               return std::nullopt;
             }},
            noted("allowLocalBinding", is_bool(),
                  "the sandbox has its own network namespace: its own loopback is always usable, the host's never "
                  "(srt on Linux: the same)"),
            noted("allowMachLookup", is_string_array(), "macOS only: no effect on Linux (as in srt)"),
            {"httpProxyPort", [this](const Node& v) { return external_proxy_port(v, &policy_.network.http_proxy_port, false); }},
            {"socksProxyPort", [this](const Node& v) { return external_proxy_port(v, &policy_.network.socks_proxy_port, true); }},
            {"deniedDomainReasons", [this](const Node& v) { return denied_domain_reasons(v); }},
            {"strictAllowlist",
             [this](const Node& v) -> Check {
               bool b = false;
               if (auto e = boolean(v, &b)) return e;
               note(v, b ? "hosts off allowedDomains are refused without asking anyone: what ExGuardian always does"
                         : "srt would ask its callback about hosts off allowedDomains; ExGuardian has no such prompt "
                           "and refuses them");
               return std::nullopt;
             }},
            {"deniedResolvedAddresses",
             [this, cidrs](const Node& v) -> Check {
               if (auto e = cidrs(&policy_.network.denied_resolved_addresses)(v)) return e;
               note(v, "an allowed name resolving to these addresses is refused there (an allowedCidrs entry of "
                       "exactly that address lets it through); not evaluated where a parent proxy resolves");
               return std::nullopt;
             }},
            {"requireHostMatch",
             flag(&net.require_host_match,
                  "a request whose Host header, TLS server name or target names another host than the one it is "
                  "sent to is answered 421 (plain HTTP and terminated TLS)",
                  "such a request is still refused (403): ExGuardian never forwards it")},
            {"refuseOpaqueTunnels",
             flag(&net.refuse_opaque_tunnels,
                  "tunnels the proxy cannot see into are refused: CONNECT to a host whose TLS it does not terminate "
                  "(403) and every SOCKS5 CONNECT (reply 2)",
                  "tunnels go as the domain rules say")},
            {"stripResponseHeaders", [this](const Node& v) { return strip_response_headers(v); }},
            {"ambiguousRequestTarget", [this](const Node& v) { return ambiguous_request_target(v); }},
            {"allowPlaintextHeaderSet",
             [this](const Node& v) -> Check {
               bool b = false;
               if (auto e = boolean(v, &b)) return e;
               if (b)
                 return bad_value(v, "a header set on plain HTTP travels in clear text; ExGuardian sets headers (a "
                                     "secret's setHeader) only on TLS connections it terminates: remove the key or "
                                     "set it to false");
               note(v, "headers are set only on TLS connections ExGuardian terminates");
               return std::nullopt;
             }},
            {"tlsTerminate", [this](const Node& v) { return tls_terminate(v); }},
            {"parentProxy", [this](const Node& v) { return parent_proxy(v); }},
            {"mitmProxy", [this](const Node& v) { return mitm_proxy(v); }},
            {"rules", [this](const Node& v) { return request_rules(v); }},
            {"readOnly",
             flag(&net.read_only,
                  "only GET, HEAD and OPTIONS requests, to every host: others are refused (403); HTTPS is "
                  "terminated by the proxy for every host so that its requests are judged too",
                  "requests of any method, as network.rules allow")},
        },
        {{"filterRequest",
          "a JavaScript callback, which a settings file cannot hold; ExGuardian's network.rules allow or deny "
          "requests by host, method and path prefix (and network.readOnly: GET, HEAD, OPTIONS only)"}});
  }

  // httpProxyPort / socksProxyPort: srt hands the sandbox's traffic to a proxy of
  // the user's on the host instead of running its own. Here ExGuardian's proxy
  // still decides every connection, then goes through that one.
  Check external_proxy_port(const Node& v, std::optional<std::uint16_t>* out, bool socks) {
    std::int64_t port = 0;
    if (auto e = integer(v, 1, 65535, &port)) return e;
    *out = static_cast<std::uint16_t>(port);
    note(v, std::string(socks ? "SOCKS5 clients' connections" : "HTTP and CONNECT requests") +
                ", once ExGuardian's rules allow them, go on through the proxy at 127.0.0.1:" + std::to_string(port) +
                (socks ? " (SOCKS5)" : " (CONNECT)"));
    return std::nullopt;
  }

  // {"github.com:22": "SSH pushes are blocked; use an https remote"}: the reason a
  // refusal by that deniedDomains entry gives (body, audit line).
  Check denied_domain_reasons(const Node& n) {
    if (!n.v->is_object()) return wrong_type(n, "an object of deniedDomains entry: reason");
    for (const auto& [key, value] : n.v->items()) {
      Node m = member(n, key, value);
      std::string why;
      if (auto e = non_empty_string(m, &why)) return e;
      if (why.find_first_of("\r\n") != std::string::npos) return bad_value(m, "must be one line");
      policy_.network.denied_domain_reasons.emplace_back(key, why);
    }
    note(n, "the reason given with a refusal by these deniedDomains entries (the 403's body and the audit line)");
    return std::nullopt;
  }

  // Header names folded as srt folds them: lower case, "_" and "." as "-".
  Check strip_response_headers(const Node& n) {
    std::string shown;
    if (auto e = string_array(n, [&](const Node& el, const std::string& s) -> Check {
          if (auto e = secret_header_name(el, s, false)) return e;
          std::string f = s;
          for (char& c : f) c = (c == '_' || c == '.') ? '-' : (char)std::tolower((unsigned char)c);
          policy_.network.strip_response_headers.push_back(f);
          shown += (shown.empty() ? "" : ", ") + f;
          return std::nullopt;
        }))
      return e;
    note(n, "responses reach the sandbox without " + (shown.empty() ? std::string("(none)") : shown) +
                " (plain HTTP and terminated TLS)");
    return std::nullopt;
  }

  Check ambiguous_request_target(const Node& n) {
    std::string s;
    if (auto e = string(n, &s)) return e;
    if (s == "asSpelled")
      return bad_value(n, "\"asSpelled\" would judge network.rules on a path the upstream may read as another one; "
                          "use \"refuse\" (the default) or \"normalize\"");
    if (s != "refuse" && s != "normalize")
      return bad_value(n, "unknown value " + in_quotes(s) + " (expected \"refuse\" or \"normalize\")");
    policy_.network.normalize_targets = s == "normalize";
    note(n, s == "refuse" ? "a request to a host under network.rules whose path reads differently once normalized "
                            "(dot segments, %2e, \"//\", \"\\\\\") is refused (400)"
                          : "a request to a host under network.rules is judged and forwarded with its path "
                            "normalized (dot segments, %2e, \"//\", \"\\\\\")");
    return std::nullopt;
  }

  // "http://[user:password@]host[:port]": where and how to reach a proxy of the user's.
  Check proxy_url(const Node& v, std::string* out) {
    if (auto e = non_empty_string(v, out)) return e;
    if (auto u = parse_proxy_url(*out); !u) return bad_value(v, u.error().message);
    return std::nullopt;
  }

  Check parent_proxy(const Node& n) {
    ParentProxy p;
    p.where = key_pos(n);
    if (auto e = object(n, {
            {"http", [&](const Node& v) { return proxy_url(v, &p.http); }},
            {"https", [&](const Node& v) { return proxy_url(v, &p.https); }},
            {"noProxy",
             [&](const Node& v) -> Check {
               if (auto e = string(v, &p.no_proxy)) return e;
               if (auto bad = check_no_proxy(p.no_proxy)) return bad_value(v, *bad);
               return std::nullopt;
             }},
            // ours: a CA trusted for https:// proxies besides the system's store (srt has no such key;
            // srt's Node takes NODE_EXTRA_CA_CERTS).
            {"caFile",
             [&](const Node& v) -> Check {
               if (auto e = non_empty_string(v, &p.ca_file)) return e;
               if (!p.ca_file.starts_with('/')) return bad_value(v, "must be an absolute path");
               return std::nullopt;
             }},
        }))
      return e;
    // A field left out comes from the environment exguardian is started with
    // (srt's fallback, proxy_env.cpp), which refuses what is still missing
    // then (no proxy at all, caFile without an https:// one): not known here.
    auto from_env = [](const char* var, const std::string& otherwise) {
      return std::string(var) + " of the environment if set (srt's fallback), else " + otherwise;
    };
    std::string what;
    if (p.http.empty() && p.https.empty())
      what = "no proxy URL of its own: \"http\" and \"https\" come from HTTP_PROXY and HTTPS_PROXY of the "
             "environment exguardian is started with (srt's fallback; an error when neither is set)";
    else
      what = "allowed connections go through the parent proxy (CONNECT): plain HTTP via " +
             (p.http.empty() ? from_env("HTTP_PROXY", "none (direct)") : redacted_proxy_url(p.http)) +
             ", tunnels via " +
             (p.https.empty() ? from_env("HTTPS_PROXY", redacted_proxy_url(p.http)) : redacted_proxy_url(p.https));
    bool tls = (!p.http.empty() && parse_proxy_url(p.http)->tls) || (!p.https.empty() && parse_proxy_url(p.https)->tls);
    if (tls) {
      what += " (https://: TLS to the proxy, its certificate and name verified against the system's trust store" +
              (p.ca_file.empty() ? std::string(")") : " and " + p.ca_file + ")");
    } else if (!p.ca_file.empty()) {
      if (!p.http.empty() && !p.https.empty()) return bad_value(n, kCaFileWithoutTls);
      what += "; caFile " + p.ca_file + " trusted for an https:// proxy the environment names";
    }
    if (!p.no_proxy.empty()) what += "; direct: " + p.no_proxy;
    what += "; its credentials stay outside the sandbox";
    note(n, what);
    policy_.network.parent_proxy = std::move(p);
    return std::nullopt;
  }

  Check mitm_proxy(const Node& n) {
    MitmProxy m;
    m.where = key_pos(n);
    bool have_socket = false, have_domains = false;
    if (auto e = object(n, {
            {"socketPath",
             [&](const Node& v) -> Check {
               if (auto e = non_empty_string(v, &m.socket_path)) return e;
               if (!m.socket_path.starts_with('/')) return bad_value(v, "must be an absolute path");
               if (m.socket_path.size() >= 108) return bad_value(v, "too long for a Unix socket address");
               have_socket = true;
               return std::nullopt;
             }},
            {"domains",
             [&](const Node& v) -> Check {
               have_domains = true;
               if (v.v->is_array() && v.v->empty()) return bad_value(v, "must name at least one domain");
               return string_array(v, [&](const Node& el, const std::string& s) -> Check {
                 if (auto e = check_domain_pattern(s, false)) return bad_value(el, *e);
                 m.domains.push_back(DomainEntry{s, value_pos(el)});
                 return std::nullopt;
               });
             }},
        }))
      return e;
    if (!have_socket || !have_domains) return bad_value(n, "expected {\"socketPath\": PATH, \"domains\": [...]}");
    std::string ds;
    for (const auto& d : m.domains) ds += (ds.empty() ? "" : ", ") + d.pattern;
    note(n, "allowed connections to " + ds + " go through the proxy on " + m.socket_path +
                " (CONNECT), after ExGuardian's rules");
    policy_.network.mitm_proxy = std::move(m);
    return std::nullopt;
  }

  // "rules": [{"host": "api.github.com", "methods": ["GET"], "paths": ["/repos/"]}]
  Check request_rules(const Node& n) {
    return each_element(n, "an array of rules", [&](const Node& el) -> Check {
      static const std::string kShape =
          "a rule is {\"host\": HOST, \"methods\": [...], \"paths\": [...], \"readOnly\": true, \"action\": "
          "\"allow\" | \"deny\", \"name\": NAME} (host required)";
      if (!el.v->is_object()) return bad_value(el, kShape + ", got " + type_name(*el.v));
      RequestRule r;
      bool have_host = false, read_only = false, have_methods = false;
      if (auto e = object(el, {
              {"name", [&](const Node& v) -> Check {
                 if (auto e = non_empty_string(v, &r.name)) return e;
                 if (r.name.find_first_of("\r\n") != std::string::npos) return bad_value(v, "must be one line");
                 return std::nullopt;
               }},
              {"host", [&](const Node& v) -> Check {
                 std::string h;
                 if (auto e = non_empty_string(v, &h)) return e;
                 if (auto e = check_domain_pattern(h, false)) return bad_value(v, *e);
                 if (h.back() != ']' && h.find(':') != std::string::npos)
                   return bad_value(v, "a rule's host has no port: it holds for every port of the host");
                 r.host = DomainEntry{h, value_pos(v)};
                 have_host = true;
                 return std::nullopt;
               }},
              {"action", [&](const Node& v) -> Check {
                 std::string a;
                 if (auto e = string(v, &a)) return e;
                 if (a != "allow" && a != "deny")
                   return bad_value(v, "unknown action " + in_quotes(a) + " (expected \"allow\" or \"deny\")");
                 r.deny = a == "deny";
                 return std::nullopt;
               }},
              {"methods", [&](const Node& v) -> Check {
                 have_methods = true;
                 if (v.v->is_array() && v.v->empty()) return bad_value(v, "must name at least one method");
                 return string_array(v, [&](const Node& mv, const std::string& m) -> Check {
                   static const std::string kTchar = "!#$%&'*+-.^_`|~";
                   if (m.empty() || m.size() > 32 || !std::all_of(m.begin(), m.end(), [](char c) {
                         return std::isalnum((unsigned char)c) || kTchar.find(c) != std::string::npos;
                       }))
                     return bad_value(mv, in_quotes(m) + " is not an HTTP method");
                   std::string up = m;
                   for (char& c : up) c = (char)std::toupper((unsigned char)c);
                   r.methods.push_back(up);
                   return std::nullopt;
                 });
               }},
              {"paths", [&](const Node& v) -> Check {
                 if (v.v->is_array() && v.v->empty()) return bad_value(v, "must name at least one path prefix");
                 return string_array(v, [&](const Node& pv, const std::string& p) -> Check {
                   if (auto bad = check_rule_path(p)) return bad_value(pv, *bad);
                   r.paths.push_back(p);
                   return std::nullopt;
                 });
               }},
              {"readOnly", [&](const Node& v) { return boolean(v, &read_only); }},
          }))
        return e;
      if (!have_host) return bad_value(el, "missing \"host\": " + kShape);
      if (read_only) {
        if (have_methods) return bad_value(el, "\"readOnly\" is the methods GET, HEAD, OPTIONS: give one or the other");
        r.methods = {"GET", "HEAD", "OPTIONS"};
      }
      if (r.name.empty()) r.name = el.path + " " + r.host.pattern;
      std::string what = std::string(r.deny ? "refuses " : "allows only ") +
                         (r.methods.empty() ? std::string("any method") : join(r.methods, " ")) + " to " +
                         (r.paths.empty() ? std::string("any path") : join(r.paths, " ")) + " on " + r.host.pattern;
      policy_.notes.push_back(value_pos(el).str() + ": " + r.name + ": " + what +
                              " (plain HTTP, and HTTPS, which the proxy terminates for this host)");
      policy_.network.rules.push_back(std::move(r));
      return std::nullopt;
    });
  }

  static std::string join(const std::vector<std::string>& v, const char* sep) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
    return s;
  }

  // A rule's path prefix is written as the upstream reads it: no dot segments,
  // no "//", no "\", no percent-encoded dot or slash (the request's path is
  // checked for the same before it is compared).
  static std::optional<std::string> check_rule_path(const std::string& p) {
    if (p.empty() || p[0] != '/') return "a path prefix starts with \"/\", got " + in_quotes(p);
    for (unsigned char c : p)
      if (c <= 0x20 || c >= 0x7f) return in_quotes(p) + ": spaces and control characters do not occur in a request's path";
    std::string l = p;
    for (char& c : l) c = (char)std::tolower((unsigned char)c);
    if (l.find("//") != std::string::npos || l.find('\\') != std::string::npos || l.find("%2e") != std::string::npos ||
        l.find("%2f") != std::string::npos || l.find("%5c") != std::string::npos || l.find("/./") != std::string::npos ||
        l.find("/../") != std::string::npos || l.ends_with("/.") || l.ends_with("/.."))
      return in_quotes(p) + ": write the path as the upstream reads it (no \"//\", \"\\\\\", dot segments or encoded "
                            "dots and slashes)";
    return std::nullopt;
  }

  Check object_of_string_arrays(const Node& n) {
    if (!n.v->is_object()) return wrong_type(n, "an object of arrays of strings");
    for (const auto& [key, value] : n.v->items())
      if (auto e = any_string_array(member(n, key, value))) return e;
    return std::nullopt;
  }

  // "git": {"safeDirectories": [...]}: safe.directory for git inside, through
  // GIT_CONFIG_COUNT/KEY/VALUE (no write is granted).
  Check git(const Node& n) {
    if (auto e = object(n, {
            {"safeDirectories",
             [this](const Node& list) {
               return string_array(list, [this](const Node& el, const std::string& s) -> Check {
                 if (s.empty()) return bad_value(el, "must not be empty");
                 if (s.find_first_of(std::string("\0\n", 2)) != std::string::npos)
                   return bad_value(el, "contains a NUL or newline");
                 policy_.git_safe_directories.push_back(s);
                 return std::nullopt;
               });
             }},
        }))
      return e;
    note(n, "git inside treats " + (policy_.git_safe_directories.empty() ? std::string("(none)")
                                                                           : join(policy_.git_safe_directories, ", ")) +
                " as safe.directory (GIT_CONFIG_* variables); no write is granted");
    return std::nullopt;
  }

  // srt's noProxy: "corp.example,.internal,10.0.0.0/8,*": names (with their
  // subdomains) and address ranges that go direct.
  static std::optional<std::string> check_no_proxy(const std::string& s) {
    auto np = parse_no_proxy(s);
    if (!np) return np.error().message;
    for (const auto& c : np->cidrs)
      if (auto e = check_cidr(c)) return *e;
    return std::nullopt;
  }

  Check path_entries(const Node& n, std::vector<PathEntry>* out) {
    static const std::string kShape = "expected a path, or {\"path\": ..., \"literal\": true}";
    return each_element(n, "an array of paths", [&](const Node& el) -> Check {
      if (el.v->is_string()) {
        const auto& s = el.v->get_ref<const std::string&>();
        if (auto e = check_glob(s)) return bad_value(el, *e);
        out->push_back(PathEntry{s, false, base_dir_, value_pos(el)});
        return std::nullopt;
      }
      if (!el.v->is_object()) return bad_value(el, kShape + ", got " + type_name(*el.v));
      // Point at the part that is wrong: a stray key, the path, or the literal flag.
      for (const auto& [key, value] : el.v->items()) {
        if (key != "path" && key != "literal") return bad_key(member(el, key, value), kShape);
      }
      auto p = el.v->find("path");
      if (p == el.v->end()) return bad_value(el, kShape);
      Node pn = member(el, "path", *p);
      if (!p->is_string() || p->get_ref<const std::string&>().empty()) return bad_value(pn, kShape);
      auto l = el.v->find("literal");
      if (l == el.v->end()) return bad_value(el, kShape);
      if (!l->is_boolean() || !l->get<bool>()) return bad_value(member(el, "literal", *l), kShape);
      const auto& s = p->get_ref<const std::string&>();
      if (s.find('\0') != std::string::npos) return bad_value(pn, "path contains a NUL byte");
      out->push_back(PathEntry{s, true, base_dir_, value_pos(el)});
      return std::nullopt;
    });
  }

  Check protect_name(const Node& el, const std::string& s) {
    if (s.empty()) return bad_value(el, "must not be empty");
    if (s.find('\0') != std::string::npos) return bad_value(el, "contains a NUL byte");
    if (s.front() == '/') return bad_value(el, in_quotes(s) + " must be a name or a relative path, not absolute");
    if (s.find_first_of("*?[\\") != std::string::npos) {
      return bad_value(el, in_quotes(s) + " must be a plain name or relative path, not a glob");
    }
    for (std::size_t start = 0; start <= s.size();) {
      auto slash = s.find('/', start);
      std::string_view comp = std::string_view(s).substr(start, slash == std::string::npos ? std::string::npos
                                                                                              : slash - start);
      if (comp == "..") return bad_value(el, in_quotes(s) + " must not contain \"..\"");
      if (slash == std::string::npos) break;
      start = slash + 1;
    }
    policy_.filesystem.protect.push_back(s);
    return std::nullopt;
  }

  Check filesystem(const Node& n) {
    auto& fs = policy_.filesystem;
    auto paths = [this](std::vector<PathEntry>* out) {
      return [this, out](const Node& list) { return path_entries(list, out); };
    };
    return object(n, {
        {"denyRead", paths(&fs.deny_read)},
        {"allowRead", paths(&fs.allow_read)},
        {"allowWrite", paths(&fs.allow_write)},
        {"denyWrite", paths(&fs.deny_write)},
        {"allowGitConfig",
         [this, &fs](const Node& v) -> Check {
           bool b = false;
           if (auto e = boolean(v, &b)) return e;
           fs.allow_git_config = b;
           note(v, b ? ".git/config files are writable (hooks and the rest of .git stay protected)"
                     : ".git/config files stay protected");
           return std::nullopt;
         }},
        {"protect",
         [this](const Node& list) {
           return string_array(list, [this](const Node& el, const std::string& s) { return protect_name(el, s); });
         }},
        {"makeDirs",
         [this, &fs](const Node& list) -> Check {
           size_t first = fs.make_dirs.size();
           if (auto e = path_entries(list, &fs.make_dirs)) return e;
           for (size_t i = first; i < fs.make_dirs.size(); ++i)
             if (!fs.make_dirs[i].literal && fs.make_dirs[i].path.find_first_of("*?[") != std::string::npos)
               return bad_value(list, "\"" + fs.make_dirs[i].path + "\" is a glob; makeDirs names directories");
           return std::nullopt;
         }},
        weakening("disabled",
                  "filesystem.disabled would turn the filesystem policy off; ExGuardian does not support that"),
    });
  }

  Check resources(const Node& n) {
    auto& r = policy_.resources;
    return object(n, {
        {"memory",
         [this, &r](const Node& v) -> Check {
           if (v.v->is_string()) {
             auto size = parse_size(v.v->get_ref<const std::string&>());
             if (!size) return bad_value(v, size.error().message);
             r.memory_bytes = *size;
             return std::nullopt;
           }
           if (auto e = integer(v, 1, INT64_MAX)) {
             if (!v.v->is_number_integer()) return wrong_type(v, "a size like \"512M\" or a number of bytes");
             return e;
           }
           r.memory_bytes = v.v->get<std::uint64_t>();
           return std::nullopt;
         }},
        {"pids",
         [this, &r](const Node& v) -> Check {
           std::int64_t pids = 0;
           if (auto e = integer(v, 1, UINT32_MAX, &pids)) return e;
           r.pids = static_cast<std::uint32_t>(pids);
           return std::nullopt;
         }},
        {"scratchDisk",
         [this, &r](const Node& v) -> Check {
           if (v.v->is_string()) {
             if (v.v->get_ref<const std::string&>() == "0") {
               r.scratch_disk_bytes = 0;
               return std::nullopt;
             }
             auto size = parse_size(v.v->get_ref<const std::string&>());
             if (!size) return bad_value(v, size.error().message);
             r.scratch_disk_bytes = *size;
             return std::nullopt;
           }
           if (auto e = integer(v, 0, INT64_MAX)) {
             if (!v.v->is_number_integer()) return wrong_type(v, "a size like \"8G\", a number of bytes, or 0 for none");
             return e;
           }
           r.scratch_disk_bytes = v.v->get<std::uint64_t>();
           return std::nullopt;
         }},
        {"cpus",
         [this, &r](const Node& v) -> Check {
           if (!v.v->is_number()) return wrong_type(v, "a number of CPUs");
           double c = v.v->get<double>();
           if (!(c > 0) || !std::isfinite(c)) return bad_value(v, "must be more than 0, got " + v.v->dump());
           r.cpus = c;
           return std::nullopt;
         }},
        {"timeout",
         [this, &r](const Node& v) -> Check {
           if (v.v->is_string()) {
             auto d = parse_duration(v.v->get_ref<const std::string&>());
             if (!d) return bad_value(v, d.error().message);
             r.timeout = *d;
             return std::nullopt;
           }
           std::int64_t secs = 0;
           if (auto e = integer(v, 1, INT64_MAX / 1000, &secs)) {
             if (!v.v->is_number_integer()) return wrong_type(v, "a duration like \"30s\" or a number of seconds");
             return e;
           }
           r.timeout = std::chrono::seconds(secs);
           return std::nullopt;
         }},
    });
  }

  Check env(const Node& n) {
    auto& env = policy_.env;
    return object(n, {
        {"allow",
         [this, &env](const Node& list) {
           return string_array(list, [&](const Node& el, const std::string& s) -> Check {
             if (auto e = check_env_name(s)) return bad_value(el, *e);
             env.allow.push_back(s);
             return std::nullopt;
           });
         }},
        {"set",
         [this, &env](const Node& obj) -> Check {
           if (!obj.v->is_object()) return wrong_type(obj, "an object of NAME: value");
           for (const auto& [key, value] : obj.v->items()) {
             Node m = member(obj, key, value);
             if (auto e = check_env_name(key)) return bad_key(m, *e);
             std::string s;
             if (auto e = string(m, &s)) return e;
             // execve cannot pass a NUL inside a value.
             if (s.find('\0') != std::string::npos) return bad_value(m, "contains a NUL byte");
             env.set.emplace_back(key, std::move(s));
           }
           return std::nullopt;
         }},
    });
  }

  // ---- secrets (DESIGN.md §6) ----

  // srt asks for tlsTerminate: {} next to masked credentials. Here TLS is
  // terminated exactly for the hosts that have a secret, with a CA made in
  // memory per sandbox: a CA from disk is not used.
  Check tls_terminate(const Node& n) {
    auto& net = policy_.network;
    if (auto e = object(n,
            {
                {"excludeDomains",
                 [&](const Node& list) {
                   return string_array(list, [&](const Node& el, const std::string& s) -> Check {
                     if (auto e = check_domain_pattern(s, false)) return bad_value(el, *e);
                     net.tls_exclude.push_back(DomainEntry{s, value_pos(el)});
                     return std::nullopt;
                   });
                 }},
                {"extraCaCertPaths", [&](const Node& list) { return path_entries(list, &net.extra_ca_certs); }},
                {"maxTunnels",
                 [&](const Node& v) -> Check {
                   std::int64_t m = 0;
                   if (auto e = integer(v, 1, 65536, &m)) return e;
                   net.max_tunnels = static_cast<std::uint32_t>(m);
                   note(v, "at most " + std::to_string(m) + " terminated TLS connections at once; past it a CONNECT "
                           "is answered 503 (X-Proxy-Error: too-many-tunnels)");
                   return std::nullopt;
                 }},
                {"handshakeTimeoutMs",
                 [&](const Node& v) -> Check {
                   std::int64_t ms = 0;
                   if (auto e = integer(v, 100, 600000, &ms)) return e;
                   net.handshake_timeout = std::chrono::milliseconds(ms);
                   note(v, "a terminated connection must finish its TLS handshake with the proxy within " +
                               std::to_string(ms) + " ms of its CONNECT, or it is closed");
                   return std::nullopt;
                 }},
            },
            {{"caCertPath", "ExGuardian makes its own CA in memory for every sandbox; remove the key"},
             {"caKeyPath", "ExGuardian makes its own CA in memory for every sandbox (its key never "
                           "touches the disk); remove the key"}}))
      return e;
    std::string what = "ExGuardian terminates TLS for the hosts that have a secret or a request rule, and only them";
    if (!net.tls_exclude.empty())
      what += "; excludeDomains: never terminated (a secret for one of them is an error)";
    if (!net.extra_ca_certs.empty())
      what += "; extraCaCertPaths: their certificates are added to the trust bundle inside";
    note(n, what);
    return std::nullopt;
  }

  static bool has_glob_chars(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

  Check secret_hosts(const Node& list, std::vector<DomainEntry>* out) {
    if (!list.v->is_array()) return wrong_type(list, "an array of host patterns");
    if (list.v->empty()) return bad_value(list, "must name at least one host: a secret goes only where it is meant to");
    return string_array(list, [&](const Node& el, const std::string& s) -> Check {
      if (auto e = check_domain_pattern(s, false)) return bad_value(el, *e);
      out->push_back(DomainEntry{s, value_pos(el)});
      return std::nullopt;
    });
  }

  // A request header a secret may go into: a token the proxy does not write itself.
  Check secret_header_name(const Node& el, const std::string& s, bool for_secret = true) {
    static const std::string kTchar = "!#$%&'*+-.^_`|~";
    if (s.empty() || !std::all_of(s.begin(), s.end(), [](char c) {
          return std::isalnum((unsigned char)c) || kTchar.find(c) != std::string::npos;
        }))
      return bad_value(el, in_quotes(s) + " is not a header name");
    if (!for_secret) return std::nullopt;
    std::string l = s;
    for (char& c : l) c = (char)std::tolower((unsigned char)c);
    // The proxy writes or removes these itself: a credential there would not arrive as sent.
    static const char* kNotForSecrets[] = {"host",       "connection", "content-length", "transfer-encoding", "te",
                                           "upgrade",    "trailer",    "keep-alive",     "proxy-connection",
                                           "proxy-authorization", "expect", "accept-encoding"};
    for (const char* h : kNotForSecrets)
      if (l == h) return bad_value(el, in_quotes(s) + ": the proxy sets or removes this header itself");
    return std::nullopt;
  }

  // "headers": ["x-api-key"]: the request headers the placeholder is replaced in.
  Check secret_headers(const Node& list, std::vector<std::string>* out) {
    if (!list.v->is_array()) return wrong_type(list, "an array of request header names");
    if (list.v->empty()) return bad_value(list, "must name at least one header (leave the key out for any header)");
    return string_array(list, [&](const Node& el, const std::string& s) -> Check {
      if (auto e = secret_header_name(el, s)) return e;
      std::string l = s;
      for (char& c : l) c = (char)std::tolower((unsigned char)c);
      if (std::find(out->begin(), out->end(), l) != out->end()) return bad_value(el, in_quotes(s) + " is listed twice");
      out->push_back(l);
      return std::nullopt;
    });
  }

  Check extract_pattern(const Node& n, std::optional<std::string>* out) {
    std::string s;
    if (auto e = non_empty_string(n, &s)) return e;
    if (auto why = extract_pattern_error(s)) return bad_value(n, *why);
    *out = s;
    return std::nullopt;
  }

  Check add_secret(const Node& at, SecretEntry s) {
    for (const auto& o : policy_.secrets)
      if (o.name == s.name)
        return bad_value(at, "secret " + in_quotes(s.name) + " is already declared at " + o.where.str());
    policy_.secrets.push_back(std::move(s));
    return std::nullopt;
  }

  Check add_secret_file(const Node& at, SecretFileEntry f) {
    for (const auto& o : policy_.secret_files)
      if (o.path == f.path)
        return bad_value(at, "secret file " + in_quotes(f.path) + " is already declared at " + o.where.str());
    policy_.secret_files.push_back(std::move(f));
    return std::nullopt;
  }

  Check secret_from(const Node& v, SecretEntry& s) {
    static const std::string kShape = "expected \"env:NAME\" or \"file:PATH\"";
    std::string f;
    if (auto e = string(v, &f)) return e;
    if (f.find('\0') != std::string::npos) return bad_value(v, "contains a NUL byte");
    if (f.starts_with("env:")) {
      s.source = SecretEntry::Source::Env;
      s.from = f.substr(4);
      if (auto e = check_env_name(s.from)) return bad_value(v, *e + " in " + in_quotes(f));
      return std::nullopt;
    }
    if (f.starts_with("file:")) {
      s.source = SecretEntry::Source::File;
      s.from = f.substr(5);
      if (s.from.empty()) return bad_value(v, "empty path in " + in_quotes(f) + " (" + kShape + ")");
      if (has_glob_chars(s.from)) return bad_value(v, in_quotes(f) + ": a secret's file is one path, not a glob");
      return std::nullopt;
    }
    return bad_value(v, kShape + ", got " + in_quotes(f));
  }

  // "secrets": [{"name": "GITHUB_TOKEN", "from": "env:GITHUB_TOKEN", "hosts": ["api.github.com"]}]
  Check secrets(const Node& n) {
    return each_element(n, "an array of secrets", [&](const Node& el) -> Check {
      static const std::string kShape =
          "a secret is {\"name\": NAME, \"from\": \"env:NAME\" | \"file:PATH\", \"hosts\": [...], "
          "\"headers\": [...] (optional)}";
      if (!el.v->is_object()) return bad_value(el, kShape + ", got " + type_name(*el.v));
      SecretEntry s;
      s.where = value_pos(el);
      s.base_dir = base_dir_;
      bool have_name = false, have_from = false, have_hosts = false;
      Node name_node = el;
      if (auto e = object(el, {
              {"name",
               [&](const Node& v) -> Check {
                 if (auto e = string(v, &s.name)) return e;
                 if (auto e = check_env_name(s.name)) return bad_value(v, *e);
                 have_name = true;
                 name_node = v;
                 return std::nullopt;
               }},
              {"from",
               [&](const Node& v) -> Check {
                 have_from = true;
                 return secret_from(v, s);
               }},
              {"extract", [&](const Node& v) { return extract_pattern(v, &s.extract); }},
              {"hosts",
               [&](const Node& v) -> Check {
                 have_hosts = true;
                 return secret_hosts(v, &s.hosts);
               }},
              {"headers", [&](const Node& v) { return secret_headers(v, &s.headers); }},
              // "setHeader": "Authorization": the proxy sets the header to the value
              // itself; the sandbox gets no variable and no placeholder to send.
              {"setHeader",
               [&](const Node& v) -> Check {
                 if (auto e = string(v, &s.set_header)) return e;
                 if (auto e = secret_header_name(v, s.set_header)) return e;
                 s.set_env = false;
                 return std::nullopt;
               }},
              {"optional", [&](const Node& v) { return boolean(v, &s.optional); }},
              {"bodyHosts", [&](const Node& v) { return secret_hosts(v, &s.body_hosts); }},
              {"refreshField",
               [&](const Node& v) -> Check {
                 if (auto e = non_empty_string(v, &s.refresh_field)) return e;
                 s.set_env = false;  // an OAuth token's placeholder lives in its file's copy, not in a variable
                 if (s.refresh_field.size() > 64 || s.refresh_field.find_first_of("\"\\") != std::string::npos)
                   return bad_value(v, "a JSON field name (at most 64 characters, no quote or backslash)");
                 return std::nullopt;
               }},
          }))
        return e;
      if (!have_name) return bad_value(el, "missing \"name\": " + kShape);
      if (!have_from) return bad_value(el, "secret " + in_quotes(s.name) + ": missing \"from\": " + kShape);
      if (!have_hosts)
        return bad_value(el, "secret " + in_quotes(s.name) +
                                 ": missing \"hosts\": a secret goes only to the hosts named for it");
      for (const auto& b : s.body_hosts)
        if (std::none_of(s.hosts.begin(), s.hosts.end(), [&](const DomainEntry& h) { return h.pattern == b.pattern; }))
          return bad_value(el, "secret " + in_quotes(s.name) + ": bodyHosts " + in_quotes(b.pattern) +
                                   " (" + b.where.str() + ") is not one of its \"hosts\"");
      return add_secret(name_node, std::move(s));
    });
  }

  // "secretFiles": [{"path": "~/.npmrc", "secrets": ["NPM_TOKEN"]}]
  Check secret_files(const Node& n) {
    return each_element(n, "an array of secret files", [&](const Node& el) -> Check {
      static const std::string kShape = "a secret file is {\"path\": PATH, \"secrets\": [NAME, ...]}";
      if (!el.v->is_object()) return bad_value(el, kShape + ", got " + type_name(*el.v));
      SecretFileEntry f;
      f.where = value_pos(el);
      f.base_dir = base_dir_;
      bool have_path = false, have_secrets = false;
      if (auto e = object(el, {
              {"path",
               [&](const Node& v) -> Check {
                 if (auto e = non_empty_string(v, &f.path)) return e;
                 if (has_glob_chars(f.path)) return bad_value(v, in_quotes(f.path) + ": one path, not a glob");
                 have_path = true;
                 return std::nullopt;
               }},
              {"secrets",
               [&](const Node& v) -> Check {
                 have_secrets = true;
                 if (v.v->is_array() && v.v->empty()) return bad_value(v, "must name at least one secret");
                 return string_array(v, [&](const Node& sv, const std::string& name) -> Check {
                   if (auto e = check_env_name(name)) return bad_value(sv, *e);
                   f.secrets.push_back(name);
                   return std::nullopt;
                 });
               }},
              {"optional", [&](const Node& v) { return boolean(v, &f.optional); }},
              {"writable", [&](const Node& v) { return boolean(v, &f.writable); }},
          }))
        return e;
      if (!have_path) return bad_value(el, "missing \"path\": " + kShape);
      if (!have_secrets) return bad_value(el, "missing \"secrets\": " + kShape);
      return add_secret_file(el, std::move(f));
    });
  }

  // srt's credentials: envVars and files, each "deny" (withheld) or "mask"
  // (a placeholder inside, the value put in at the proxy for injectHosts).
  Check credentials(const Node& n) {
    const std::string no_sigv4 = "not supported: ExGuardian does not re-sign AWS SigV4 requests";
    return object(n,
                  {
                      {"envVars", [&](const Node& v) { return credential_list(v, false); }},
                      {"files", [&](const Node& v) { return credential_list(v, true); }},
                      {"allowPlaintextInject",
                       [&](const Node& v) -> Check {
                         bool b = false;
                         if (auto e = boolean(v, &b)) return e;
                         if (b)
                           return bad_value(v, "ExGuardian puts secrets only into TLS connections it terminates "
                                               "itself; remove the key or set it to false");
                         return std::nullopt;
                       }},
                  },
                  {{"awsPairs", no_sigv4}, {"sigv4", no_sigv4}});
  }

  Check credential_list(const Node& n, bool files) {
    return each_element(n, files ? "an array of {path, mode, injectHosts}" : "an array of {name, mode, injectHosts}",
                        [&](const Node& el) { return credential_entry(el, files); });
  }

  // ".config/gh/hosts.yml" -> "FILE_HOSTS_YML" (unique among the secrets so far).
  std::string file_secret_name(const std::string& path) const {
    std::string base = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
    std::string name = "FILE_";
    for (char c : base) {
      if (std::isalnum(static_cast<unsigned char>(c))) name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      else if (name.back() != '_') name += '_';
    }
    while (name.size() > 5 && name.back() == '_') name.pop_back();
    std::string unique = name;
    for (int k = 2; std::any_of(policy_.secrets.begin(), policy_.secrets.end(),
                                [&](const SecretEntry& s) { return s.name == unique; });
         ++k)
      unique = name + "_" + std::to_string(k);
    return unique;
  }

  Check credential_entry(const Node& el, bool file) {
    const std::string what = file ? "credentials.files entry" : "credentials.envVars entry";
    const std::string kShape = std::string("expected {\"") + (file ? "path" : "name") +
                               "\": ..., \"mode\": \"mask\", \"injectHosts\": [...]} or {..., \"mode\": \"deny\"}";
    if (!el.v->is_object()) return bad_value(el, kShape + ", got " + type_name(*el.v));
    std::string subject, mode;
    std::optional<std::string> extract;
    std::vector<DomainEntry> hosts;
    bool have_subject = false, have_hosts = false;
    Node subject_node = el;
    const std::string jwt = "not supported: ExGuardian does not rewrite JSON Web Tokens; mask the whole value or "
                            "use \"extract\"";
    if (auto e = object(
            el,
            {
                {file ? "path" : "name",
                 [&](const Node& v) -> Check {
                   if (auto e = non_empty_string(v, &subject)) return e;
                   if (!file) {
                     if (auto e = check_env_name(subject)) return bad_value(v, *e);
                   } else if (has_glob_chars(subject)) {
                     return bad_value(v, in_quotes(subject) + ": one path, not a glob");
                   }
                   have_subject = true;
                   subject_node = v;
                   return std::nullopt;
                 }},
                {"mode",
                 [&](const Node& v) -> Check {
                   if (auto e = string(v, &mode)) return e;
                   if (mode != "mask" && mode != "deny")
                     return bad_value(v, "unknown mode " + in_quotes(mode) + " (expected \"mask\" or \"deny\")");
                   return std::nullopt;
                 }},
                {"injectHosts",
                 [&](const Node& v) -> Check {
                   have_hosts = true;
                   return secret_hosts(v, &hosts);
                 }},
                {"extract", [&](const Node& v) { return extract_pattern(v, &extract); }},
                {"onExtractNoMatch",
                 [&](const Node& v) -> Check {
                   std::string s;
                   if (auto e = string(v, &s)) return e;
                   if (s != "error")
                     return bad_value(v, "ExGuardian refuses to start when extract finds nothing (\"error\"); " +
                                             in_quotes(s) + " is not supported");
                   return std::nullopt;
                 }},
                // srt: copies of the value outside the extracted spans are masked too (true)
                // or left (false); ExGuardian replaces every copy whatever it says.
                noted("maskDuplicates", is_bool(), "every copy of the value is replaced by the placeholder, "
                                                   "inside the extracted spans or not"),
            },
            {{"decode", jwt}, {"maskClaims", jwt}}))
      return e;
    if (!have_subject) return bad_value(el, what + ": " + kShape);
    if (mode.empty()) return bad_value(el, what + " " + in_quotes(subject) + ": missing \"mode\"");
    if (mode == "deny") {
      if (have_hosts || extract)
        return bad_value(el, what + " " + in_quotes(subject) + ": injectHosts and extract go with mode \"mask\"");
      if (file) policy_.filesystem.deny_read.push_back(PathEntry{subject, false, base_dir_, value_pos(el)});
      else policy_.env.deny.push_back(subject);
      return std::nullopt;
    }
    if (!have_hosts)
      return bad_value(el, what + " " + in_quotes(subject) +
                               ": mode \"mask\" needs injectHosts: ExGuardian sends a secret only to the hosts "
                               "named for it");
    SecretEntry s;
    s.where = value_pos(el);
    s.base_dir = base_dir_;
    s.extract = extract;
    s.hosts = std::move(hosts);
    if (!file) {
      s.name = subject;
      s.source = SecretEntry::Source::Env;
      s.from = subject;
      return add_secret(subject_node, std::move(s));
    }
    s.name = file_secret_name(subject);
    s.source = SecretEntry::Source::File;
    s.from = subject;
    s.set_env = false;
    SecretFileEntry f{subject, base_dir_, {s.name}, value_pos(el)};
    if (auto e = add_secret(subject_node, std::move(s))) return e;
    return add_secret_file(subject_node, std::move(f));
  }

  Check layer(const Node& n) {
    std::string s;
    if (auto e = string(n, &s)) return e;
    if (s != layer::kAutoName && !layer::parse_kind(s)) {
      return bad_value(n, "unknown layer " + in_quotes(s) + " (expected " + layer::names_text(layer::all_kinds(), ", ") +
                              " or \"auto\": the strongest that runs here)");
    }
    policy_.layer = s;
    return std::nullopt;
  }

  // "minLayer": the weakest layer a run accepts, "auto" or not (--min-layer).
  Check min_layer(const Node& n) {
    std::string s;
    if (auto e = string(n, &s)) return e;
    if (!layer::parse_kind(s))
      return bad_value(n, "unknown layer " + in_quotes(s) + " (expected " + layer::names_text(layer::all_kinds()) + ")");
    policy_.min_layer = s;
    return std::nullopt;
  }

  // "landlock": "required" makes a kernel without Landlock a setup error;
  // "best-effort" (the default) applies what the kernel offers and says so.
  Check landlock(const Node& n) {
    std::string s;
    if (auto e = string(n, &s)) return e;
    if (s != "required" && s != "best-effort")
      return bad_value(n, "unknown value " + in_quotes(s) + " (expected \"required\" or \"best-effort\")");
    policy_.landlock_required = s == "required";
    return std::nullopt;
  }

  Check audit(const Node& n) {
    return object(n, {
        {"log",
         [this](const Node& v) -> Check {
           std::string s;
           if (auto e = non_empty_string(v, &s)) return e;
           policy_.audit_log = s;
           return std::nullopt;
         }},
    });
  }

  const PositionedJson& doc_;
  const std::string& name_;
  const std::string& base_dir_;
  Policy policy_;
};

}  // namespace

PResult<Policy> parse_policy(std::string_view text, const std::string& name, const std::string& base_dir) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    return std::unexpected(PolicyError{name + ": empty file (write {} for an empty policy)"});
  }
  auto doc = parse_json_with_positions(text);
  if (!doc) {
    SourcePos where{name, doc.error().pos.line, doc.error().pos.column};
    return std::unexpected(PolicyError{where.str() + ": " + doc.error().message});
  }
  return Validator(*doc, name, base_dir).run();
}

}  // namespace exg::policy
