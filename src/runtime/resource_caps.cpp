#include "runtime/resource_caps.hpp"

#include <algorithm>
#include <string>

namespace exg::runtime {

namespace {

using nlohmann::json;

// obj[key] := min(obj[key], cap), where absent, 0 or negative (unlimited)
// count as above any cap. Recorded in `changes` under `field` when a figure
// was asked (a number, -1 for unlimited included) and lowered; none asked
// (absent, or kubelet's 0) is filled in without a record: every pod would
// have one.
void limit_min(json& obj, const char* key, int64_t cap, const std::string& field, json& changes) {
  const bool set = obj.contains(key) && obj[key].is_number_integer();
  const int64_t v = set ? obj[key].get<int64_t>() : 0;
  if (set && v > 0 && v <= cap) return;
  if (set && v != 0) changes.push_back({{"field", field}, {"asked", obj[key]}, {"applied", cap}});
  obj[key] = cap;
}

}  // namespace

ResourceCaps caps_of(const policy::Policy& pol) {
  ResourceCaps c;
  if (pol.resources.pids) c.pids = static_cast<int64_t>(*pol.resources.pids);
  if (pol.resources.memory_bytes) c.memory_bytes = static_cast<int64_t>(*pol.resources.memory_bytes);
  c.cpus = pol.resources.cpus;
  return c;
}

int64_t cpu_quota_for(double cpus, int64_t period_us) {
  // Rounded by hand: llround would make the binary need libm (lazy_stubs.py).
  return std::max<int64_t>(1000, static_cast<int64_t>(cpus * static_cast<double>(period_us) + 0.5));
}

json cap_resources(json& res, const ResourceCaps& caps, CapMode mode) {
  json changes = json::array();
  if (!res.is_object()) res = json::object();
  const bool create = mode == CapMode::Create;
  auto section = [&](const char* name) -> json* {
    if (!res.contains(name) || !res[name].is_object()) {
      if (!create) return nullptr;  // not named in an update: unchanged
      res[name] = json::object();
    }
    return &res[name];
  };
  if (caps.pids)
    if (json* p = section("pids"); p && (create || p->contains("limit")))
      limit_min(*p, "limit", *caps.pids, "pids.limit", changes);
  if (caps.memory_bytes) {
    if (json* m = section("memory"); m && (create || m->contains("limit")))
      limit_min(*m, "limit", *caps.memory_bytes, "memory.limit", changes);
    // memory.swap is memory and swap together (runtime-spec), and containerd
    // sets it to the pod spec's memory limit: left alone, a pod asking 1 GiB
    // held to 256M of memory could still use 768M of swap on a node with swap.
    if (res.contains("memory") && res["memory"].is_object() && res["memory"].contains("swap"))
      limit_min(res["memory"], "swap", *caps.memory_bytes, "memory.swap", changes);
  }
  if (caps.cpus)
    if (json* c = section("cpu"); c && (create || c->contains("quota") || c->contains("period"))) {
      // The quota over the engine's period (kubelet's 100 ms, or that when it
      // names none): containerd sends a period with no quota for a pod with
      // no CPU limit, which would otherwise leave it unlimited.
      const bool has_period = c->contains("period") && (*c)["period"].is_number_integer() && (*c)["period"].get<int64_t>() > 0;
      if (!has_period) (*c)["period"] = kCfsPeriodUs;
      limit_min(*c, "quota", cpu_quota_for(*caps.cpus, (*c)["period"].get<int64_t>()), "cpu.quota", changes);
    }
  if (res.contains("unified") && res["unified"].is_object()) {
    json& u = res["unified"];
    auto drop = [&](const char* key, bool capped) {
      if (!capped || !u.contains(key)) return;
      changes.push_back({{"field", std::string("unified.") + key}, {"asked", u[key]}, {"applied", nullptr}});
      u.erase(key);
    };
    drop("pids.max", caps.pids.has_value());
    drop("memory.max", caps.memory_bytes.has_value());
    drop("memory.swap.max", caps.memory_bytes.has_value());
    drop("cpu.max", caps.cpus.has_value());
  }
  return changes;
}

}  // namespace exg::runtime
