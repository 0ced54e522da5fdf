// runtime/spec_version: containerd 1.7.2x and 2.x claim runtime-spec 1.2.x, which Debian 12's
// crun 1.8.1 refuses ("unknown version specified"); a config using nothing of 1.2 is lowered to
// 1.1.0, one using a 1.2 addition keeps its claim.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "runtime/spec_version.hpp"

using nlohmann::json;
using exg::runtime::fit_spec_version_for_crun;
using exg::runtime::spec_1_2_feature;


TEST(RuntimeSpecVersion, ContainerdsOneTwoLoweredWhenNothingOfItIsUsed) {
  for (const char* v : {"1.2.0", "1.2.1"}) {
    json c = json::parse(R"({"process": {"args": ["/pause"]}, "root": {"path": "rootfs"}, "linux": {}})");
    c["ociVersion"] = v;
    json before = c;
    EXPECT_TRUE(fit_spec_version_for_crun(c)) << v;
    EXPECT_EQ(c["ociVersion"], "1.1.0");
    c["ociVersion"] = v;
    EXPECT_EQ(c, before) << "nothing else changed";
  }
}

TEST(RuntimeSpecVersion, OlderAndOtherVersionsLeftAlone) {
  for (const char* v : {"1.0.2", "1.1.0", "1.0.2-dev", "2.0.0", "1.20.0"}) {
    json c = {{"ociVersion", v}, {"process", {{"args", {"/bin/true"}}}}};
    EXPECT_FALSE(fit_spec_version_for_crun(c)) << v;
    EXPECT_EQ(c["ociVersion"], v);
  }
  json none = {{"process", json::object()}};
  EXPECT_FALSE(fit_spec_version_for_crun(none));
  EXPECT_FALSE(none.contains("ociVersion"));
}

TEST(RuntimeSpecVersion, AConfigUsingOneTwoKeepsItsClaim) {
  const std::pair<const char*, const char*> uses[] = {
      {R"({"process": {"ioPriority": {"class": "IOPRIO_CLASS_IDLE"}}})", "process.ioPriority"},
      {R"({"process": {"scheduler": {"policy": "SCHED_IDLE"}}})", "process.scheduler"},
      {R"({"linux": {"personality": {"domain": "LINUX32"}}})", "linux.personality"},
      {R"({"linux": {"netDevices": {"eth1": {}}}})", "linux.netDevices"},
      {R"({"mounts": [{"destination": "/data", "options": ["rbind", "idmap"]}]})", "mounts[].options idmap"},
  };
  for (const auto& [patch, name] : uses) {
    json c = json::parse(R"({"ociVersion": "1.2.1", "process": {"args": ["/bin/true"]}, "linux": {}})");
    c.merge_patch(json::parse(patch));
    EXPECT_EQ(spec_1_2_feature(c), name);
    EXPECT_FALSE(fit_spec_version_for_crun(c)) << name;
    EXPECT_EQ(c["ociVersion"], "1.2.1");
  }
}
