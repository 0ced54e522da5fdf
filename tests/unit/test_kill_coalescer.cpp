// The runtime host's signal forwarding: one `<runtime> kill` per signal number
// at a time, the rest merged into one more (oci/kill_coalescer.hpp).
#include <csignal>

#include <gtest/gtest.h>

#include "oci/kill_coalescer.hpp"

namespace exg::oci {
namespace {

TEST(KillCoalescer, OneKillPerSignalAtATimeAndOneMoreForAStorm) {
  KillCoalescer k;
  ASSERT_TRUE(k.want(SIGTERM));
  k.started(SIGTERM, 100);
  // A storm while it runs: no new process, however many arrive.
  for (int i = 0; i < 10000; ++i) EXPECT_FALSE(k.want(SIGTERM));
  EXPECT_EQ(k.running(), std::vector<pid_t>{100});
  // Another number is not held up by it.
  ASSERT_TRUE(k.want(SIGUSR1));
  k.started(SIGUSR1, 101);
  EXPECT_EQ(k.running().size(), 2u);
  // The storm becomes exactly one more SIGTERM, after the first ended.
  EXPECT_EQ(k.ended(100), SIGTERM);
  k.started(SIGTERM, 102);
  EXPECT_EQ(k.ended(102), 0);  // nothing arrived meanwhile
  EXPECT_EQ(k.ended(101), 0);
  EXPECT_TRUE(k.running().empty());
  EXPECT_TRUE(k.want(SIGTERM));  // and the next one goes at once again
}

TEST(KillCoalescer, APidNotAKillOfOursChangesNothing) {
  KillCoalescer k;
  ASSERT_TRUE(k.want(SIGHUP));
  k.started(SIGHUP, 7);
  EXPECT_FALSE(k.want(SIGHUP));
  EXPECT_EQ(k.ended(8), 0);
  EXPECT_EQ(k.running(), std::vector<pid_t>{7});
  EXPECT_EQ(k.ended(7), SIGHUP);
}

TEST(KillCoalescer, AKillThatCouldNotStartHoldsNothingUp) {
  KillCoalescer k;
  // want() said yes, but the fork failed: started() was never called.
  ASSERT_TRUE(k.want(SIGINT));
  EXPECT_TRUE(k.want(SIGINT));
  EXPECT_TRUE(k.running().empty());
}

}  // namespace
}  // namespace exg::oci
