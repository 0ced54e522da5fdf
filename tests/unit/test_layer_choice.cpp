// --layer auto's judgement (doctor/layer_choice.hpp), fed with hand-made
// capability lists so that every branch is taken whatever this host is: the
// strongest layer that runs, what the policy rules out, the minimum, the lines
// said on stderr / in the audit log / by doctor and recommend.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/make_layer.hpp"
#include "doctor/advice.hpp"
#include "doctor/host_caps.hpp"
#include "doctor/layer_choice.hpp"
#include "layer/layer.hpp"

using exg::layer::Kind;
using exg::doctor::Capability;
using exg::doctor::LayerNeeds;

namespace {

std::vector<Capability> all_ok() {
  std::vector<Capability> caps;
  for (const char* n : {"user namespaces", "mount namespaces", "pid namespaces", "network namespaces", "seccomp filters",
                        "landlock", "crun", "runc", "runsc", "container runtime", "gvisor runtime",
                        "qemu-system-x86_64", "guest kernel", "supplementary groups"})
    caps.push_back(Capability{n, true, "works"});
  for (auto& c : caps) {
    if (c.name == "crun") c.detail = "/usr/bin/crun: crun version 1.8.1; commit: 1";
    if (c.name == "runsc") c.detail = "/usr/bin/runsc: runsc version release-20221212.0; spec: 1.0.2";
    if (c.name == "qemu-system-x86_64") c.detail = "/usr/bin/qemu-system-x86_64: QEMU emulator version 7.2.0; Debian";
    if (c.name == "landlock") c.detail = "ABI 7: the best this kernel offers";
  }
  return caps;
}

std::vector<Capability> without(std::vector<Capability> caps, std::vector<std::string> names,
                                const std::string& detail = "not in PATH") {
  for (auto& c : caps)
    for (const auto& n : names)
      if (c.name == n) c.ok = false, c.detail = detail;
  return caps;
}

exg::doctor::AutoChoice choose(const std::vector<Capability>& caps, LayerNeeds needs = {},
                                std::optional<Kind> min = std::nullopt) {
  return exg::doctor::choose_auto(exg::doctor::judge_layers(caps, needs), min);
}

}  // namespace

TEST(LayerStrength, MicrovmGvisorContainerProcess) {
  EXPECT_EQ(exg::layer::strongest_first(), (std::vector<Kind>{Kind::Microvm, Kind::Gvisor, Kind::Container, Kind::Process, Kind::Landlock}));
  EXPECT_TRUE(exg::layer::at_least(Kind::Gvisor, Kind::Container));
  EXPECT_TRUE(exg::layer::at_least(Kind::Container, Kind::Container));
  EXPECT_FALSE(exg::layer::at_least(Kind::Process, Kind::Container));
  // Every layer the table knows is ranked.
  for (Kind k : exg::layer::all_kinds())
    EXPECT_NE(std::find(exg::layer::strongest_first().begin(), exg::layer::strongest_first().end(), k),
              exg::layer::strongest_first().end());
}

TEST(LayerAuto, WithoutNamespacesTheLandlockLayerIsLeftAndSaysSo) {
  auto caps = all_ok();
  caps.push_back(Capability{"landlock network", true, "ABI 7: TCP"});
  caps.push_back(Capability{"landlock scoping", true, "ABI 7: scoping"});
  caps = without(caps, {"user namespaces"}, "ENOSPC");
  auto c = choose(caps);
  ASSERT_TRUE(c.chosen);
  EXPECT_EQ(*c.chosen, Kind::Landlock);
  EXPECT_TRUE(c.line().starts_with("layer auto: chose landlock (Landlock ABI 7 and seccomp, no namespaces")) << c.line();
  EXPECT_NE(c.line().find("; not process: missing: user namespaces"), std::string::npos) << c.line();
  LayerNeeds root_ws;
  root_ws.root_owned_workspace_as_root = true;
  EXPECT_FALSE(choose(caps, root_ws).chosen) << "root with a root-owned workspace: nothing left";
  EXPECT_FALSE(choose(without(caps, {"landlock scoping"}, "needs ABI 6, have 5")).chosen) << "ABI 5: no landlock layer";
}

TEST(LayerAuto, EverythingHereTakesTheMicrovmAndSaysWithWhat) {
  auto c = choose(all_ok());
  ASSERT_TRUE(c.chosen);
  EXPECT_EQ(*c.chosen, Kind::Microvm);
  EXPECT_TRUE(c.line().starts_with("layer auto: chose microvm (QEMU emulator version 7.2.0, the guest built by make; "))
      << c.line();
  EXPECT_TRUE(c.refusal().empty());
}

