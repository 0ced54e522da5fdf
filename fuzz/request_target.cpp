// Request targets judged by network.rules (src/egress/request_rules.cpp): the
// path of a plain-HTTP or terminated request, as a client spells it. Input: a
// method byte, then the target. Normalising is idempotent and yields a plain
// absolute path; a request allowed under the rule for "/pub/" stays under
// /pub/ however an upstream reads it (dot segments resolved, %2e, %2f, %5c and
// "\" decoded first); a deny rule for "/priv" refuses every spelling of it
// that an upstream would read as /priv.
#include <cstdint>
#include <string>

#include "check.hpp"
#include "egress/request_rules.hpp"

using namespace exg::egress;

namespace {

// What a lenient upstream makes of a path: escapes of "." "/" "\" decoded,
// "\" as "/", then the dot segments resolved.
std::string upstream_view(std::string_view p) {
  std::string d;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '%' && i + 2 < p.size()) {
      std::string e{p.substr(i + 1, 2)};
      for (char& c : e) c = (char)std::toupper((unsigned char)c);
      if (e == "2E") { d += '.'; i += 2; continue; }
      if (e == "2F" || e == "5C") { d += '/'; i += 2; continue; }
    }
    d += p[i] == '\\' ? '/' : p[i];
  }
  return detail::normalize_target(d).path;
}

const RequestRules& rules(bool normalize) {
  static const auto make = [](bool norm) {
    exg::policy::Network net;
    net.normalize_targets = norm;
    exg::policy::RequestRule pub;
    pub.name = "pub";
    pub.host = {"a.test", {}};
    pub.methods = {"GET"};
    pub.paths = {"/pub/"};
    exg::policy::RequestRule priv;
    priv.name = "priv";
    priv.host = {"a.test", {}};
    priv.deny = true;
    priv.paths = {"/pub/priv"};
    net.rules = {pub, priv};
    auto r = RequestRules::from_policy(net);
    FUZZ_CHECK(r.has_value(), "the rules build");
    return std::move(*r);
  };
  static const RequestRules strict = make(false), lenient = make(true);
  return normalize ? lenient : strict;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::string_view target(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto n = detail::normalize_target(target);
  FUZZ_CHECK(n.path.starts_with('/'), "a normalized path is absolute");
  FUZZ_CHECK(n.path.find("//") == std::string::npos, "no empty segment");
  FUZZ_CHECK(detail::normalize_target(n.path).path == n.path, "normalizing is idempotent");
  static const Host host = *normalise_host("a.test");
  const char* method = (data[0] & 1) ? "GET" : "POST";
  for (bool norm : {false, true}) {
    auto v = rules(norm).check(host, method, target);
    if (!v.decision.allowed) continue;
    FUZZ_CHECK(std::string_view(method) == "GET", "only GET is allowed");
    std::string judged = v.normalized_target ? *v.normalized_target : std::string(target);
    std::string seen = upstream_view(judged.substr(0, judged.find_first_of("?#")));
    FUZZ_CHECK(seen.starts_with("/pub/"), "an allowed request stays under /pub/ as the upstream reads it");
    std::string lower = seen;
    for (char& c : lower) c = (char)std::tolower((unsigned char)c);
    FUZZ_CHECK(!lower.starts_with("/pub/priv"), "the deny rule holds for every spelling");
  }
  return 0;
}
