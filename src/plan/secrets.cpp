// Secrets on the sandbox's side: values read on the host, placeholders inside,
// masked copies of credential files, the trust bundle. Nothing here puts a
// value where the sandbox could read it: the values go into Plan::secrets,
// which only the supervisor's proxy uses.
#include "plan/secrets.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "egress/rules.hpp"
#include "egress/secrets.hpp"
#include "plan/paths.hpp"
#include "policy/extract_pattern.hpp"
#include "util/json_parse.hpp"
#include "util/unique_fd.hpp"

namespace exg::plan {

const std::vector<std::string> kCaEnvNames = {
    "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO", "AWS_CA_BUNDLE",
};

namespace {

// Where distributions keep the system bundle (a symlink among them is
// followed: the file it names is what gets covered).
constexpr const char* kSystemBundles[] = {
    "/etc/ssl/certs/ca-certificates.crt",  // Debian, Ubuntu, Alpine, Arch
    "/etc/pki/tls/certs/ca-bundle.crt",    // Fedora, RHEL
    "/etc/ssl/ca-bundle.pem",              // openSUSE
    "/etc/ssl/cert.pem",                   // Alpine, Arch, macOS-style
};
constexpr const char* kOwnBundle = "/run/exguardian/ca-bundle.pem";
constexpr size_t kMinValue = 4;         // shorter values would be replaced all over a masked file
constexpr size_t kMaxFile = 1 << 20;    // a credential file is small

std::string label(const policy::SecretEntry& s) { return "secret " + s.name + " (" + s.where.str() + ")"; }

Result<std::string> read_small_file(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd) return fail(Error::sys("read " + path));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return fail(Error::sys("stat " + path));
  if (!S_ISREG(st.st_mode)) return fail(Error::msg(path, "not a regular file"));
  std::string text;
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(Error::sys("read " + path));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxFile) return fail(Error::msg(path, "larger than 1 MiB: not a credential file"));
  }
  return text;
}

std::optional<std::string> env_value(const Context& ctx, const std::string& name) {
  for (const auto& kv : ctx.environ)
    if (kv.size() > name.size() && kv.compare(0, name.size(), name) == 0 && kv[name.size()] == '=')
      return kv.substr(name.size() + 1);
  return std::nullopt;
}

// A host pattern as the domain lists write it: "a.b", "*.b", either with ":port".
struct HostPattern {
  bool wildcard = false;
  std::string name;  // normalised, without "*." and port
  std::optional<uint16_t> port;
};

std::optional<HostPattern> parse_pattern(const std::string& p) {
  HostPattern h;
  std::string host = p;
  if (host.starts_with("[")) {
    auto close = host.find(']');
    if (close == std::string::npos) return std::nullopt;
    if (close + 1 < host.size() && host[close + 1] == ':') h.port = static_cast<uint16_t>(std::stoul(host.substr(close + 2)));
    host = host.substr(1, close - 1);
  } else if (auto colon = host.rfind(':'); colon != std::string::npos && host.find(':') == colon) {
    h.port = static_cast<uint16_t>(std::stoul(host.substr(colon + 1)));
    host = host.substr(0, colon);
  }
  if (host.starts_with("*.")) {
    h.wildcard = true;
    host = host.substr(2);
  }
  auto n = egress::normalise_host(host);
  if (!n) return std::nullopt;
  h.name = n->name;
  return h;
}

// Whether every host:port `h` stands for is matched by `rule`.
bool covers(const HostPattern& rule, const HostPattern& h) {
  if (rule.port && rule.port != h.port) return false;
  if (!rule.wildcard) return !h.wildcard && rule.name == h.name;
  if (!h.wildcard) return h.name.ends_with("." + rule.name);
  return h.name == rule.name || h.name.ends_with("." + rule.name);
}