TEST(LayerAuto, EachMissingPieceStepsDownOneLayerAndTheLineSaysWhyNotTheStrongerOnes) {
  auto c = choose(without(all_ok(), {"qemu-system-x86_64"}));
  EXPECT_EQ(*c.chosen, Kind::Gvisor);
  EXPECT_EQ(c.line(), "layer auto: chose gvisor (runsc version release-20221212.0); not microvm: missing: "
                      "qemu-system-x86_64 (Debian: apt install qemu-system-x86)");
  c = choose(without(all_ok(), {"guest kernel", "runsc"}));
  EXPECT_EQ(*c.chosen, Kind::Container);
  EXPECT_NE(c.line().find("; not microvm: missing: the guest kernel"), std::string::npos) << c.line();
  EXPECT_NE(c.line().find("; not gvisor: runsc not in PATH"), std::string::npos) << c.line();
  c = choose(without(all_ok(), {"guest kernel", "runsc", "crun", "runc"}));
  EXPECT_EQ(*c.chosen, Kind::Process);
  EXPECT_NE(c.line().find("not container: neither crun nor runc"), std::string::npos) << c.line();
  // Rootless with runc only: the container runtime probe says no.
  c = choose(without(without(all_ok(), {"guest kernel", "runsc", "crun"}), {"container runtime"},
                     "rootless needs crun (runc maps only root into a rootless container)"));
  EXPECT_EQ(*c.chosen, Kind::Process);
  EXPECT_NE(c.line().find("not container: rootless needs crun"), std::string::npos) << c.line();
}

TEST(LayerAuto, WithoutUserNamespacesNoLayerRunsAndEachSaysWhy) {
  auto c = choose(without(all_ok(), {"user namespaces"}, "clone(CLONE_NEWUSER): ENOSPC"));
  EXPECT_FALSE(c.chosen);
  auto r = c.refusal();
  ASSERT_EQ(r.size(), 6u);
  EXPECT_EQ(r[0], "layer auto: refused: no layer can run here for this policy");
  EXPECT_TRUE(r[5].starts_with("layer auto: landlock cannot run: ")) << r[5];  // (all_ok(): no Landlock ABI 6 probes)
  EXPECT_EQ(r[1], "layer auto: microvm cannot run: qemu runs inside the process layer, which cannot run here "
                  "(missing: user namespaces)");
  EXPECT_EQ(r[2], "layer auto: gvisor cannot run: runsc's host runs in a user namespace, and this host refuses one");
  EXPECT_TRUE(r[3].starts_with("layer auto: container cannot run: ")) << r[3];
  EXPECT_NE(r[3].find("user namespace, and this host refuses one"), std::string::npos) << r[3];
  EXPECT_EQ(r[4], "layer auto: process cannot run: missing: user namespaces");
  // A user namespace without its capabilities (AppArmor's restriction): the process layer and the microVM go.
  c = choose(without(all_ok(), {"mount namespaces"}));
  EXPECT_EQ(*c.chosen, Kind::Gvisor);
}

TEST(LayerAuto, RootWhoseSupplementaryGroupsCannotBeDroppedRunsNothing) {
  auto c = choose(without(all_ok(), {"supplementary groups"}, "as root, a run drops its supplementary groups first, and "
                                                              "setgroups(0): EPERM"));
  EXPECT_FALSE(c.chosen);
  for (size_t i = 1; i < c.refusal().size(); ++i) {
    if (c.refusal()[i].find("landlock cannot run") != std::string::npos) continue;  // (not available in all_ok())
    EXPECT_NE(c.refusal()[i].find("setgroups(0): EPERM"), std::string::npos) << c.refusal()[i];
  }
}

TEST(LayerAuto, ThePolicyRulesOutWhatALayerCannotCarry) {
  LayerNeeds sockets;
  sockets.host_unix_sockets = true;
  auto c = choose(all_ok(), sockets);
  EXPECT_EQ(*c.chosen, Kind::Container);
  EXPECT_NE(c.line().find("not microvm: this policy lets a host Unix socket in (network.allowUnixSockets / "
                          "allowAllUnixSockets), which the guest's 9p view cannot carry"),
            std::string::npos)
      << c.line();
  EXPECT_NE(c.line().find("not gvisor: this policy lets a host Unix socket in"), std::string::npos) << c.line();
  LayerNeeds landlock;
  landlock.landlock_required = true;
  c = choose(without(all_ok(), {"qemu-system-x86_64", "runsc", "landlock"}, "not in this kernel"), landlock);
  EXPECT_FALSE(c.chosen);
  std::string all;
  for (const auto& l : c.refusal()) all += l + "\n";
  EXPECT_NE(all.find("process cannot run: this policy requires Landlock"), std::string::npos) << all;
}

