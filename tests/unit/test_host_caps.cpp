// doctor and recommend: what they decide from a list of capabilities (which
// layers a host can run, which layer a situation gets, what they print), fed
// with hand-made lists so that every branch is taken whatever this host is.
// probe_host() itself is held to its contract only: the names in their order,
// each with a one-line reason (what the host answers is not the code's to test).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli/host_setup.hpp"
#include "policy/policy.hpp"
#include "doctor/advice.hpp"
#include "doctor/host_caps.hpp"

using exg::doctor::Capability;
using exg::doctor::LayerStatus;

namespace {

const std::vector<std::string> kNames = {
    "user namespaces", "mount namespaces", "pid namespaces", "network namespaces", "ipc namespaces",
    "uts namespaces", "cgroup namespaces", "namespace setup", "seccomp filters", "seccomp user notification", "landlock",
    "landlock filesystem", "landlock truncate", "landlock network", "landlock ioctl on devices",
    "landlock scoping", "landlock audit", "idmapped mounts", "overlayfs in a user namespace", "cgroups",
    "cgroup memory", "cgroup pids", "cgroup cpu", "crun", "runc", "runsc", "runtime cgroups",
    "container runtime", "gvisor runtime", "qemu-system-x86_64",
    "guest kernel", "/dev/kvm", "kvm guest boot", "microvm templates", "nftables", "supplementary groups"};

// A host where everything works, with the details probe_host() writes.
std::vector<Capability> all_ok() {
  std::vector<Capability> caps;
  for (const auto& n : kNames) caps.push_back(Capability{n, true, "works"});
  auto set = [&](const char* n, const char* detail) {
    for (auto& c : caps)
      if (c.name == n) c.detail = detail;
  };
  set("landlock", "ABI 7: filesystem, network and scoping rules");
  set("crun", "/usr/bin/crun: crun version 1.8.1; commit: 1");
  set("runc", "/usr/sbin/runc: runc version 1.1.5; commit: v1.1.5");
  set("runsc", "/usr/bin/runsc: runsc version release-20221212.0; spec: 1.0.2");
  set("qemu-system-x86_64", "/usr/bin/qemu-system-x86_64: QEMU emulator version 7.2.0; Debian");
  return caps;
}

std::vector<Capability> without(std::vector<Capability> caps, std::vector<std::string> names,
                                const std::string& detail = "not in PATH") {
  for (auto& c : caps)
    if (std::find(names.begin(), names.end(), c.name) != names.end()) c.ok = false, c.detail = detail;
  return caps;
}

LayerStatus layer(const std::vector<Capability>& caps, const std::string& name) {
  for (const auto& l : exg::doctor::layer_status(caps))
    if (l.name == name) return l;
  ADD_FAILURE() << "no layer " << name;
  return {};
}

nlohmann::json recommend_json(const std::string& situation, const std::vector<Capability>& caps) {
  std::ostringstream out, err;
  EXPECT_EQ(exg::doctor::write_recommendation(out, err, situation, true, &caps), 0) << situation;
  EXPECT_TRUE(err.str().empty()) << err.str();
  return nlohmann::json::parse(out.str());
}

}  // namespace

TEST(HostCaps, ProbesReturnTheExpectedNamesEachWithAOneLineReason) {
  const std::vector<Capability> caps = exg::doctor::probe_host();
  std::vector<std::string> names;
  for (const auto& c : caps) {
    names.push_back(c.name);
    EXPECT_FALSE(c.detail.empty()) << c.name;
    EXPECT_EQ(c.detail.find('\n'), std::string::npos) << c.name << ": " << c.detail;
  }
  EXPECT_EQ(names, kNames);
  EXPECT_EQ(exg::doctor::find_capability(caps, "supplementary groups"), &caps.back());
  EXPECT_EQ(exg::doctor::find_capability(caps, "no such thing"), nullptr);
}

