// util/parallel_walk.hpp on a tree of numbers (no filesystem): every task is
// visited once, threads join only for a wide tree, and a visit that throws
// ends the walk with that error instead of a hang or std::terminate.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>

#include <gtest/gtest.h>

#include "util/parallel_walk.hpp"

namespace exg {
namespace {

// Node n has children n*kFan+1 .. n*kFan+kFan while below kNodes.
constexpr int kFan = 8;
constexpr int kNodes = 20000;

void offer_children(ParallelWalk<int>& w, int n, const std::function<void(int&)>& self) {
  for (int c = n * kFan + 1; c <= n * kFan + kFan && c < kNodes; ++c) {
    int t = c;
    if (!w.offer(t)) self(t);  // the queue is full: depth first, here
  }
}

TEST(ParallelWalk, EveryTaskOnceOnSeveralThreads) {
  ParallelWalk<int> w;
  std::mutex m;
  std::multiset<int> seen;
  size_t most_threads = 0;
  std::function<void(int&)> visit = [&](int& n) {
    {
      std::lock_guard<std::mutex> l(m);
      seen.insert(n);
      most_threads = std::max(most_threads, w.extra_threads());
    }
    offer_children(w, n, visit);
  };
  w.run(0, visit);
  ASSERT_EQ(seen.size(), static_cast<size_t>(kNodes));
  for (int i = 0; i < kNodes; ++i) ASSERT_EQ(seen.count(i), 1u) << i;
  EXPECT_GT(most_threads, 0u);         // a wide tree: others joined in
  EXPECT_EQ(w.extra_threads(), 0u);  // and were joined before run() returned
}

TEST(ParallelWalk, AThrowingVisitEndsTheWalkWithItsError) {
  for (size_t threads : {1u, 4u}) {
    ParallelWalk<int> w;
    w.set_max_threads(threads);
    std::atomic<int> visits{0};
    std::function<void(int&)> visit = [&](int& n) {
      ++visits;
      if (n == 3000) throw std::runtime_error("visit 3000 failed");
      offer_children(w, n, visit);
    };
    try {
      w.run(0, visit);
      FAIL() << "run() returned although a visit threw (" << threads << " threads)";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "visit 3000 failed");
    }
    // It stopped taking tasks: not the whole tree.
    EXPECT_LT(visits.load(), kNodes) << threads << " threads";
    // And the walker is usable again (no error left over).
    std::atomic<int> again{0};
    w.run(5, [&](int&) { ++again; });
    EXPECT_EQ(again.load(), 1);
  }
}

}  // namespace
}  // namespace exg
