// Where a run's start-up time goes: named steps with monotonic durations,
// printed by `exguardian run -v` as one line ("exguardian: timing: plan 0.3
// ms, cgroup 1.2 ms, ... total 6.1 ms"). Off unless start() was called: every
// mark is then one branch, nothing is allocated.
//
// A mark closes a step: its duration is the time since the previous mark,
// whichever process made it. The sandbox's side of a launch runs in a cloned
// child (no shared memory with the supervisor), so start() also maps one
// shared page that the child's marks go to (child_mark(): no allocation, safe
// between clone and exec); the supervisor merges them in time order
// (take_child_marks()) once the child said it is ready, or once it has ended
// (a child that writes its last marks after the handover). The child unmaps the
// page before anything of the sandbox runs (child_done()), so no sandboxed
// code can write to the supervisor's figures.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace exg {

class StepTimer {
 public:
  StepTimer() = default;
  StepTimer(const StepTimer&) = delete;
  StepTimer& operator=(const StepTimer&) = delete;
  ~StepTimer();

  // Enables the timer; the origin of "total" is now. False (and off) when the
  // shared page cannot be mapped.
  bool start();
  bool on() const { return on_; }

  // Closes the step `name` (a string literal: kept by pointer) now.
  void mark(const char* name) {
    if (on_) mark_at(name, now_ns());
  }
  // The child's side (after clone, before exec): records into the shared page.
  void child_mark(const char* name);
  // The child's last mark is made: unmap the page in this process.
  void child_done();
  // Supervisor: merge the child's marks into the steps (in time order).
  void take_child_marks();

  // "plan 0.3 ms, cgroup 1.2 ms, ..., total 6.1 ms" (steps of one name add up,
  // in the order they first appear).
  std::string summary() const;

  struct Step {
    std::string name;
    uint64_t ns = 0;
  };
  // The steps with their durations, in order (the same names added up).
  std::vector<Step> steps() const;
  uint64_t total_ns() const;

  static uint64_t now_ns();

 private:
  struct Mark {
    std::string name;
    uint64_t at_ns;
  };
  // The shared page: marks the child made (names copied, bounded).
  struct ChildMark {
    char name[32];
    uint64_t at_ns;
  };
  static constexpr size_t kMaxChildMarks = 64;
  struct ChildPage {
    uint32_t count;
    ChildMark marks[kMaxChildMarks];
  };

  void mark_at(const char* name, uint64_t at);

  bool on_ = false;
  uint64_t origin_ns_ = 0;
  std::vector<Mark> marks_;  // sorted by time
  ChildPage* page_ = nullptr;
};

}  // namespace exg
