// The escape-test catalogue on the microVM layer: the syscall-filter probes
// and limit-pids run against the guest's own walls (its init installs the
// process layer's rules errno-only, its cgroup holds the pids limit) and are
// required; what does not apply is skipped with its reason; one probe proves
// another kernel; sandbox-status says what the guest applied.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>

#include "evidence/catalog.hpp"
#include "probe/probes.hpp"

namespace exg::evidence {
namespace {

TEST(EscapeCatalogMicrovm, RunsTheFilterProbesAgainstTheGuestAndProvesAnotherKernel) {
  Context c;
  c.layer = "microvm";
  c.tools = {{"curl", true}, {"python3", true}, {"bash", true}, {"git", true}, {"gcc", true}};
  auto v = build_catalog(c);
  const ProbeSpec* own = find_probe(v, "guest-own-kernel");
  ASSERT_NE(own, nullptr);
  EXPECT_TRUE(own->required);
  EXPECT_TRUE(own->skip_why.empty());
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string host_boot;
  std::getline(f, host_boot);
  Outcome same{0, false, "6.18.0\n" + host_boot + "\n", {}, ""};
  EXPECT_EQ(own->judge(same).verdict, Verdict::escaped);
  Outcome other{0, false, "6.1.0-57-amd64\n053a5b2b-07e3-4fed-87ca-f6cbe8a32748\n", {}, ""};
  EXPECT_EQ(own->judge(other).verdict, Verdict::held);

  int filter_run = 0, work_run = 0;
  for (const auto& n : probe::probe_names()) {
    const ProbeSpec* p = find_probe(v, "kernel-" + n);
    ASSERT_NE(p, nullptr) << n;
    EXPECT_TRUE(p->skip_why.empty()) << n;
    EXPECT_TRUE(p->required) << n;
    ++(probe::probe_expects_success(n) ? work_run : filter_run);
  }
  EXPECT_GT(filter_run, 0);
  EXPECT_GT(work_run, 0);
  // The guest's filter answers as the supervisor would, without an audit line.
  const ProbeSpec* keyctl = find_probe(v, "kernel-keyctl");
  ASSERT_NE(keyctl, nullptr);
  auto k = keyctl->judge(Outcome{0, false, "keyctl: as expected: refused: EPERM\n", {}, ""});
  EXPECT_EQ(k.verdict, Verdict::held) << k.evidence;
  EXPECT_NE(k.evidence.find("the guest's filter answers itself"), std::string::npos) << k.evidence;
  EXPECT_EQ(keyctl->judge(Outcome{1, false, "keyctl: NOT AS EXPECTED: allowed\n", {}, ""}).verdict, Verdict::escaped);

  const ProbeSpec* pids = find_probe(v, "limit-pids");
  ASSERT_NE(pids, nullptr);
  EXPECT_TRUE(pids->skip_why.empty());
  EXPECT_TRUE(pids->required);
  Outcome bomb{124, false, "exguardian: pids limit 64 reached in the guest: 812 forks refused\nexguardian: killed: timeout 5s\n", {}, ""};
  EXPECT_EQ(pids->judge(bomb).verdict, Verdict::held);
  const ProbeSpec* mem = find_probe(v, "limit-memory");
  ASSERT_NE(mem, nullptr);
  EXPECT_FALSE(mem->skip_why.empty());
  EXPECT_FALSE(mem->required);

  // sandbox-status: the filter in place, and the guest's own report (-v) in the evidence.
  const ProbeSpec* st = find_probe(v, "sandbox-status");
  ASSERT_NE(st, nullptr);
  EXPECT_NE(std::find(st->run_args.begin(), st->run_args.end(), "-v"), st->run_args.end());
  const std::string status = "CapEff:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\n";
  const std::string said = "exguardian: layer: microvm (qemu -M microvm, TCG)\n"
                           "exguardian: microvm: in the guest: landlock: ABI 2: filesystem writes\n"
                           "exguardian: microvm: in the guest: pids: limit 4096 (the guest's cgroup)\n"
                           "exguardian: microvm: in the guest: seccomp: ExGuardian's filter, errno-only\n";
  auto j = st->judge(Outcome{0, false, said + status, {}, ""});
  EXPECT_EQ(j.verdict, Verdict::held) << j.evidence;
  EXPECT_EQ(j.evidence.rfind("in the guest: seccomp filter (errno-only), Landlock ABI 2, pids limit 4096; CapEff: 0", 0), 0u)
      << j.evidence;
  EXPECT_NE(j.evidence.find("landlock: ABI 2: filesystem writes"), std::string::npos) << j.evidence;
  EXPECT_EQ(st->judge(Outcome{0, false, status, {}, ""}).verdict, Verdict::failed);  // no report from the guest
  EXPECT_EQ(st->judge(Outcome{0, false, said + "CapEff:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t0\n", {}, ""}).verdict,
            Verdict::escaped);
  const ProbeSpec* t = find_probe(v, "limit-timeout");
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->skip_why.empty());
  // No route out of a guest without a NIC: these run, proxy or not.
  for (const char* id : {"net-direct-tcp", "net-direct-metadata"}) {
    const ProbeSpec* p = find_probe(v, id);
    ASSERT_NE(p, nullptr) << id;
    EXPECT_TRUE(p->skip_why.empty()) << id;
  }
  // On the process layer nothing of this: no guest probe, filter probes run.
  c.layer = "process";
  auto pv = build_catalog(c);
  EXPECT_EQ(find_probe(pv, "guest-own-kernel"), nullptr);
  EXPECT_TRUE(find_probe(pv, "limit-pids")->skip_why.empty());
}

// As guest root (--microvm-root): in place means root of a kernel of its own; a kernel probe's
// call the guest's kernel allows, or fails only on the probe's arguments, is "not applicable",
// never held, and a refusal stays held; the probes only guest root can try are there, and fail
// rather than hold when they tried nothing.
TEST(EscapeCatalogMicrovm, GuestRootIsJudgedByTheHostNeverHeldForWhatTheGuestKernelAllows) {
  Context c;
  c.layer = "microvm";
  c.guest_root = true;
  c.canary = "EXG-CANARY-unit";
  c.home = "/nonexistent/exg-home";
  c.ws = "/nonexistent/exg-ws";
  c.tools = {{"curl", true}, {"python3", true}, {"bash", true}, {"git", true}, {"gcc", true}, {"podman", false}};
  auto v = build_catalog(c);
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string host_boot;
  std::getline(f, host_boot);

  const ProbeSpec* in_place = find_probe(v, "sandbox-in-place");
  ASSERT_NE(in_place, nullptr);
  const std::string root = "exguardian\n0\nCapEff:\t000001ffffffffff\n";
  EXPECT_EQ(in_place->judge(Outcome{0, false, root + "053a5b2b-07e3-4fed-87ca-f6cbe8a32748\n", {}, ""}).verdict, Verdict::held);
  EXPECT_EQ(in_place->judge(Outcome{0, false, root + host_boot + "\n", {}, ""}).verdict, Verdict::failed);
  EXPECT_EQ(in_place->judge(Outcome{0, false, "exguardian\n1000\nCapEff:\t0\n053a5b2b-07e3-4fed-87ca-f6cbe8a32748\n", {}, ""}).verdict,
            Verdict::failed);

  const ProbeSpec* mount = find_probe(v, "kernel-mount-tmpfs");
  ASSERT_NE(mount, nullptr);
  auto allowed = mount->judge(Outcome{1, false, "mount-tmpfs: NOT AS EXPECTED: allowed\n", {}, ""});
  EXPECT_EQ(allowed.verdict, Verdict::skipped) << allowed.evidence;
  EXPECT_EQ(allowed.evidence.rfind("not applicable: guest root (--microvm-root)", 0), 0u) << allowed.evidence;
  EXPECT_EQ(mount->judge(Outcome{0, false, "mount-tmpfs: as expected: refused: EPERM\n", {}, ""}).verdict, Verdict::held);
  // Taken by the guest's kernel and failed only on the probe's harmless arguments: refused by
  // nothing, so not applicable, never held; a refusal for want of permission stays held.
  const ProbeSpec* kexec = find_probe(v, "kernel-kexec-load");
  ASSERT_NE(kexec, nullptr);
  auto on_args = kexec->judge(Outcome{1, false, "kexec-load: NOT AS EXPECTED: failed: EINVAL\n", {}, ""});
  EXPECT_EQ(on_args.verdict, Verdict::skipped) << on_args.evidence;
  EXPECT_EQ(on_args.evidence.rfind("not applicable: guest root (--microvm-root)", 0), 0u) << on_args.evidence;
  EXPECT_EQ(kexec->judge(Outcome{1, false, "kexec-load: NOT AS EXPECTED: failed: EPERM\n", {}, ""}).verdict, Verdict::held);

  for (const char* id : {"guest-root-view-write", "guest-root-flush-walls", "guest-root-nested-container"})
    ASSERT_NE(find_probe(v, id), nullptr) << id;
  const ProbeSpec* flush = find_probe(v, "guest-root-flush-walls");
  EXPECT_TRUE(flush->needs_world);
  EXPECT_EQ(flush->judge(Outcome{0, false, "Error: Operation not permitted\nrules left: 12\n", {}, ""}).verdict, Verdict::failed);
  EXPECT_EQ(flush->judge(Outcome{0, false, "FLUSHED\nrules left: 0\ncurl: (7) Network is unreachable\n", {}, ""}).verdict,
            Verdict::held);
  EXPECT_EQ(flush->judge(Outcome{0, false, "FLUSHED\nrules left: 0\n", {}, "203.0.113.10 GET / host=203.0.113.10\n"}).verdict,
            Verdict::escaped);
  const ProbeSpec* view = find_probe(v, "guest-root-view-write");
  EXPECT_TRUE(view->destructive);
  EXPECT_EQ(view->judge(Outcome{0, false, "mount: permission denied\n", {}, ""}).verdict, Verdict::failed);
  const ProbeSpec* nested = find_probe(v, "guest-root-nested-container");
  EXPECT_FALSE(nested->skip_why.empty());  // (no podman here)
  EXPECT_FALSE(nested->required);
  // git names the workspace safe (it belongs to the host user) through the environment.
  const ProbeSpec* commit = find_probe(v, "work-git-commit");
  ASSERT_NE(commit, nullptr);
  EXPECT_EQ(commit->command.rfind("export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory", 0), 0u) << commit->command;

  // Without --microvm-root none of this.
  c.guest_root = false;
  auto u = build_catalog(c);
  EXPECT_EQ(find_probe(u, "guest-root-flush-walls"), nullptr);
  EXPECT_EQ(find_probe(u, "kernel-mount-tmpfs")->judge(Outcome{1, false, "mount-tmpfs: NOT AS EXPECTED: allowed\n", {}, ""}).verdict,
            Verdict::escaped);
}

}  // namespace
}  // namespace exg::evidence
