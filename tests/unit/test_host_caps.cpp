// probe_host() measures this host; doctor and recommend render it.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "policy/policy.hpp"
#include "sandbox/advice.hpp"
#include "sandbox/host_caps.hpp"

using exg::sandbox::Capability;

namespace {

// Probing forks a dozen children: do it once for the whole suite.
const std::vector<Capability>& caps() {
  static const std::vector<Capability> c = exg::sandbox::probe_host();
  return c;
}

}  // namespace

TEST(HostCaps, ReturnsTheExpectedNamesEachWithAReason) {
  const std::vector<std::string> expected = {
      "user namespaces", "mount namespaces", "pid namespaces", "network namespaces", "ipc namespaces",
      "uts namespaces", "cgroup namespaces", "seccomp filters", "seccomp user notification", "landlock",
      "landlock filesystem", "landlock truncate", "landlock network", "landlock ioctl on devices",
      "landlock scoping", "landlock audit", "idmapped mounts", "overlayfs in a user namespace", "cgroups",
      "cgroup memory", "cgroup pids", "cgroup cpu", "crun", "runc", "runsc", "runtime cgroups",
      "container runtime", "gvisor runtime", "qemu-system-x86_64",
      "guest kernel", "/dev/kvm", "nftables"};
  std::vector<std::string> names;
  for (const auto& c : caps()) {
    names.push_back(c.name);
    EXPECT_FALSE(c.detail.empty()) << c.name;
    EXPECT_EQ(c.detail.find('\n'), std::string::npos) << c.name << ": " << c.detail;
  }
  EXPECT_EQ(names, expected);
}

TEST(HostCaps, UserNamespacesWorkHere) {
  const Capability* c = exg::sandbox::find_capability(caps(), "user namespaces");
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->ok) << c->detail;
  for (const char* n : {"mount namespaces", "pid namespaces", "network namespaces", "seccomp filters"}) {
    const Capability* d = exg::sandbox::find_capability(caps(), n);
    ASSERT_NE(d, nullptr) << n;
    EXPECT_TRUE(d->ok) << n << ": " << d->detail;
  }
}

TEST(HostCaps, DoctorJsonHasHostUserCapabilitiesAndLayers) {
  std::ostringstream out;
  EXPECT_EQ(exg::sandbox::write_doctor(out, caps(), true), 0);
  auto doc = nlohmann::json::parse(out.str());
  EXPECT_TRUE(doc["host"].contains("kernel"));
  EXPECT_TRUE(doc["user"].contains("uid"));
  EXPECT_EQ(doc["capabilities"].size(), caps().size());
  for (const char* l : {"process", "container", "gvisor", "microvm"}) EXPECT_TRUE(doc["layers"].contains(l)) << l;
  EXPECT_TRUE(doc["layers"]["process"]["available"].get<bool>()) << doc["layers"]["process"].dump();

  std::ostringstream text;
  EXPECT_EQ(exg::sandbox::write_doctor(text, caps(), false), 0);
  EXPECT_NE(text.str().find("  ok      user namespaces"), std::string::npos) << text.str();
}

TEST(Recommend, EachSituationAnswersWithALayerAndAValidPolicy) {
  const std::pair<const char*, const char*> cases[] = {
      {"laptop", "process"}, {"ci", "container"}, {"multi-tenant", "microvm"}, {"privileged-tools", "microvm"}};
  for (auto [situation, layer] : cases) {
    std::ostringstream out, err;
    EXPECT_EQ(exg::sandbox::write_recommendation(out, err, situation, false, &caps()), 0) << situation;
    EXPECT_NE(out.str().find(std::string("layer: ") + layer), std::string::npos) << out.str();
    EXPECT_NE(out.str().find("this host: "), std::string::npos) << out.str();
    EXPECT_TRUE(err.str().empty()) << err.str();

    std::ostringstream js, jerr;
    EXPECT_EQ(exg::sandbox::write_recommendation(js, jerr, situation, true, &caps()), 0) << situation;
    auto doc = nlohmann::json::parse(js.str());
    EXPECT_EQ(doc["layer"], layer);
    EXPECT_GE(doc["why"].size(), 2u);
    EXPECT_LE(doc["why"].size(), 4u);
    EXPECT_TRUE(doc["host"].contains("can_provide"));
    // The starting policy is one our own loader accepts.
    auto parsed = exg::policy::parse_policy(doc["policy"].dump(), "<recommend>", "/tmp");
    EXPECT_TRUE(parsed.has_value()) << situation << ": " << parsed.error().message;
    if (parsed) {
      EXPECT_EQ(parsed->layer, layer);
    }
  }
  // Never a shared container for tenants.
  auto mt = exg::sandbox::recommendation_for("multi-tenant");
  ASSERT_TRUE(mt);
  EXPECT_EQ(std::count(mt->alternatives.begin(), mt->alternatives.end(), "container"), 0);
}

TEST(Recommend, TheLaptopProcessLayerIsAvailableHere) {
  std::ostringstream out, err;
  ASSERT_EQ(exg::sandbox::write_recommendation(out, err, "laptop", true, &caps()), 0);
  auto doc = nlohmann::json::parse(out.str());
  EXPECT_TRUE(doc["host"]["can_provide"].get<bool>()) << doc["host"].dump();
}

TEST(Recommend, UnknownSituationIsOneErrorLineAndStatus2) {
  std::ostringstream out, err;
  EXPECT_EQ(exg::sandbox::write_recommendation(out, err, "desktop", false, &caps()), 2);
  EXPECT_TRUE(out.str().empty());
  const std::string line = err.str();
  EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1) << line;
  EXPECT_TRUE(line.starts_with("exguardian: recommend: ")) << line;
  for (const auto& s : exg::sandbox::situations()) EXPECT_NE(line.find(s), std::string::npos) << line;
  // The unknown one is refused before any probing.
  std::ostringstream out2, err2;
  EXPECT_EQ(exg::sandbox::write_recommendation(out2, err2, "", true), 2);
}
