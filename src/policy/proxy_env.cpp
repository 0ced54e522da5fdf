// srt's fallback for a parent proxy the settings do not name: the proxy
// variables of the environment exguardian was started with (srt 0.0.83,
// dist/sandbox/parent-proxy.js resolveParentProxy: field by field, the
// setting first). Behind a proxy a direct connection would fail anyway, and a
// policy cannot tell whether it was written for srt, so this is ExGuardian's
// behaviour for every policy (docs/srt.md).
#include <string>

#include "policy/policy.hpp"

namespace exg::policy {

namespace {

// The first of `names` that is set, and its value ("" when none is).
std::pair<std::string, std::string> first_set(const EnvLookup& env, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (const char* v = env(n)) return {n, v};
  return {};
}

// What the policy's parentProxy needs once the environment had its say: a
// proxy, and an https:// one for its caFile. An error names the key, where it
// was written and where each URL came from.
PResult<void> check_completed(const ParentProxy& pp, const std::vector<std::string>& taken) {
  std::string at = pp.where.str() + ": network.parentProxy";
  if (pp.http.empty() && pp.https.empty())
    return std::unexpected(PolicyError{
        at + ": names no proxy: neither \"http\" nor \"https\" is given, and the environment exguardian was started "
             "with sets none of HTTP_PROXY, http_proxy, HTTPS_PROXY, https_proxy (srt's fallback): give a proxy URL, "
             "set one of those, or leave parentProxy out"});
  auto tls = [](const std::string& u) { return !u.empty() && parse_proxy_url(u)->tls; };
  if (!pp.ca_file.empty() && !tls(pp.http) && !tls(pp.https)) {
    std::string urls;
    for (const auto& t : taken) urls += "; " + t;
    return std::unexpected(PolicyError{at + ": " + kCaFileWithoutTls + " (after srt's fallback to the environment" +
                                       (urls.empty() ? std::string(", which named none") : urls) + ")"});
  }
  return {};
}

}  // namespace

PResult<void> parent_proxy_from_environment(Policy& p, const EnvLookup& env) {
  bool in_policy = p.network.parent_proxy.has_value();
  ParentProxy pp = p.network.parent_proxy.value_or(ParentProxy{});
  std::vector<std::string> taken;
  auto url_from = [&](std::string* field, const char* key, std::initializer_list<const char*> names) -> PResult<void> {
    if (!field->empty()) return {};
    auto [name, value] = first_set(env, names);
    if (value.empty()) return {};
    // Like curl and srt: a value without a scheme is an http:// proxy.
    if (value.find("://") == std::string::npos) value = "http://" + value;
    if (auto u = parse_proxy_url(value); !u)
      return std::unexpected(PolicyError{name + " (srt's fallback for network.parentProxy." + key +
                                         "): " + u.error().message + "; unset it or name the proxy in the policy"});
    *field = value;
    taken.push_back(std::string("network.parentProxy.") + key + ": from " + name + ": " + redacted_proxy_url(value));
    return {};
  };
  if (auto r = url_from(&pp.http, "http", {"HTTP_PROXY", "http_proxy"}); !r) return r;
  if (auto r = url_from(&pp.https, "https", {"HTTPS_PROXY", "https_proxy"}); !r) return r;
  if (in_policy) {
    if (auto r = check_completed(pp, taken); !r) return r;
  } else if (pp.http.empty() && pp.https.empty()) {
    return {};  // no proxy anywhere: direct, as in srt
  }
  if (pp.no_proxy.empty()) {
    auto [name, value] = first_set(env, {"NO_PROXY", "no_proxy"});
    if (!value.empty()) {
      if (auto np = parse_no_proxy(value); !np)
        return std::unexpected(PolicyError{name + " (srt's fallback for network.parentProxy.noProxy): " +
                                           np.error().message + "; unset it or give noProxy in the policy"});
      pp.no_proxy = value;
      taken.push_back("network.parentProxy.noProxy: from " + name + ": direct: " + value);
    }
  }
  if (taken.empty()) return {};
  for (auto& t : taken) p.notes.push_back(std::move(t) + " (srt's fallback: the environment exguardian was started with)");
  p.network.parent_proxy = std::move(pp);
  return {};
}

}  // namespace exg::policy
