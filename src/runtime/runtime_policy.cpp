#include "runtime/runtime_policy.hpp"

#include <algorithm>

namespace exg::runtime {

namespace {

bool within(const std::string& p, const std::string& dir) {
  if (dir == "/") return true;
  return p == dir || (p.size() > dir.size() && p.compare(0, dir.size(), dir) == 0 && p[dir.size()] == '/');
}

// "host[:port]" -> (host lower-cased, port or "").
std::pair<std::string, std::string> split_port(const std::string& pattern) {
  std::string host = pattern, port;
  if (auto c = pattern.rfind(':'); c != std::string::npos && pattern.find(']') == std::string::npos) {
    host = pattern.substr(0, c);
    port = pattern.substr(c + 1);
  }
  std::transform(host.begin(), host.end(), host.begin(), [](unsigned char ch) { return std::tolower(ch); });
  if (!host.empty() && host.back() == '.') host.pop_back();
  return {host, port};
}

// Whether allow pattern `a` admits every name pattern `b` admits.
bool covers(const std::string& a, const std::string& b) {
  auto [ah, ap] = split_port(a);
  auto [bh, bp] = split_port(b);
  if (!ap.empty() && ap != bp) return false;
  if (ah == bh) return true;
  if (ah.starts_with("*.")) {
    std::string suffix = ah.substr(1);  // ".example.com"
    return bh.size() > suffix.size() && bh.ends_with(suffix);
  }
  return false;
}

Result<void> check_container_paths(const policy::Policy& p, const std::string& file) {
  auto check = [&](const std::vector<policy::PathEntry>& list, const char* key) -> Result<void> {
    for (const auto& e : list)
      if (e.path.empty() || e.path[0] != '/')
        return fail(Error::msg(file + ": filesystem." + key + " " + e.path,
                               "paths are the container's own and must be absolute"));
    return {};
  };
  for (auto [list, key] : {std::pair{&p.filesystem.allow_write, "allowWrite"}, {&p.filesystem.deny_write, "denyWrite"},
                           {&p.filesystem.deny_read, "denyRead"}, {&p.filesystem.allow_read, "allowRead"}})
    if (auto r = check(*list, key); !r) return r;
  if (!p.secrets.empty() || !p.secret_files.empty())
    return fail(Error::msg(file + ": secrets", "credential injection is not available in exguardian runtime yet"));
  if (p.layer && *p.layer != "container" && *p.layer != "gvisor")
    return fail(Error::msg(file + ": layer " + *p.layer, "exguardian runtime runs containers: container or gvisor"));
  return {};
}

template <typename T>
void take_min(std::optional<T>& a, const std::optional<T>& b) {
  if (b && (!a || *b < *a)) a = b;
}

}  // namespace

bool valid_handler_name(const std::string& n) {
  if (n.empty() || n.size() > 63) return false;
  if (!std::isalnum(static_cast<unsigned char>(n[0])) || std::isupper(static_cast<unsigned char>(n[0]))) return false;
  return std::all_of(n.begin(), n.end(), [](unsigned char c) {
    return (std::isalnum(c) && !std::isupper(c)) || c == '.' || c == '_' || c == '-';
  });
}

Result<policy::Policy> narrow_policy(const policy::Policy& base, const policy::Policy& profile) {
  if (!profile.secrets.empty() || !profile.secret_files.empty())
    return fail(Error::msg("profile", "may not add secrets (a profile only narrows its handler's policy)"));
  if (!profile.env.allow.empty() || !profile.env.set.empty())
    return fail(Error::msg("profile", "may not set or pass environment variables (it only narrows)"));
  policy::Policy out = base;
  auto& net = out.network;
  net.allowed_domains.clear();
  for (const auto& d : profile.network.allowed_domains)
    if (std::any_of(base.network.allowed_domains.begin(), base.network.allowed_domains.end(),
                    [&](const policy::DomainEntry& b) { return covers(b.pattern, d.pattern); }))
      net.allowed_domains.push_back(d);
  net.allowed_cidrs.clear();
  for (const auto& c : profile.network.allowed_cidrs)
    if (std::any_of(base.network.allowed_cidrs.begin(), base.network.allowed_cidrs.end(),
                    [&](const policy::DomainEntry& b) { return b.pattern == c.pattern; }))
      net.allowed_cidrs.push_back(c);
  for (const auto& d : profile.network.denied_domains) net.denied_domains.push_back(d);
  auto& fs = out.filesystem;
  fs.allow_write.clear();
  for (const auto& w : profile.filesystem.allow_write)
    if (std::any_of(base.filesystem.allow_write.begin(), base.filesystem.allow_write.end(),
                    [&](const policy::PathEntry& b) { return within(w.path, b.path); }))
      fs.allow_write.push_back(w);
  for (const auto& e : profile.filesystem.deny_write) fs.deny_write.push_back(e);
  for (const auto& e : profile.filesystem.deny_read) fs.deny_read.push_back(e);
  // allowRead carves out of denyRead: the profile's would re-open; only base's stay.
  take_min(out.resources.memory_bytes, profile.resources.memory_bytes);
  take_min(out.resources.pids, profile.resources.pids);
  take_min(out.resources.cpus, profile.resources.cpus);
  if (profile.layer == "gvisor") out.layer = "gvisor";
  if (profile.audit_log && !base.audit_log) out.audit_log = profile.audit_log;
  for (const auto& s : profile.sources) out.sources.push_back(s);
  return out;
}

Result<RuntimePolicy> load_runtime_policy(const std::string& dir, const std::string& handler, const std::string& profile) {
  if (!valid_handler_name(handler))
    return fail(Error::msg("handler " + handler, "expected a name of [a-z0-9._-] (at most 63), not a path"));
  RuntimePolicy rp;
  rp.handler = handler;
  std::string file = dir + "/" + handler + ".json";
  auto base = policy::load_policy_file(file);
  if (!base) return fail(Error::msg("handler " + handler, base.error().message));
  if (auto r = check_container_paths(*base, file); !r) return fail(r.error());
  rp.policy = std::move(*base);
  if (!profile.empty()) {
    if (!valid_handler_name(profile))
      return fail(Error::msg(std::string(kProfileAnnotation) + "=" + profile,
                             "expected a profile name of [a-z0-9._-] (at most 63), not a path"));
    std::string pfile = dir + "/" + profile + ".json";
    auto p = policy::load_policy_file(pfile);
    if (!p) return fail(Error::msg(std::string(kProfileAnnotation) + "=" + profile, p.error().message));
    if (auto r = check_container_paths(*p, pfile); !r && p->secrets.empty()) return fail(r.error());
    auto narrowed = narrow_policy(rp.policy, *p);
    if (!narrowed) return fail(Error::msg(pfile, narrowed.error().str()));
    rp.policy = std::move(*narrowed);
    rp.profile = profile;
  }
  rp.runtime = rp.policy.layer == "gvisor" ? oci::Runtime::Runsc : oci::Runtime::Crun;
  return rp;
}

}  // namespace exg::runtime