TEST(LayerStatus, EverythingPresentMakesEveryLayerAvailableAndSaysWithWhat) {
  auto caps = all_ok();
  auto p = layer(caps, "process");
  EXPECT_TRUE(p.available);
  EXPECT_EQ(p.why, "user, mount, pid and network namespaces and seccomp work; with Landlock ABI 7 and "
                   "cgroup memory/pids/cpu limits");
  auto c = layer(caps, "container");
  EXPECT_TRUE(c.available);
  EXPECT_EQ(c.why, "crun version 1.8.1 and runc version 1.1.5");
  auto g = layer(caps, "gvisor");
  EXPECT_TRUE(g.available);
  EXPECT_EQ(g.why, "runsc version release-20221212.0");
  auto m = layer(caps, "microvm");
  EXPECT_TRUE(m.available);
  EXPECT_EQ(m.why, "QEMU emulator version 7.2.0, the guest built by make; KVM (a guest boot under KVM proved it)");
}

TEST(LayerStatus, TheProcessLayerNeedsNamespacesAndSeccompAndNamesWhatIsMissing) {
  auto p = layer(without(all_ok(), {"user namespaces", "seccomp filters"}, "EPERM"), "process");
  EXPECT_FALSE(p.available);
  EXPECT_EQ(p.why, "missing: user namespaces and seccomp filters");
  // Landlock and cgroups are extras: without them the layer still runs, and says less.
  auto q = layer(without(all_ok(), {"landlock", "cgroup memory", "cgroup cpu"}), "process");
  EXPECT_TRUE(q.available);
  EXPECT_EQ(q.why, "user, mount, pid and network namespaces and seccomp work; with cgroup pids limits");
  auto r = layer(without(all_ok(), {"landlock", "cgroup memory", "cgroup pids", "cgroup cpu"}), "process");
  EXPECT_EQ(r.why, "user, mount, pid and network namespaces and seccomp work");
}

TEST(LayerStatus, ContainerGvisorAndMicrovmNameTheirRuntimeOrWhatToInstall) {
  auto only_runc = layer(without(all_ok(), {"crun"}), "container");
  EXPECT_TRUE(only_runc.available);
  EXPECT_EQ(only_runc.why, "runc version 1.1.5");
  auto none = layer(without(all_ok(), {"crun", "runc"}), "container");
  EXPECT_FALSE(none.available);
  EXPECT_EQ(none.why, "neither crun nor runc in PATH (Debian: apt install crun)");

  auto no_runsc = layer(without(all_ok(), {"runsc"}), "gvisor");
  EXPECT_FALSE(no_runsc.available);
  EXPECT_EQ(no_runsc.why, "runsc not in PATH (Debian: apt install runsc)");
  auto broken = layer(without(all_ok(), {"runsc"}, "/usr/bin/runsc: exit status 1"), "gvisor");
  EXPECT_FALSE(broken.available);
  EXPECT_EQ(broken.why, "runsc does not answer: /usr/bin/runsc: exit status 1");

  auto tcg = layer(without(all_ok(), {"/dev/kvm", "kvm guest boot"}), "microvm");
  EXPECT_TRUE(tcg.available);
  EXPECT_EQ(tcg.why, "QEMU emulator version 7.2.0, the guest built by make; TCG (software emulation): no usable /dev/kvm");
  // The device node alone is not KVM (a nested PVM host): only a guest boot under it is.
  auto pvm = layer(without(all_ok(), {"kvm guest boot"}), "microvm");
  EXPECT_TRUE(pvm.available);
  EXPECT_EQ(pvm.why, "QEMU emulator version 7.2.0, the guest built by make; TCG (software emulation): a guest does not boot "
                     "under this host's KVM");
  auto no_vm = layer(without(all_ok(), {"qemu-system-x86_64", "guest kernel"}), "microvm");
  EXPECT_FALSE(no_vm.available);
  EXPECT_EQ(no_vm.why, "missing: qemu-system-x86_64 (Debian: apt install qemu-system-x86) and the guest kernel and initramfs (built by "
                       "`make`)");
  // A capability the list does not hold counts as missing.
  auto empty = exg::doctor::layer_status({});
  ASSERT_EQ(empty.size(), 5u);  // process, container, gvisor, microvm, landlock
  for (const auto& l : empty) EXPECT_FALSE(l.available) << l.name;
}

