// A per-test time bound for the unit tests: a test still running after
// EXG_TEST_WATCHDOG_SECONDS (default 300) is named on stderr and the whole
// binary exits 124. Many tests fork children and serve them (seccomp
// listeners, agents, sockets); one that waits forever would otherwise hold
// `make test` until CI's own limit, which names nothing. A thread, not
// alarm(): the supervisor code under test blocks or forwards SIGALRM.
//
// Registered from a static initialiser, so gtest_main's RUN_ALL_TESTS sees it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>

namespace {

// What the watching thread and the listener share. Never destroyed: the thread
// waits on it to the process's end (gtest deletes its listeners at exit, and a
// condition variable destroyed under a waiter hangs the exit).
struct WatchState {
  std::mutex mu;
  std::condition_variable cv;
  std::string name;
  std::chrono::steady_clock::time_point deadline;
  bool running = false;
};

class Watchdog : public ::testing::EmptyTestEventListener {
 public:
  explicit Watchdog(std::chrono::seconds limit) : limit_(limit), state_(new WatchState) {
    std::thread([s = state_, limit] { watch(*s, limit); }).detach();
  }

  void OnTestStart(const ::testing::TestInfo& info) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->name = std::string(info.test_suite_name()) + "." + info.name();
    state_->deadline = std::chrono::steady_clock::now() + limit_;
    state_->running = true;
    state_->cv.notify_one();
  }

  void OnTestEnd(const ::testing::TestInfo&) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->running = false;
    state_->cv.notify_one();
  }

 private:
  // Where the hung test waits: each thread's and each child's state, wait channel and
  // kernel stack (the stack needs root, as CI runs), so that a hang seen once can be read.
  static void dump_file(const std::string& path, const char* label) {
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) std::fprintf(stderr, "[ WATCHDOG ]   %s %s\n", label, line.c_str());
  }
  static void dump_process(const std::string& proc) {
    std::error_code ec;
    for (const auto& t : std::filesystem::directory_iterator(proc + "/task", ec)) {
      std::string dir = t.path().string();
      std::fprintf(stderr, "[ WATCHDOG ] %s\n", dir.c_str());
      dump_file(dir + "/comm", "comm");
      dump_file(dir + "/wchan", "wchan");
      dump_file(dir + "/stack", "stack");
      std::ifstream children(dir + "/children");
      for (std::string pid; children >> pid;) dump_process("/proc/" + pid);
    }
  }
  static void dump_tasks() { dump_process("/proc/" + std::to_string(::getpid())); }

  static void watch(WatchState& s, std::chrono::seconds limit) {
    std::unique_lock<std::mutex> lock(s.mu);
    for (;;) {
      if (!s.running) {
        s.cv.wait(lock);
        continue;
      }
      auto deadline = s.deadline;
      if (s.cv.wait_until(lock, deadline) == std::cv_status::timeout && s.running && s.deadline == deadline) {
        std::fprintf(stderr, "\n[ WATCHDOG ] %s did not end within %lld s: exiting 124\n", s.name.c_str(),
                     static_cast<long long>(limit.count()));
        dump_tasks();
        std::fflush(stderr);
        ::_exit(124);
      }
    }
  }

  const std::chrono::seconds limit_;
  WatchState* const state_;  // shared with the thread, see WatchState
};

const bool kRegistered = [] {
  long seconds = 300;
  if (const char* v = std::getenv("EXG_TEST_WATCHDOG_SECONDS")) seconds = std::strtol(v, nullptr, 10);
  if (seconds > 0)
    ::testing::UnitTest::GetInstance()->listeners().Append(new Watchdog(std::chrono::seconds(seconds)));
  return true;
}();

}  // namespace
