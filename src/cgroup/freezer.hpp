// Freezing a sandbox's cgroup: v1's freezer.state and v2's cgroup.freeze.
// kill_all freezes before it kills (none can fork meanwhile); serve pauses
// and resumes sandboxes with it.
#pragma once
#include <string>
#include <vector>

namespace exg::cgroup {

// One freezer of a sandbox's cgroup (v1: the freezer hierarchy's directory;
// v2: the cgroup): the file to write, the values that freeze and thaw, and
// where it reads frozen.
struct Freezer {
  std::string file, on, off, check, frozen_when;
  bool freeze() const;  // writes `on`; false when the write failed
  bool thaw() const;    // writes `off`
  bool frozen() const;  // `check` reads `frozen_when`
  std::string state() const;  // what `check` reads, trailing blanks off (for errors)
};

// The freezers of a cgroup's directories (none: no freezer there).
// v1: freezer.state reads FROZEN; v2: cgroup.events has "frozen 1".
std::vector<Freezer> freezers_of(const std::vector<std::string>& dirs);

// v1: writes FROZEN to dir's freezer.state and waits, at most timeout_ms,
// until it reads FROZEN, writing FROZEN again while it reads FREEZING (v1
// tries each task once per write: a vfork parent caught between its vfork and
// its wait is frozen only by a later write). False when freezer.state cannot
// be written (no freezer there); true otherwise, frozen or not by the end.
bool freeze_v1(const std::string& dir, int timeout_ms);

}  // namespace exg::cgroup
