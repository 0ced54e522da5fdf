// util/step_timer: the `-v` timing line. No kernel mocks: a real child process
// (fork) writes its marks through the shared page, as the sandbox's setup does.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "util/step_timer.hpp"

namespace {

using exg::StepTimer;

TEST(StepTimer, OffByDefaultRecordsNothing) {
  StepTimer t;
  t.mark("plan");
  t.child_mark("mounts");
  t.take_child_marks();
  EXPECT_FALSE(t.on());
  EXPECT_TRUE(t.steps().empty());
  EXPECT_EQ(t.summary(), "total 0.00 ms");
}

TEST(StepTimer, StepsInOrderAndSameNamesAddUp) {
  StepTimer t;
  ASSERT_TRUE(t.start());
  t.mark("plan");
  ::usleep(2000);
  t.mark("cgroup");
  t.mark("plan");
  auto s = t.steps();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].name, "plan");
  EXPECT_EQ(s[1].name, "cgroup");
  EXPECT_GE(s[1].ns, 2'000'000u);
  uint64_t sum = 0;
  for (const auto& x : s) sum += x.ns;
  EXPECT_EQ(sum, t.total_ns());
  std::string line = t.summary();
  EXPECT_EQ(line.rfind("plan ", 0), 0u) << line;
  EXPECT_NE(line.find(", cgroup "), std::string::npos) << line;
  EXPECT_NE(line.find(" ms, total "), std::string::npos) << line;
}

// The child's marks arrive through the shared page and take their place in
// time between the parent's; after child_done() the child writes nothing more.
TEST(StepTimer, ChildMarksMergeInTimeOrder) {
  StepTimer t;
  ASSERT_TRUE(t.start());
  t.mark("clone");
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    t.child_mark("mounts");
    ::usleep(1000);
    t.child_mark("a name longer than the thirty-one bytes a mark keeps");
    t.child_done();
    t.child_mark("after done");  // unmapped: goes nowhere
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  t.take_child_marks();
  t.mark("handover");
  auto s = t.steps();
  ASSERT_EQ(s.size(), 4u) << t.summary();
  EXPECT_EQ(s[0].name, "clone");
  EXPECT_EQ(s[1].name, "mounts");
  EXPECT_EQ(s[2].name, std::string("a name longer than the thirty-one bytes a mark keeps").substr(0, 31));
  EXPECT_EQ(s[3].name, "handover");
  EXPECT_GE(s[2].ns, 1'000'000u);
}

}  // namespace