TEST(Doctor, JsonAndTextShowTheCapabilitiesAndTheLayersDecidedFromThem) {
  auto caps = without(all_ok(), {"runsc"});
  std::ostringstream out;
  EXPECT_EQ(exg::doctor::write_doctor(out, caps, true), 0);
  auto doc = nlohmann::json::parse(out.str());
  EXPECT_TRUE(doc["host"].contains("kernel"));
  EXPECT_TRUE(doc["user"].contains("uid"));
  ASSERT_EQ(doc["capabilities"].size(), caps.size());
  nlohmann::json runsc;
  for (const auto& c : doc["capabilities"])
    if (c["name"] == "runsc") runsc = c;
  EXPECT_EQ(runsc, (nlohmann::json{{"name", "runsc"}, {"ok", false}, {"detail", "not in PATH"}}));
  for (const auto& l : exg::doctor::layer_status(caps)) {
    EXPECT_EQ(doc["layers"][l.name]["available"], l.available) << l.name;
    EXPECT_EQ(doc["layers"][l.name]["why"], l.why) << l.name;
  }
  EXPECT_FALSE(doc["layers"]["gvisor"]["available"].get<bool>());

  std::ostringstream text;
  EXPECT_EQ(exg::doctor::write_doctor(text, caps, false), 0);
  const std::string t = text.str();
  EXPECT_NE(t.find("  ok      user namespaces"), std::string::npos) << t;
  EXPECT_NE(t.find("  MISSING runsc "), std::string::npos) << t;
  EXPECT_NE(t.find("(not in PATH)"), std::string::npos) << t;
  EXPECT_NE(t.find("  gvisor     MISSING    runsc not in PATH"), std::string::npos) << t;
  EXPECT_NE(t.find("  process    available  "), std::string::npos) << t;
}

TEST(Recommend, EachSituationAnswersWithALayerAndAValidPolicy) {
  const std::pair<const char*, const char*> cases[] = {
      {"laptop", "process"}, {"ci", "container"}, {"multi-tenant", "microvm"}, {"privileged-tools", "microvm"}};
  auto caps = all_ok();
  for (auto [situation, layer_name] : cases) {
    std::ostringstream out, err;
    EXPECT_EQ(exg::doctor::write_recommendation(out, err, situation, false, &caps), 0) << situation;
    EXPECT_NE(out.str().find(std::string("layer: ") + layer_name), std::string::npos) << out.str();
    EXPECT_NE(out.str().find(std::string("this host: yes: the ") + layer_name + " layer ("), std::string::npos)
        << out.str();
    EXPECT_TRUE(err.str().empty()) << err.str();

    auto doc = recommend_json(situation, caps);
    EXPECT_EQ(doc["layer"], layer_name);
    EXPECT_GE(doc["why"].size(), 2u);
    EXPECT_LE(doc["why"].size(), 4u);
    EXPECT_EQ(doc["host"]["can_provide"], true);
    EXPECT_EQ(doc["host"]["layer"], layer_name);
    // The starting policy is one our own loader accepts.
    auto parsed = exg::policy::parse_policy(doc["policy"].dump(), "<recommend>", "/tmp");
    EXPECT_TRUE(parsed.has_value()) << situation << ": " << parsed.error().message;
    if (parsed) {
      EXPECT_EQ(parsed->layer, layer_name);
    }
  }
  // Never a shared container for tenants.
  auto mt = exg::doctor::recommendation_for("multi-tenant");
  ASSERT_TRUE(mt);
  EXPECT_EQ(std::count(mt->alternatives.begin(), mt->alternatives.end(), "container"), 0);
}

