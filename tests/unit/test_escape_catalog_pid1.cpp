// The escape-test probe that signals pid 1 from inside (SIGKILL, SIGSTOP): its
// judge holds only when pid 1 was seen running afterwards and the sandbox ran
// on; a stopped, killed or missing pid 1 is an escape. The real signals are sent
// on every layer by test_escape_test and test_escape_layers.
#include <gtest/gtest.h>

#include "evidence/catalog.hpp"

namespace exg::evidence {
namespace {

TEST(EscapeCatalogPid1, SignalsToPid1HoldOnlyWhenItRunsOn) {
  for (const char* layer : {"process", "container", "gvisor", "microvm"}) {
    Context c;
    c.layer = layer;
    auto v = build_catalog(c);
    const ProbeSpec* p = find_probe(v, "proc-pid1-signals");
    ASSERT_NE(p, nullptr) << layer;
    EXPECT_TRUE(p->required) << layer;
    EXPECT_TRUE(p->skip_why.empty()) << layer;
    EXPECT_EQ(p->batch, "userland") << layer;
    auto held_case = p->judge(Outcome{0, false, "pid 1: S exguardian\nthe sandbox runs on\n", {}, ""});
    EXPECT_EQ(held_case.verdict, Verdict::held) << layer << ": " << held_case.evidence;
    EXPECT_EQ(p->judge(Outcome{0, false, "pid 1: R init\nthe sandbox runs on\n", {}, ""}).verdict, Verdict::held);
    // Stopped: the command would have waited for the supervisor's timeout.
    EXPECT_EQ(p->judge(Outcome{0, false, "pid 1: T exguardian\nthe sandbox runs on\n", {}, ""}).verdict,
              Verdict::escaped);
    // Killed: the kernel ends the sandbox with it (no output after the kill, 137).
    EXPECT_EQ(p->judge(Outcome{137, false, "", {}, ""}).verdict, Verdict::escaped);
    // No /proc/1 to read, or the shell did not get that far.
    EXPECT_EQ(p->judge(Outcome{0, false, "pid 1:  \nthe sandbox runs on\n", {}, ""}).verdict, Verdict::escaped);
    EXPECT_EQ(p->judge(Outcome{0, false, "pid 1: S exguardian\n", {}, ""}).verdict, Verdict::escaped);
  }
}

}  // namespace
}  // namespace exg::evidence
