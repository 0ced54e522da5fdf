// The refusal's reasoning over host facts this machine cannot be (Ubuntu's
// AppArmor restriction, a Docker container's seccomp filter, Debian's
// unprivileged_userns_clone): the facts are what read_userns_facts() reads on
// such hosts. The real refusal, on this kernel, is tests/integration/test_userns_refused.sh;
// here also the probe itself on this host (user namespaces work).
#include <gtest/gtest.h>

#include <cerrno>
#include <string>
#include <vector>

#include <sstream>

#include "doctor/advice.hpp"
#include "doctor/userns_diagnosis.hpp"

using namespace exg::doctor;

namespace {

std::string text(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

bool has_line(const std::vector<std::string>& lines, const std::string& start, const std::string& part = "") {
  for (const auto& l : lines)
    if (l.starts_with(start) && l.find(part) != std::string::npos) return true;
  return false;
}

UsernsFacts plain_host(uid_t uid) {
  UsernsFacts f;
  f.euid = uid;
  f.max_user_namespaces = "63704";
  f.uid_map = "0 0 4294967295";
  f.setgroups = "allow";
  f.container_runtime = "/usr/bin/crun";
  return f;
}

UsernsProbe failed(const std::string& step, int err) { return {false, step, err}; }

}  // namespace

TEST(UsernsDiagnosis, NothingToSayWhereTheProbeWorks) {
  EXPECT_TRUE(explain_userns_refusal(plain_host(1000), UsernsProbe{true, "", 0}, "").empty());
  EXPECT_TRUE(explain_userns_refusal(plain_host(0), UsernsProbe{true, "", 0}, "setgroups").empty());
}

TEST(UsernsDiagnosis, UbuntuAppArmorRestrictionWithoutTheProfile) {
  auto f = plain_host(1000);
  f.apparmor_restrict = "1";
  f.apparmor_active = true;
  f.apparmor_label = "unconfined";
  auto lines = explain_userns_refusal(f, failed("unshare(CLONE_NEWNS) inside a new user namespace", EPERM), "create namespaces");
  EXPECT_TRUE(has_line(lines, "cause: unshare(CLONE_NEWNS) inside a new user namespace as uid 1000: EPERM")) << text(lines);
  EXPECT_TRUE(has_line(lines, "cause: kernel.apparmor_restrict_unprivileged_userns is 1", "no exguardian AppArmor profile is installed"))
      << text(lines);
  EXPECT_TRUE(has_line(lines, "way out: install the profile", "sudo apparmor_parser -r /etc/apparmor.d/exguardian")) << text(lines);
  EXPECT_TRUE(has_line(lines, "layers that would run here: none, as uid 1000")) << text(lines);
  // Installed, not loaded: the one command that fixes it.
  f.apparmor_profile_installed = true;
  lines = explain_userns_refusal(f, failed("unshare(CLONE_NEWNS) inside a new user namespace", EPERM), "");
  EXPECT_TRUE(has_line(lines, "cause: kernel.apparmor_restrict_unprivileged_userns is 1", "installed (/etc/apparmor.d/exguardian) but not loaded"))
      << text(lines);
  EXPECT_TRUE(has_line(lines, "way out: load the profile: sudo apparmor_parser -r /etc/apparmor.d/exguardian")) << text(lines);
  // Loaded, but this binary is elsewhere: the label says the profile did not attach.
  f.apparmor_profile_loaded = true;
  f.exe = "/home/me/src/build/exguardian";
  lines = explain_userns_refusal(f, failed("unshare(CLONE_NEWNS) inside a new user namespace", EPERM), "");
  EXPECT_TRUE(has_line(lines, "cause: kernel.apparmor_restrict_unprivileged_userns is 1", "/home/me/src/build/exguardian is not where it attaches"))
      << text(lines);
}

TEST(UsernsDiagnosis, DockerSeccompAsRoot) {
  auto f = plain_host(0);
  f.seccomp_mode = 2;
  f.container = "docker";
  f.container_evidence = "/.dockerenv";
  auto lines = explain_userns_refusal(f, failed("clone(CLONE_NEWUSER)", EPERM), "create namespaces");
  EXPECT_TRUE(has_line(lines, "cause: clone(CLONE_NEWUSER) as uid 0: EPERM")) << text(lines);
  EXPECT_TRUE(has_line(lines, "cause: this process runs under a seccomp filter", "as a container engine sets one")) << text(lines);
  EXPECT_TRUE(has_line(lines, "inside: a docker container (/.dockerenv)")) << text(lines);
  EXPECT_TRUE(has_line(lines, "way out: start the container with a seccomp profile", "docker run --security-opt seccomp=unconfined"))
      << text(lines);
  EXPECT_TRUE(has_line(lines, "way out: start the container", "podman run --security-opt seccomp=unconfined")) << text(lines);
  // As root too no layer runs: the container layer's writable paths are idmapped through a user namespace.
  EXPECT_TRUE(has_line(lines, "layers that would run here: none, as uid 0")) << text(lines);
  EXPECT_TRUE(has_line(lines, "layers that would not: ", "container (as root: its writable paths are idmapped mounts")) << text(lines);
  EXPECT_FALSE(has_line(lines, "way out: --layer container")) << text(lines);
}

TEST(UsernsDiagnosis, DebianSwitchAndMaxUserNamespaces) {
  auto f = plain_host(1000);
  f.unprivileged_userns_clone = "0";
  auto lines = explain_userns_refusal(f, failed("clone(CLONE_NEWUSER)", EPERM), "create namespaces");
  EXPECT_TRUE(has_line(lines, "cause: kernel.unprivileged_userns_clone is 0")) << text(lines);
  EXPECT_TRUE(has_line(lines, "way out: sudo sysctl -w kernel.unprivileged_userns_clone=1")) << text(lines);
  EXPECT_FALSE(has_line(lines, "cause: not one of")) << text(lines);

  f = plain_host(1000);
  f.max_user_namespaces = "0";
  lines = explain_userns_refusal(f, failed("clone(CLONE_NEWUSER)", ENOSPC), "create namespaces");
  EXPECT_TRUE(has_line(lines, "cause: user.max_user_namespaces is 0 (/proc/sys/user/max_user_namespaces)")) << text(lines);
  EXPECT_TRUE(has_line(lines, "way out: sudo sysctl -w user.max_user_namespaces=15000")) << text(lines);
  EXPECT_FALSE(has_line(lines, "inside:")) << text(lines);
}

TEST(UsernsDiagnosis, AnUnexplainedRefusalSaysSo) {
  auto lines = explain_userns_refusal(plain_host(1000), failed("clone(CLONE_NEWUSER)", EPERM), "create namespaces");
  EXPECT_TRUE(has_line(lines, "cause: not one of user.max_user_namespaces")) << text(lines);
  EXPECT_TRUE(has_line(lines, "the process layer cannot run here")) << text(lines);
}

TEST(UsernsDiagnosis, EveryLayerMakesAUserNamespace) {
  for (auto kind : {exg::layer::Kind::Process, exg::layer::Kind::Container, exg::layer::Kind::Gvisor, exg::layer::Kind::Microvm}) {
    EXPECT_TRUE(layer_needs_userns(kind, true));
    EXPECT_TRUE(layer_needs_userns(kind, false));
  }
}

// On this host user namespaces work (DESIGN.md section 9): the probe says so.
TEST(UsernsDiagnosis, TheProbeWorksHere) {
  auto p = try_user_namespace();
  EXPECT_TRUE(p.ok) << p.step << ": " << p.err;
  auto f = read_userns_facts("");
  EXPECT_FALSE(f.max_user_namespaces.empty());
  EXPECT_FALSE(f.uid_map.empty());
}

// doctor prints the refusal's lines under their own heading, and in --json as userns_refusal.
TEST(UsernsDiagnosis, DoctorShowsTheRefusal) {
  const std::vector<std::string> lines = {"cause: user.max_user_namespaces is 0", "way out: sysctl"};
  std::ostringstream text, json;
  write_doctor(text, {}, false, lines);
  EXPECT_NE(text.str().find("\nuser namespaces refused:\n  cause: user.max_user_namespaces is 0\n  way out: sysctl\n"),
            std::string::npos)
      << text.str();
  write_doctor(json, {}, true, lines);
  EXPECT_EQ(nlohmann::json::parse(json.str())["userns_refusal"], nlohmann::json(lines));
  std::ostringstream none;
  write_doctor(none, {}, false);
  EXPECT_EQ(none.str().find("user namespaces refused"), std::string::npos);
}

// Inside a Docker or Podman container with the engine's defaults: the user
// namespace is made, the setup's calls in it are refused (the real one is
// tests/integration/test_in_container.sh).
TEST(UsernsDiagnosis, AContainersSeccompProfileRefusesTheSetup) {
  auto f = plain_host(1000);
  f.seccomp_mode = 2;
  f.container = "docker";
  f.container_evidence = "/.dockerenv";
  auto lines = explain_userns_refusal(
      f, failed("sethostname in a new UTS namespace inside a new user namespace", EPERM), "setup: sethostname");
  EXPECT_TRUE(has_line(lines, "the process layer cannot run here", "refuses that setup")) << text(lines);
  EXPECT_TRUE(has_line(lines, "cause: sethostname in a new UTS namespace inside a new user namespace as uid 1000: EPERM"))
      << text(lines);
  EXPECT_TRUE(has_line(lines, "cause: this process runs under a seccomp filter", "only with CAP_SYS_ADMIN")) << text(lines);
  EXPECT_TRUE(has_line(lines, "way out: start the container with --security-opt seccomp=unconfined")) << text(lines);
  EXPECT_TRUE(has_line(lines, "inside: a docker container (/.dockerenv)")) << text(lines);
  EXPECT_FALSE(has_line(lines, "cause: not one of")) << text(lines);
  // Not a clone refusal: the clone way out is not given for it.
  EXPECT_FALSE(has_line(lines, "way out: start the container with a seccomp profile that allows clone")) << text(lines);
}

TEST(UsernsDiagnosis, AMaskedProcOrSysRefusesAFreshOne) {
  auto f = plain_host(0);
  f.container = "podman";
  f.container_evidence = "/run/.containerenv";
  for (const char* step : {"mount proc for a new pid namespace inside a new user namespace",
                           "mount sysfs (fsmount) inside a new user namespace"}) {
    auto lines = explain_userns_refusal(f, failed(step, EPERM), "setup: mount proc for /proc");
    EXPECT_TRUE(has_line(lines, "cause: a fresh ", "only where a whole one is visible")) << text(lines);
    EXPECT_TRUE(has_line(lines, "way out: start the container with /proc and /sys unmasked: podman run --security-opt "
                                "unmask=ALL, docker run --security-opt systempaths=unconfined"))
        << text(lines);
    EXPECT_FALSE(has_line(lines, "cause: this process runs under a seccomp filter")) << text(lines);
  }
}