// The value a secret's source holds, before extract.
Result<std::string> read_source(const policy::SecretEntry& s, const Context& ctx, const std::string& home,
                                std::string* file_path) {
  if (s.source == policy::SecretEntry::Source::Env) {
    auto v = env_value(ctx, s.from);
    if (!v) return fail(Error::msg(label(s), "env:" + s.from + " is not set in exguardian's environment"));
    return *v;
  }
  std::string p = expand_path(s.from, home, s.base_dir);
  auto c = canonical(p);
  if (!c) return fail(Error::msg(label(s), "file:" + s.from + ": " + p + " does not exist"));
  *file_path = *c;
  auto text = read_small_file(*c);
  if (!text) return fail(Error::msg(label(s), "file:" + s.from + ": " + text.error().str()));
  return *text;
}

// Whether an optional secret's source is there: the variable is set, or the
// path exists (a file that exists but cannot be read is an error, not absent).
bool source_exists(const policy::SecretEntry& s, const Context& ctx, const std::string& home) {
  if (s.source == policy::SecretEntry::Source::Env) return env_value(ctx, s.from).has_value();
  struct stat st;
  return ::lstat(expand_path(s.from, home, s.base_dir).c_str(), &st) == 0;
}

// The value itself: group 1 of the extract pattern (every match must agree),
// or the whole text (a file's trailing line break is not part of it).
Result<std::string> secret_value(const policy::SecretEntry& s, const std::string& text) {
  std::string value;
  if (s.extract) {
    // Two values are enough to know the pattern is ambiguous.
    auto found = policy::extract_values(*s.extract, text, 2);
    if (found.empty()) return fail(Error::msg(label(s), "extract \"" + *s.extract + "\" finds nothing in its source"));
    if (found.size() > 1)
      return fail(Error::msg(label(s), "extract \"" + *s.extract +
                                           "\" finds more than one different value; one secret holds one value (declare one per value)"));
    value = *found.begin();
  } else {
    value = text;
    if (s.source == policy::SecretEntry::Source::File)
      while (!value.empty() && (value.back() == '\n' || value.back() == '\r')) value.pop_back();
  }
  if (value.empty()) return fail(Error::msg(label(s), "its value is empty"));
  if (value.find_first_of(std::string("\0\r\n", 3)) != std::string::npos)
    return fail(Error::msg(label(s), "its value holds a line break or NUL: it cannot go into a request header"));
  if (value.size() < kMinValue)
    return fail(Error::msg(label(s), "its value is " + std::to_string(value.size()) +
                                         " bytes long: too short to be told apart from other text (at least " +
                                         std::to_string(kMinValue) + ")"));
  return value;
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  if (from.empty()) return text;
  for (size_t pos = 0; (pos = text.find(from, pos)) != std::string::npos; pos += to.size()) text.replace(pos, from.size(), to);
  return text;
}

}  // namespace

Result<std::string> make_placeholder(const std::string& name) { return egress::make_placeholder(name); }

std::optional<std::string> secret_host_refusal(const std::string& host, const policy::Network& net) {
  auto h = parse_pattern(host);
  if (!h) return "\"" + host + "\" is not a host name the proxy can match";
  for (const auto& d : net.denied_domains) {
    if (d.pattern == "*") return "every host is denied by network.deniedDomains \"*\" (" + d.where.str() + ")";
    auto rule = parse_pattern(d.pattern);
    // A deny rule without a port denies every port; one with a port denies that port only.
    if (rule && covers(*rule, *h))
      return "\"" + host + "\" is denied by network.deniedDomains \"" + d.pattern + "\" (" + d.where.str() + ")";
  }
  for (const auto& a : net.allowed_domains) {
    auto rule = parse_pattern(a.pattern);
    if (rule && covers(*rule, *h)) return std::nullopt;
  }
  return "\"" + host + "\" is not allowed by network.allowedDomains: add it there too (the secret goes only where "
         "the sandbox may connect)";
}

