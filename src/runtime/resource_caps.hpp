// A handler's resource caps (policy `resources`: pids, memory, cpus) applied
// to an OCI linux.resources object, the same rule at `create` and at
// `update`: each limit the smaller of the engine's and the handler's (none,
// 0 or unlimited asked: the handler's). A pod asking more than its
// RuntimeClass allows is held to the cap, not refused: containerd re-sends
// the pod spec's original figures with every UpdateContainerResources, so a
// refusal would refuse every later resize of that pod (issue 46). What was
// lowered is returned, for the audit log.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>

#include "policy/policy.hpp"

namespace exg::runtime {

struct ResourceCaps {
  std::optional<int64_t> pids;
  std::optional<int64_t> memory_bytes;
  std::optional<double> cpus;
  bool any() const { return pids || memory_bytes || cpus; }
};

// A policy's `resources` as caps.
ResourceCaps caps_of(const policy::Policy& pol);

// The CFS period a handler's `cpus` is applied over when the engine names
// none (runc's and kubelet's default).
inline constexpr int64_t kCfsPeriodUs = 100000;

// The CFS quota (us per period) that holds a container to `cpus` CPUs; at
// least 1 ms, the kernel's floor.
int64_t cpu_quota_for(double cpus, int64_t period_us);

enum class CapMode {
  Create,  // a limit the engine names none of gets the handler's
  Update,  // only the limits named are changed (runc update): only those are capped
};

// Lowers `resources` (linux.resources) in place to `caps`; the memory cap
// holds memory.swap (memory and swap together) too, where one is named. cgroup v2's
// `unified` keys that would set a capped controller's limit directly
// (pids.max, memory.max, memory.swap.max, cpu.max) are removed: they would
// be written after, and over, the capped figures. Returns one object per
// figure asked above a cap: {"field": "memory.limit", "asked": N, "applied":
// M} (a unified key: "applied" null); a limit none was asked of is filled in
// without one.
nlohmann::json cap_resources(nlohmann::json& resources, const ResourceCaps& caps, CapMode mode);

}  // namespace exg::runtime
