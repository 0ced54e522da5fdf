// What the agent says about the walls around it that the supervisor cannot
// see for itself (the microVM guest's: its init applied them, its kernel
// enforces them): the ready event's "walls" and the "limit" events
// (docs/agent-protocol.md). The host's front ends (run's, the session's)
// keep it; the supervisor reports the limits as it reports its own cgroup's.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "agent/protocol.hpp"

namespace exg::agent {

class InsideReport {
 public:
  // Learns what `f` says (a ready event's walls, a limit event's count).
  // True when `f` was a limit event: nothing else is to be done with it.
  bool take(const Frame& f);
  // "landlock: ...", "pids: ...", "seccomp: ...", by name; empty
  // when it said nothing (the layers where the supervisor applies the walls).
  const std::vector<std::string>& walls() const { return walls_; }
  // Forks refused by the pids limit inside, as last reported (a lower bound
  // while a fork bomb runs); 0: none.
  uint64_t pids_refused() const { return pids_refused_; }

 private:
  std::vector<std::string> walls_;
  uint64_t pids_refused_ = 0;
};

}  // namespace exg::agent