// The judgement says what the layers themselves do: a layer that cannot carry
// a host socket is one whose launch refuses such a plan (supervise()).
TEST(LayerAuto, TheUnixSocketVerdictIsTheLayersOwn) {
  LayerNeeds sockets;
  sockets.host_unix_sockets = true;
  for (const auto& v : exg::doctor::judge_layers(all_ok(), sockets)) {
    auto l = exg::cli::make_layer(v.kind);
    if (!l) continue;  // (its runtime is not installed here)
    if (v.kind == Kind::Landlock) continue;  // (all_ok() has no Landlock ABI 6 probes: judged not to run)
    EXPECT_EQ(v.runs, (*l)->carries_host_unix_sockets()) << exg::layer::name(v.kind);
  }
}

TEST(LayerAuto, TheMinimumRefusesWhatRunsBelowItAndNamesWhyEachStrongerCannot) {
  auto caps = without(all_ok(), {"qemu-system-x86_64", "runsc", "crun", "runc"});
  auto c = choose(caps, {}, Kind::Container);
  EXPECT_FALSE(c.chosen);
  auto r = c.refusal();
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(r[0], "layer auto (at least container): refused: no layer at or above container can run here for this policy");
  EXPECT_TRUE(r[1].starts_with("layer auto: microvm cannot run: missing: qemu-system-x86_64")) << r[1];
  EXPECT_EQ(r[2], "layer auto: gvisor cannot run: runsc not in PATH (Debian: apt install runsc)");
  EXPECT_EQ(r[3], "layer auto: container cannot run: neither crun nor runc in PATH (Debian: apt install crun)");
  EXPECT_EQ(r[4], "layer auto: process would run, but is below the minimum container (--min-layer / \"minLayer\")");
  // At the minimum itself: chosen.
  c = choose(caps, {}, Kind::Process);
  EXPECT_EQ(*c.chosen, Kind::Process);
  EXPECT_TRUE(c.line().starts_with("layer auto (at least process): chose process (")) << c.line();
}

TEST(LayerAuto, TheAuditLineListsEveryLayerWithItsVerdict) {
  auto ev = choose(without(all_ok(), {"qemu-system-x86_64"}), {}, Kind::Container).audit_event();
  EXPECT_EQ(ev["event"], "layer_auto");
  EXPECT_EQ(ev["chosen"], "gvisor");
  EXPECT_EQ(ev["minimum"], "container");
  ASSERT_EQ(ev["layers"].size(), 5u);
  EXPECT_EQ(ev["layers"][0]["layer"], "microvm");
  EXPECT_FALSE(ev["layers"][0]["runs"].get<bool>());
  EXPECT_TRUE(ev["layers"][1]["runs"].get<bool>());
  EXPECT_TRUE(ev["line"].get<std::string>().starts_with("layer auto (at least container): chose gvisor"));
}

TEST(LayerAuto, DoctorAndRecommendSayTheSameChoice) {
  auto caps = without(all_ok(), {"qemu-system-x86_64"});
  const std::string line = choose(caps).line();
  std::ostringstream text, json;
  exg::doctor::write_doctor(text, caps, false);
  EXPECT_NE(text.str().find("  " + line + "\n"), std::string::npos) << text.str();
  exg::doctor::write_doctor(json, caps, true);
  auto doc = nlohmann::json::parse(json.str());
  EXPECT_EQ(doc["auto"]["chosen"], "gvisor");
  EXPECT_EQ(doc["auto"]["line"], line);
  std::ostringstream rec, err;
  EXPECT_EQ(exg::doctor::write_recommendation(rec, err, "ci", false, &caps), 0);
  EXPECT_NE(rec.str().find("this host, " + line + "\n"), std::string::npos) << rec.str();
  // recommend's own pick follows the same layer_status: without user namespaces no layer is provided.
  auto none = without(caps, {"user namespaces"});
  std::ostringstream rec2;
  EXPECT_EQ(exg::doctor::write_recommendation(rec2, err, "ci", true, &none), 0);
  auto d = nlohmann::json::parse(rec2.str());
  EXPECT_FALSE(d["host"]["can_provide"].get<bool>());
  EXPECT_TRUE(d["host"]["auto"].is_null());
}
