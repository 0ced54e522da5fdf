// The few lines `exguardian run` ends with when it refused something (issue
// 40): counts, hosts with their rules, most first, lists cut short.
#include <gtest/gtest.h>

#include "sandbox/refusal_summary.hpp"

namespace exg {
namespace {

TEST(RefusalSummary, NothingRefusedNothingSaid) {
  EXPECT_TRUE(sandbox::refusal_summary({}).empty());
}

TEST(RefusalSummary, HostsWithRulesSyscallsPlanted) {
  sandbox::RunRefusals r;
  r.egress = 4;
  r.hosts = {{"a.test", 1}, {"b.test", 3}};
  r.host_rules = {{"a.test", "deniedDomains[0] a.test"}, {"b.test", "default deny (not on the allow list)"}};
  r.syscalls = {{"ptrace", 1}, {"unshare", 2}};
  r.planted = {".git/hooks/x"};
  auto lines = sandbox::refusal_summary(r);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], "refused in this run (each one: -v or --audit-log; no summary: --quiet):");
  EXPECT_EQ(lines[1], "  egress: 4 refusals: b.test x3 (default deny (not on the allow list)), a.test x1 "
                      "(deniedDomains[0] a.test)");
  EXPECT_EQ(lines[2], "  syscalls: 3 refused: unshare x2, ptrace x1");
  EXPECT_EQ(lines[3], "  planted files: 1 quarantined: .git/hooks/x");
}

TEST(RefusalSummary, LongListsAreCut) {
  sandbox::RunRefusals r;
  for (int i = 0; i < 8; ++i) r.planted.push_back("f" + std::to_string(i));
  r.setid = 2;
  auto lines = sandbox::refusal_summary(r);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1], "  planted files: 8 quarantined: f0, f1, f2, f3, f4, and 3 more");
  EXPECT_EQ(lines[2], "  set-id files: 2 (bits removed, or not checked: see above)");
}

}  // namespace
}  // namespace exg
