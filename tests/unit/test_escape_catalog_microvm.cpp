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

}  // namespace
}  // namespace exg::evidence