Result<ResolvedSecrets> resolve_secrets(const policy::Policy& pol, const Context& ctx, const std::string& home) {
  ResolvedSecrets out;
  std::map<std::string, const policy::SecretEntry*> seen;
  std::string absent;  // why each optional secret was dropped
  for (const auto& s : pol.secrets) {
    if (auto it = seen.find(s.name); it != seen.end())
      return fail(Error::msg(label(s), "already declared at " + it->second->where.str()));
    seen[s.name] = &s;
    for (const auto& h : s.hosts)
      if (auto why = secret_host_refusal(h.pattern, pol.network))
        return fail(Error::msg(label(s), "host " + *why + " [" + h.where.str() + "]"));
    if (s.optional && !source_exists(s, ctx, home)) {
      out.dropped.push_back(s.name);
      absent += "; " + s.name + ": " +
                (s.source == policy::SecretEntry::Source::Env ? "env:" + s.from + " is not set" : s.from + " does not exist");
      continue;
    }
    std::string file;
    auto text = read_source(s, ctx, home, &file);
    if (!text) return fail(text.error());
    // Optional and not there (a Codex auth.json signed in with a key has no tokens; one
    // signed in with ChatGPT has no key): dropped. The copy inside is still checked below.
    if (s.optional && s.extract && policy::extract_values(*s.extract, *text, 1).empty()) {
      out.dropped.push_back(s.name);
      absent += "; " + s.name + ": its extract finds nothing in " + (file.empty() ? s.from : file);
      continue;
    }
    auto value = secret_value(s, *text);
    if (!value) return fail(value.error());
    auto ph = make_placeholder(s.name);
    if (!ph) return fail(ph.error());
    Secret sec{s.name, *ph, *value, {}};
    for (const auto& h : s.hosts) sec.hosts.push_back(h.pattern);
    sec.headers = s.headers;
    sec.set_header = s.set_header;
    sec.refresh_field = s.refresh_field;
    for (const auto& h : s.body_hosts) sec.body_hosts.push_back(h.pattern);
    sec.source_file = file;
    if (!file.empty()) out.source_files.push_back(file);
    // The variable inside: the placeholder, or (extract) the host's variable with the value replaced.
    if (s.set_env)
      out.env[s.name] = s.source == policy::SecretEntry::Source::Env && s.extract && s.from == s.name
                            ? replace_all(*text, *value, *ph)
                            : *ph;
    out.secrets.push_back(std::move(sec));
  }
  // Every secret optional (an agent profile: signed in with a key or with OAuth) and
  // none there: the agent would sign in inside, where its new tokens would be real.
  if (!pol.secrets.empty() && out.dropped.size() == pol.secrets.size())
    return fail(Error::msg("secrets", "none is there (each is optional, one at least is needed: set the key or "
                                      "sign in outside the sandbox first)" + absent));
  // Two secrets with one value would make the proxy's choice of host ambiguous.
  for (size_t i = 0; i < out.secrets.size(); ++i)
    for (size_t j = i + 1; j < out.secrets.size(); ++j)
      // (Headers the proxy sets itself may share a value: E2B's rules for two hosts
      // often carry one token, and no placeholder stands for it inside.)
      if (out.secrets[i].value == out.secrets[j].value &&
          (out.secrets[i].set_header.empty() || out.secrets[j].set_header.empty()))
        return fail(Error::msg("secrets " + out.secrets[i].name + " and " + out.secrets[j].name,
                               "hold the same value; declare it once with every host it may go to"));
  return out;
}

std::string mask_values(std::string text, const std::vector<Secret>& secrets) {
  std::vector<const Secret*> order;
  for (const auto& s : secrets) order.push_back(&s);
  // Longest first: a value that contains another is replaced whole.
  std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->value.size() > b->value.size(); });
  for (const auto* s : order) text = replace_all(std::move(text), s->value, s->placeholder);
  return text;
}

