// exguardian serve's configuration files (src/serve/tenants.cpp,
// templates.cpp): the --tenants file (ids, key hashes, quotas) and the
// --templates file (layer, rootfs, policy, domains, resources). The first
// byte picks which; the rest is the file. Any text gives the configuration or
// one error naming the file, never a throw; an accepted one keeps every bound
// (the quotas and resources a sandbox is started with), and written back as
// JSON it is accepted again as the same.
#include <cmath>
#include <cstdint>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "check.hpp"
#include "serve/templates.hpp"
#include "serve/tenants.hpp"

using namespace exg::serve;

namespace {

bool is_name(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') return false;
  return true;
}

std::string hex(const std::array<unsigned char, 32>& h) {
  static const char* d = "0123456789abcdef";
  std::string s = "sha256:";
  for (unsigned char b : h) s += d[b >> 4], s += d[b & 15];
  return s;
}

nlohmann::json tenants_json(const Tenants& t) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& tn : t.all()) {
    nlohmann::json keys = nlohmann::json::array();
    for (const auto& h : tn.key_hashes) keys.push_back(hex(h));
    list.push_back({{"id", tn.id}, {"keys", keys},
                    {"quota", {{"sandboxes", tn.quota.max_sandboxes}, {"memoryMB", tn.quota.max_memory_mb},
                               {"cpus", tn.quota.max_cpus}, {"maxTimeoutSeconds", tn.quota.max_timeout_s}}}});
  }
  return {{"tenants", list}};
}

bool same(const Tenants& a, const Tenants& b) {
  if (a.all().size() != b.all().size()) return false;
  for (size_t i = 0; i < a.all().size(); ++i) {
    const Tenant &x = a.all()[i], &y = b.all()[i];
    if (x.id != y.id || x.key_hashes != y.key_hashes || x.quota.max_sandboxes != y.quota.max_sandboxes ||
        x.quota.max_memory_mb != y.quota.max_memory_mb || x.quota.max_cpus != y.quota.max_cpus ||
        x.quota.max_timeout_s != y.quota.max_timeout_s)
      return false;
  }
  return true;
}

void check_tenants(const Tenants& t) {
  std::set<std::string> ids;
  std::set<std::array<unsigned char, 32>> hashes;
  for (const auto& tn : t.all()) {
    FUZZ_CHECK(is_name(tn.id) && ids.insert(tn.id).second, "tenant ids are unique names");
    FUZZ_CHECK(!tn.key_hashes.empty(), "a tenant has a key");
    for (const auto& h : tn.key_hashes) FUZZ_CHECK(hashes.insert(h).second, "a key belongs to one tenant");
    FUZZ_CHECK(tn.quota.max_sandboxes <= 100000, "a tenant holds at most 100000 sandboxes");
    FUZZ_CHECK(std::isfinite(tn.quota.max_cpus) && tn.quota.max_cpus >= 0, "a cpu quota is a finite number >= 0");
    FUZZ_CHECK(tn.quota.max_timeout_s >= 1 && tn.quota.max_timeout_s <= kMaxTimeoutQuota,
               "a timeout quota fits the clock (now + it cannot overflow)");
  }
  FUZZ_CHECK(t.authenticate("") == nullptr, "the empty key is nobody's");
}

void tenants(const std::string& text) {
  auto t = Tenants::parse(text, "fuzz-tenants.json");
  if (!t) {
    FUZZ_CHECK(t.error().what.starts_with("fuzz-tenants.json") && !t.error().why.empty(), "an error names the file and why");
    return;
  }
  check_tenants(*t);
  auto back = Tenants::parse(tenants_json(*t).dump(), "again.json");
  if (!back) std::fprintf(stderr, "refused again: %s\n", back.error().str().c_str());
  FUZZ_CHECK(back && same(*t, *back), "accepted tenants, written back, are the same");
}

nlohmann::json templates_json(const Templates& t) {
  nlohmann::json all = nlohmann::json::object();
  for (const auto& [name, tp] : t.all()) {
    nlohmann::json j = {{"layer", tp.layer}, {"allowDomains", tp.allow_domains}, {"memoryMB", tp.memory_mb}, {"cpus", tp.cpus}, {"pids", tp.pids}};
    if (!tp.rootfs.empty()) j["rootfs"] = tp.rootfs;
    if (!tp.policy.empty()) j["policy"] = tp.policy;
    all[name] = j;
  }
  return {{"templates", all}};
}

void templates(const std::string& text) {
  auto t = Templates::parse(text, "fuzz-templates.json");
  if (!t) {
    FUZZ_CHECK(t.error().what.starts_with("fuzz-templates.json") && !t.error().why.empty(), "an error names the file and why");
    return;
  }
  FUZZ_CHECK(t->find("base") != nullptr, "there is always a base template");
  for (const auto& [name, tp] : t->all()) {
    FUZZ_CHECK(name == tp.name && is_name(name), "a template is found by its name");
    FUZZ_CHECK(tp.layer == "process" || tp.layer == "container" || tp.layer == "gvisor", "a template's layer is one there is");
    FUZZ_CHECK(tp.rootfs.empty() || (tp.rootfs[0] == '/' && tp.layer != "process"), "a rootfs is absolute, for a container or gvisor");
    FUZZ_CHECK(tp.policy.empty() || tp.policy[0] == '/', "a policy file is absolute");
    FUZZ_CHECK(tp.memory_mb >= 16 && tp.memory_mb <= 1024 * 1024, "memory is 16 MiB..1 TiB");
    FUZZ_CHECK(tp.cpus >= 0.01 && tp.cpus <= 1024, "cpus are 0.01..1024");
    FUZZ_CHECK(tp.pids >= 8 && tp.pids <= 1000000, "pids are 8..1000000");
    for (const auto& d : tp.allow_domains) FUZZ_CHECK(!d.empty(), "a domain is named");
  }
  auto back = Templates::parse(templates_json(*t).dump(), "again.json");
  if (!back) std::fprintf(stderr, "refused again: %s\n", back.error().str().c_str());
  FUZZ_CHECK(back.has_value() && back->all().size() == t->all().size(), "accepted templates, written back, are accepted");
  for (const auto& [name, tp] : t->all()) {
    const Template* b = back->find(name);
    FUZZ_CHECK(b && b->layer == tp.layer && b->rootfs == tp.rootfs && b->policy == tp.policy && b->allow_domains == tp.allow_domains &&
                   b->memory_mb == tp.memory_mb && b->cpus == tp.cpus && b->pids == tp.pids,
               "accepted templates, written back, are the same");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) templates(text);
  else tenants(text);
  return 0;
}
