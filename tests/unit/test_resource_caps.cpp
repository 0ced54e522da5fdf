// runtime/resource_caps: a handler's caps on linux.resources, at create and at
// update (issue 46: containerd re-sends the pod spec's figures with every
// update, so an over-asking pod is held to the cap, not refused).
#include "runtime/resource_caps.hpp"

#include <gtest/gtest.h>

namespace exg {
namespace {

using nlohmann::json;

runtime::ResourceCaps handler_caps() {
  runtime::ResourceCaps c;
  c.pids = 50;
  c.memory_bytes = 256 << 20;
  c.cpus = 1;
  return c;
}

TEST(ResourceCaps, CreateFillsAndLowers) {
  json r = {{"memory", {{"limit", 1 << 30}}}, {"pids", {{"limit", 10}}}};
  json changes = runtime::cap_resources(r, handler_caps(), runtime::CapMode::Create);
  EXPECT_EQ(r["memory"]["limit"], 256 << 20);
  EXPECT_EQ(r["pids"]["limit"], 10);  // below the cap: as asked
  EXPECT_EQ(r["cpu"], (json{{"period", 100000}, {"quota", 100000}}));
  // Only what was asked above a cap is recorded (the CPU quota none asked of is filled in).
  EXPECT_EQ(changes, (json{{{"field", "memory.limit"}, {"asked", 1 << 30}, {"applied", 256 << 20}}}));
}

// containerd's update of a container whose pod spec asked 1 GiB and 4 CPUs:
// the original figures again, with a memory change below the cap.
TEST(ResourceCaps, UpdateCapsWhatItNamesOnly) {
  json r = {{"memory", {{"limit", 128 << 20}}}, {"cpu", {{"shares", 2}, {"period", 100000}, {"quota", 400000}}}};
  json changes = runtime::cap_resources(r, handler_caps(), runtime::CapMode::Update);
  EXPECT_EQ(r, (json{{"memory", {{"limit", 128 << 20}}}, {"cpu", {{"shares", 2}, {"period", 100000}, {"quota", 100000}}}}));
  EXPECT_EQ(changes.size(), 1u);
  EXPECT_FALSE(r.contains("pids"));  // not named: unchanged, not set
  // Unlimited asked (runc's -1, kubelet's 0), and a period with no quota
  // (containerd's for a pod with no CPU limit): the cap.
  json u = {{"pids", {{"limit", -1}}}, {"memory", {{"limit", 0}}}, {"cpu", {{"period", 50000}}}};
  EXPECT_EQ(runtime::cap_resources(u, handler_caps(), runtime::CapMode::Update),
            (json{{{"field", "pids.limit"}, {"asked", -1}, {"applied", 50}}}));
  EXPECT_EQ(u, (json{{"pids", {{"limit", 50}}}, {"memory", {{"limit", 256 << 20}}}, {"cpu", {{"period", 50000}, {"quota", 50000}}}}));
}

// containerd's memory.swap (its memory limit, so that the pod does not swap)
// held with the memory: memory and swap together never above the cap.
TEST(ResourceCaps, SwapHeldWithTheMemory) {
  json r = {{"memory", {{"limit", 1 << 30}, {"swap", 1 << 30}}}};
  json changes = runtime::cap_resources(r, handler_caps(), runtime::CapMode::Update);
  EXPECT_EQ(r["memory"], (json{{"limit", 256 << 20}, {"swap", 256 << 20}}));
  EXPECT_EQ(changes.size(), 2u);
  json unlimited = {{"memory", {{"limit", 64 << 20}, {"swap", -1}}}};
  runtime::cap_resources(unlimited, handler_caps(), runtime::CapMode::Create);
  EXPECT_EQ(unlimited["memory"], (json{{"limit", 64 << 20}, {"swap", 256 << 20}}));
  json within = {{"memory", {{"limit", 64 << 20}, {"swap", 128 << 20}}}};
  runtime::cap_resources(within, handler_caps(), runtime::CapMode::Create);
  EXPECT_EQ(within["memory"]["swap"], 128 << 20);
}

// cgroup v2's unified keys would be written over the capped figures.
TEST(ResourceCaps, UnifiedKeysOfCappedControllersRemoved) {
  json r = {{"unified", {{"memory.max", "max"}, {"pids.max", "max"}, {"cpu.max", "max 100000"}, {"io.weight", "50"}}}};
  json changes = runtime::cap_resources(r, handler_caps(), runtime::CapMode::Update);
  EXPECT_EQ(r["unified"], (json{{"io.weight", "50"}}));
  EXPECT_EQ(changes.size(), 3u);
  json none = {{"unified", {{"memory.max", "max"}}}};
  runtime::cap_resources(none, runtime::ResourceCaps{}, runtime::CapMode::Update);  // no caps: untouched
  EXPECT_EQ(none["unified"], (json{{"memory.max", "max"}}));
}

}  // namespace
}  // namespace exg
