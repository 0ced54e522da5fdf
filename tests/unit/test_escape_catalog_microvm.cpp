// The escape-test catalogue on the microVM layer: what tests the host's
// syscall filter on the command, or needs the proxy while egress is not
// carried into the guest, is skipped with its reason and not required; the
// probes of ordinary work still run; one probe proves another kernel.
#include <gtest/gtest.h>

#include <fstream>

#include "evidence/catalog.hpp"
#include "sandbox/probes.hpp"

namespace exg::evidence {
namespace {

const ProbeSpec* find(const std::vector<ProbeSpec>& v, const std::string& id) {
  for (const auto& p : v)
    if (p.id == id) return &p;
  return nullptr;
}

TEST(EscapeCatalogMicrovm, SkipsWhatDoesNotApplyInAGuestAndProvesAnotherKernel) {
  Context c;
  c.layer = "microvm";
  c.tools = {{"curl", true}, {"python3", true}, {"bash", true}, {"git", true}, {"gcc", true}};
  auto v = build_catalog(c);
  const ProbeSpec* own = find(v, "guest-own-kernel");
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

  int filter_skipped = 0, work_run = 0;
  for (const auto& n : sandbox::probe_names()) {
    const ProbeSpec* p = find(v, "kernel-" + n);
    ASSERT_NE(p, nullptr) << n;
    if (sandbox::probe_expects_success(n)) {
      EXPECT_TRUE(p->skip_why.empty()) << n;  // ordinary work must still succeed in the guest
      ++work_run;
    } else {
      EXPECT_NE(p->skip_why.find("guest's own kernel"), std::string::npos) << n;
      EXPECT_FALSE(p->required) << n;
      ++filter_skipped;
    }
  }
  EXPECT_GT(filter_skipped, 0);
  EXPECT_GT(work_run, 0);
  for (const char* id : {"limit-pids", "limit-memory"}) {
    const ProbeSpec* p = find(v, id);
    ASSERT_NE(p, nullptr) << id;
    EXPECT_FALSE(p->skip_why.empty()) << id;
    EXPECT_FALSE(p->required) << id;
  }
  const ProbeSpec* t = find(v, "limit-timeout");
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->skip_why.empty());
  // No route out of a guest without a NIC: these run, proxy or not.
  for (const char* id : {"net-direct-tcp", "net-direct-metadata"}) {
    const ProbeSpec* p = find(v, id);
    ASSERT_NE(p, nullptr) << id;
    EXPECT_TRUE(p->skip_why.empty()) << id;
  }
  // On the process layer nothing of this: no guest probe, filter probes run.
  c.layer = "process";
  auto pv = build_catalog(c);
  EXPECT_EQ(find(pv, "guest-own-kernel"), nullptr);
  EXPECT_TRUE(find(pv, "limit-pids")->skip_why.empty());
}

}  // namespace
}  // namespace exg::evidence