TEST(Recommend, TheHostAnswerIsTheFirstAvailableOfTheLayerAndItsAlternatives) {
  // No microVM here: multi-tenant falls back to gVisor, never to a container.
  auto no_vm = without(all_ok(), {"qemu-system-x86_64"});
  auto mt = recommend_json("multi-tenant", no_vm);
  EXPECT_EQ(mt["layer"], "microvm");
  EXPECT_EQ(mt["host"]["can_provide"], true);
  EXPECT_EQ(mt["host"]["layer"], "gvisor");
  // Neither: no, with each candidate's reason.
  auto neither = without(no_vm, {"runsc"});
  auto none = recommend_json("multi-tenant", neither);
  EXPECT_EQ(none["host"]["can_provide"], false);
  EXPECT_TRUE(none["host"]["layer"].is_null());
  EXPECT_EQ(none["host"]["detail"],
            "no: microvm: missing: qemu-system-x86_64 (Debian: apt install qemu-system-x86); "
            "gvisor: runsc not in PATH (Debian: apt install runsc)");
  // privileged-tools: a command to try, as printed (test_egress_sandbox_microvm_privileged runs it).
  std::ostringstream out, err;
  auto caps = all_ok();
  EXPECT_EQ(exg::doctor::write_recommendation(out, err, "privileged-tools", false, &caps), 0);
  EXPECT_NE(out.str().find("try it (as printed, in your project's directory):\n  exguardian run --layer microvm "
                           "--microvm-root -- podman run"),
            std::string::npos)
      << out.str();
  EXPECT_EQ(recommend_json("privileged-tools", caps)["command"],
            "exguardian run --layer microvm --microvm-root -- podman run --rm --rootfs /:O echo hello from a nested "
            "container");
  EXPECT_FALSE(recommend_json("laptop", caps).contains("command"));
  // privileged-tools has no alternative to a microVM.
  EXPECT_EQ(recommend_json("privileged-tools", no_vm)["host"]["can_provide"], false);
  // ci: a container, else gVisor.
  EXPECT_EQ(recommend_json("ci", without(all_ok(), {"crun", "runc"}))["host"]["layer"], "gvisor");
  // laptop: the process layer or nothing.
  auto no_userns = without(all_ok(), {"user namespaces"}, "EPERM");
  auto laptop = recommend_json("laptop", no_userns);
  EXPECT_EQ(laptop["host"]["can_provide"], false);
  EXPECT_EQ(laptop["host"]["detail"], "no: process: missing: user namespaces");
}

// `recommend` without --situation: the choices, each with its layer, not a usage error.
TEST(Recommend, WithoutASituationListsEachWithItsLayer) {
  std::ostringstream out;
  EXPECT_EQ(exg::doctor::write_situations(out, false), 0);
  const std::string text = out.str();
  EXPECT_NE(text.find("--situation NAME"), std::string::npos) << text;
  for (const auto& s : exg::doctor::situations()) {
    auto rec = exg::doctor::recommendation_for(s);
    ASSERT_TRUE(rec) << s;
    EXPECT_NE(text.find("  " + s + " "), std::string::npos) << s << " missing in:\n" << text;
    EXPECT_NE(text.find(rec->layer + ": " + rec->summary), std::string::npos) << s << " in:\n" << text;
  }
  std::ostringstream js;
  EXPECT_EQ(exg::doctor::write_situations(js, true), 0);
  auto doc = nlohmann::json::parse(js.str());
  ASSERT_TRUE(doc.is_array());
  ASSERT_EQ(doc.size(), exg::doctor::situations().size());
  for (size_t i = 0; i < doc.size(); ++i) {
    EXPECT_EQ(doc[i]["situation"], exg::doctor::situations()[i]);
    EXPECT_EQ(doc[i]["layer"], exg::doctor::recommendation_for(exg::doctor::situations()[i])->layer);
  }
}

TEST(Recommend, UnknownSituationIsOneErrorLineAndStatus2) {
  auto caps = all_ok();
  std::ostringstream out, err;
  EXPECT_EQ(exg::doctor::write_recommendation(out, err, "desktop", false, &caps), 2);
  EXPECT_TRUE(out.str().empty());
  const std::string line = err.str();
  EXPECT_EQ(std::count(line.begin(), line.end(), '\n'), 1) << line;
  EXPECT_TRUE(line.starts_with("exguardian: recommend: ")) << line;
  for (const auto& s : exg::doctor::situations()) EXPECT_NE(line.find(s), std::string::npos) << line;
  // The unknown one is refused before any probing.
  std::ostringstream out2, err2;
  EXPECT_EQ(exg::doctor::write_recommendation(out2, err2, "", true), 2);
}

// A SIGPIPE raised while the supervisor's signals are blocked (the stdio relay
// wrote to a reader that had gone) is spent: restoring the mask at the end must
// not kill the process with it (the run's status became 141).
TEST(HostProcessEnd, APendingSigpipeDoesNotKillTheProcess) {
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    {
      auto h = exg::cli::HostProcess::prepare(false);
      if (!h) ::_exit(3);
      ::raise(SIGPIPE);  // blocked: pending
      sigset_t pending;
      ::sigpending(&pending);
      if (!::sigismember(&pending, SIGPIPE)) ::_exit(4);
    }
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << (WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status)) : "exit " + std::to_string(WEXITSTATUS(status)));
}
