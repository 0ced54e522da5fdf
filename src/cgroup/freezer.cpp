#include "cgroup/freezer.hpp"

#include <unistd.h>

#include "cgroup/files.hpp"
#include "util/clock.hpp"

namespace exg::cgroup {

bool Freezer::freeze() const { return write_text(file, on) == 0; }
bool Freezer::thaw() const { return write_text(file, off) == 0; }
bool Freezer::frozen() const { return read_text(check).value_or("").find(frozen_when) != std::string::npos; }

std::string Freezer::state() const {
  std::string seen = read_text(check).value_or("");
  while (!seen.empty() && (seen.back() == '\n' || seen.back() == ' ')) seen.pop_back();
  return seen;
}

std::vector<Freezer> freezers_of(const std::vector<std::string>& dirs) {
  std::vector<Freezer> out;
  for (const auto& d : dirs) {
    if (::access((d + "/freezer.state").c_str(), F_OK) == 0)
      out.push_back({d + "/freezer.state", "FROZEN", "THAWED", d + "/freezer.state", "FROZEN"});
    else if (::access((d + "/cgroup.freeze").c_str(), F_OK) == 0)
      out.push_back({d + "/cgroup.freeze", "1", "0", d + "/cgroup.events", "frozen 1"});
  }
  return out;
}

bool freeze_v1(const std::string& dir, int timeout_ms) {
  const std::string state = dir + "/freezer.state";
  if (write_text(state, "FROZEN") != 0) return false;
  // v1 tries each task once per write of FROZEN. A vfork parent that enters
  // its wait after that try, its child frozen before exec, stays unfrozen
  // (FREEZING for ever): so FROZEN is written again while it reads FREEZING,
  // and the next try finds the parent asleep and freezes it.
  const uint64_t deadline = util::now_ms() + static_cast<uint64_t>(timeout_ms);
  while (util::now_ms() < deadline) {
    if (read_text(state).value_or("").starts_with("FROZEN")) break;
    util::sleep_ms(1);
    write_text(state, "FROZEN");
  }
  return true;
}

}  // namespace exg::cgroup
