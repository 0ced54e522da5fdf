#include "plan/warnings.hpp"

#include "plan/paths.hpp"

namespace exg::plan {

std::vector<std::string> policy_warnings(const policy::Policy& pol, const Plan& plan, const std::string& home_in) {
  std::vector<std::string> out;
  std::string home = home_in.empty() ? std::string() : canonical(home_in).value_or("");
  auto holds_home = [&](const std::string& tree) { return !home.empty() && home != "/" && is_within(home, tree); };
  auto relative_note = [](const policy::PathEntry& e) {
    return e.path.starts_with("/") || e.path.starts_with("~") ? std::string() : " (relative to " + e.base_dir + ")";
  };

  // (A workspace that holds HOME is refused by compile(): not a warning.)
  for (const auto& e : pol.filesystem.allow_write) {
    std::string p = expand_path(e.path, home, e.base_dir);
    if (p == "/tmp" || p == "/var/tmp" || p == "/private/tmp") continue;  // the sandbox's own (compile.cpp)
    for (const auto& h : resolve_entry(e, home)) {
      if (h == plan.workspace || !holds_home(h)) continue;
      out.push_back(e.where.str() + ": allowWrite \"" + e.path + "\" is " + h +
                    (h == home ? ", your home directory" : ", which holds your home directory " + home) +
                    ": all of it is writable and persistent" + relative_note(e));
    }
  }
  // Paths only: a glob that matches nothing today is an ordinary pattern (and
  // matching it again would walk its tree a second time).
  auto deny = [&](const std::vector<policy::PathEntry>& entries, const char* key) {
    for (const auto& e : entries) {
      if (!e.literal && has_glob(e.path)) continue;
      std::string p = expand_path(e.path, home, e.base_dir);
      if (canonical(p)) continue;
      out.push_back(e.where.str() + ": " + key + " \"" + e.path + "\" names nothing that exists (" + p +
                    "): it denies nothing" + relative_note(e));
    }
  };
  deny(pol.filesystem.deny_write, "denyWrite");
  deny(pol.filesystem.deny_read, "denyRead");
  return out;
}

}  // namespace exg::plan
