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
#include <regex>
#include <string>
#include <vector>

#include "layer/kind.hpp"
#include "policy/json_positions.hpp"
#include "policy/policy.hpp"

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

  void note(const Node& n, const std::string& why) {
    policy_.notes.push_back(key_pos(n).str() + ": srt key " + n.path + " is accepted and not applied: " + why);
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

  // srt keys we take (type-checked) but do not act on.
  Field noted(std::string_view key, std::function<Check(const Node&)> type, std::string why) {
    return Field{key, [this, type = std::move(type), why = std::move(why)](const Node& n) -> Check {
                   if (auto e = type(n)) return e;
                   note(n, why);
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
            {"landlock", [this](const Node& n) { return landlock(n); }},
            {"audit", [this](const Node& n) { return audit(n); }},
            noted("ignoreViolations", is_object(), "ExGuardian does not filter its violation reports"),
            noted("mandatoryDenySearchDepth", [this](const Node& n) { return integer(n, 1, 10); },
                  "ExGuardian protects these files at any depth"),
            noted("allowPty", is_bool(), "ExGuardian gives the command its own pty"),
            noted("ripgrep", is_object(), "ExGuardian does not use ripgrep"),
            noted("git", is_object(), "ExGuardian has its own rules for git files"),
            noted("seccomp", is_object(), "ExGuardian installs its own seccomp filter"),
            noted("windows", is_object(), "it applies to Windows only"),
            noted("bwrapPath", is_string(), "ExGuardian does not use bwrap"),
            noted("socatPath", is_string(), "ExGuardian does not use socat"),
            noted("javaAgentJarPath", is_string(), "ExGuardian does not use a Java agent"),
            noted("allowAppleEvents", is_bool(), "it applies to macOS only"),
            noted("enableWeakerNetworkIsolation", is_bool(), "it applies to macOS only"),
            weakening("enableWeakerNestedSandbox",
                      "ExGuardian does not weaken its sandbox to run nested; remove the key or set it to false"),
            weakening("allowNestedUserNamespaces",
                      "ExGuardian does not let the command create user namespaces; remove the key or set it "
                      "to false"),
        });
  }

  Check network(const Node& n) {
    auto domains = [this](bool denied, std::vector<DomainEntry>* out) {
      return [this, denied, out](const Node& list) {
        return string_array(list, [&](const Node& el, const std::string& s) -> Check {
          if (auto e = check_domain_pattern(s, denied)) return bad_value(el, *e);
          out->push_back(DomainEntry{s, value_pos(el)});
          return std::nullopt;
        });
      };
    };
    const std::string not_supported = "not supported by ExGuardian";
    return object(n,
        {
            {"allowedDomains", domains(false, &policy_.network.allowed_domains)},
            {"deniedDomains", domains(true, &policy_.network.denied_domains)},
            {"allowedCidrs",
             [this](const Node& list) {
               return string_array(list, [&](const Node& el, const std::string& s) -> Check {
                 if (auto e = check_cidr(s)) return bad_value(el, *e);
                 policy_.network.allowed_cidrs.push_back(DomainEntry{s, value_pos(el)});
                 return std::nullopt;
               });
             }},
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
            noted("allowLocalBinding", is_bool(), "the sandbox has its own network namespace"),
            noted("allowMachLookup", is_string_array(), "it applies to macOS only"),
            noted("httpProxyPort", is_port(), "ExGuardian runs its own egress proxy"),
            noted("socksProxyPort", is_port(), "ExGuardian runs its own egress proxy"),
            noted("deniedDomainReasons",
                  [this](const Node& o) {
                    return object_of_strings(o);
                  },
                  "ExGuardian reports its own refusal reasons"),
            noted("strictAllowlist", is_bool(), "ExGuardian's egress proxy does not implement it yet"),
            noted("deniedResolvedAddresses", is_string_array(),
                  "ExGuardian's egress proxy does not implement it yet"),
            noted("requireHostMatch", is_bool(), "ExGuardian's egress proxy does not implement it yet"),
            noted("refuseOpaqueTunnels", is_bool(), "ExGuardian's egress proxy does not implement it yet"),
            {"tlsTerminate", [this](const Node& v) { return tls_terminate(v); }},
        },
        {{"mitmProxy", not_supported},
         {"parentProxy", not_supported},
         {"filterRequest", not_supported}});
  }

  Check object_of_strings(const Node& n) {
    if (!n.v->is_object()) return wrong_type(n, "an object of strings");
    for (const auto& [key, value] : n.v->items()) {
      Node m = member(n, key, value);
      if (auto e = string(m)) return e;
    }
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
           return std::nullopt;
         }},
        {"protect",
         [this](const Node& list) {
           return string_array(list, [this](const Node& el, const std::string& s) { return protect_name(el, s); });
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
    if (auto e = object(n, {}, {{"caCertPath", "ExGuardian makes its own CA in memory for every sandbox; remove the key"},
                                {"caKeyPath", "ExGuardian makes its own CA in memory for every sandbox (its key never "
                                              "touches the disk); remove the key"}}))
      return e;
    policy_.notes.push_back(key_pos(n).str() +
                            ": network.tlsTerminate: ExGuardian terminates TLS for the hosts that have a secret, and "
                            "only for them");
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
  Check secret_header_name(const Node& el, const std::string& s) {
    static const std::string kTchar = "!#$%&'*+-.^_`|~";
    if (s.empty() || !std::all_of(s.begin(), s.end(), [](char c) {
          return std::isalnum((unsigned char)c) || kTchar.find(c) != std::string::npos;
        }))
      return bad_value(el, in_quotes(s) + " is not a header name");
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
    try {
      std::regex re(s, std::regex::ECMAScript);
      if (re.mark_count() < 1)
        return bad_value(n, "needs a capture group: group 1 of each match is the secret's value");
    } catch (const std::regex_error& e) {
      return bad_value(n, "invalid regular expression " + in_quotes(s) + ": " + e.what());
    }
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
          }))
        return e;
      if (!have_name) return bad_value(el, "missing \"name\": " + kShape);
      if (!have_from) return bad_value(el, "secret " + in_quotes(s.name) + ": missing \"from\": " + kShape);
      if (!have_hosts)
        return bad_value(el, "secret " + in_quotes(s.name) +
                                 ": missing \"hosts\": a secret goes only to the hosts named for it");
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
            },
            {{"decode", jwt}, {"maskClaims", jwt},
             {"maskDuplicates", "not supported: every copy of a masked value is replaced"}}))
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
    if (!layer::parse_kind(s)) {
      return bad_value(n, "unknown layer " + in_quotes(s) + " (expected " + layer::names_text(layer::all_kinds()) + ")");
    }
    policy_.layer = s;
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