Result<std::vector<Step>> masked_file_steps(const policy::Policy& pol, const std::vector<Secret>& secrets,
                                            const std::string& home, const std::vector<std::string>& dropped) {
  std::vector<Step> steps;
  std::set<std::string> targets;
  for (const auto& f : pol.secret_files) {
    std::string what = "secret file " + f.path + " (" + f.where.str() + ")";
    std::string p = expand_path(f.path, home, f.base_dir);
    struct stat lst;
    if (f.optional && ::lstat(p.c_str(), &lst) != 0) continue;  // not signed in that way
    auto c = canonical(p);
    if (!c) return fail(Error::msg(what, p + " does not exist"));
    if (!targets.insert(*c).second) return fail(Error::msg(what, *c + " is declared twice"));
    auto text = read_small_file(*c);
    if (!text) return fail(Error::msg(what, text.error().str()));
    // A JSON credential file that does not parse may hold a token the patterns
    // did not find: no copy of it goes in (fail closed).
    std::string why;
    if (c->ends_with(".json") && parse_json(*text, &why).is_discarded())
      return fail(Error::msg(what, *c + " is not valid JSON (" + why + "): its tokens cannot be told apart; "
                                   "fix or remove the file (sign in again)"));
    for (const auto& name : f.secrets) {
      auto s = std::find_if(secrets.begin(), secrets.end(), [&](const Secret& x) { return x.name == name; });
      if (s == secrets.end()) {
        // An optional secret whose source is absent: nothing of it to mask here.
        if (std::find(dropped.begin(), dropped.end(), name) != dropped.end()) continue;
        return fail(Error::msg(what, "names secret " + name + ", which no \"secrets\" entry declares"));
      }
      if (text->find(s->value) == std::string::npos)
        return fail(Error::msg(what, "the value of secret " + name + " is not in " + *c));
    }
    struct stat st{};
    ::stat(c->c_str(), &st);
    Step s;
    s.kind = StepKind::File;
    s.target = *c;
    s.source = *c;
    s.is_dir = false;
    s.mode = (st.st_mode & 0444) ? (st.st_mode & 0444) : 0400;
    s.writable = f.writable;
    if (f.writable) s.mode |= 0200;
    s.content = mask_values(std::move(*text), secrets);
    s.why = f.writable ? "credential file: a writable copy with placeholders in place of the secrets' values "
                         "(what is written there stays in the copy)"
                       : "credential file: a copy with placeholders in place of the secrets' values";
    steps.push_back(std::move(s));
  }
  return steps;
}

std::vector<Step> trust_bundle_steps(Plan& plan) {
  std::vector<Step> steps;
  std::set<std::string> targets;
  plan.trust_bundle_path.clear();
  plan.host_trust_bundle.clear();
  for (const char* p : kSystemBundles) {
    auto c = canonical(p);
    if (!c) continue;
    struct stat st;
    if (::stat(c->c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (plan.host_trust_bundle.empty()) plan.host_trust_bundle = *c;
    if (plan.trust_bundle_path.empty()) plan.trust_bundle_path = p;
    if (!targets.insert(*c).second) continue;
    Step s;
    s.kind = StepKind::File;
    s.target = *c;
    s.source = plan.host_trust_bundle;
    s.is_dir = false;
    s.mode = 0444;
    s.trust_bundle = true;
    s.why = "trust: the host's CA bundle plus this sandbox's CA (TLS to hosts with secrets ends at the proxy)";
    steps.push_back(std::move(s));
  }
  if (steps.empty()) {
    Step s;
    s.kind = StepKind::File;
    s.target = kOwnBundle;
    s.is_dir = false;
    s.mode = 0444;
    s.trust_bundle = true;
    s.why = "trust: this sandbox's CA (no system bundle on this host)";
    steps.push_back(std::move(s));
    plan.trust_bundle_path = kOwnBundle;
  }
  return steps;
}

}  // namespace exg::plan
