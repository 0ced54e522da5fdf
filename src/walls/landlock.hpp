// Landlock: a second, independent wall behind the mount policy. The child
// applies it to itself after pivot_root, just before seccomp and execve.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "util/unique_fd.hpp"
#include "walls/landlock_rules.hpp"

namespace exg::walls {

// The ABI version the running kernel offers: 0 when Landlock is unavailable
// (not built in, or not enabled at boot).
int landlock_abi();

struct LandlockFeatures {
  int abi = 0;
  bool fs = false;           // ABI 1: filesystem access rights (ABI 2 adds REFER)
  bool truncate = false;     // ABI 3
  bool net = false;          // ABI 4: TCP bind/connect by port
  bool ioctl_dev = false;    // ABI 5: ioctl on device files
  bool scope = false;        // ABI 6: abstract unix sockets and signals scoped to the domain
  bool audit_flags = false;  // ABI 7: landlock_restrict_self logging flags
};
LandlockFeatures landlock_features();

// The rules are plan data (walls/landlock_rules.hpp); this module applies them.

// Applies the rules to the calling process and its future children. The
// caller must have set no_new_privs. Paths are opened O_PATH in the current
// mount namespace (the sandbox's, after pivot_root); missing ones are skipped.
// `report` (may be null) receives one line saying what was applied and what
// is missing. Returns 0, or -errno (-EOPNOTSUPP when `required` and the kernel
// has no Landlock). `say_applied` false: `report` receives only why it
// failed (the line of what was applied is not built: no allocation where
// nothing reads it, as in the sandbox's first process, whose pages the
// supervisor's are until written).
int apply_landlock(const LandlockRules& rules, std::string* report, bool say_applied = true);

// apply_landlock in two steps, so that the rules can be gathered (a path
// opened and added per rule) while something else is waited for, and put in
// force later: prepare_landlock builds the ruleset (nothing is restricted
// yet; `report` and `say_applied` as above), enforce_landlock restricts the caller with it and
// closes it. A ruleset left empty by prepare (no Landlock, none required)
// enforces nothing. The paths are resolved at prepare time, as whoever the
// caller is then.
struct PreparedLandlock {
  UniqueFd ruleset;  // close-on-exec, as the kernel makes it
  std::uint32_t flags = 0;
  std::uint64_t handled_fs = 0;  // the filesystem rights the ruleset handles
};
int prepare_landlock(const LandlockRules& rules, PreparedLandlock* out, std::string* report, bool say_applied = true);
// One more writable tree in a prepared ruleset, for a directory made after
// prepare_landlock ran (the landlock layer's TMPDIR, made by the supervisor
// meanwhile): every right handled, as for LandlockRules::read_write. Opened as
// a directory, never through a link. 0 (also with no ruleset: nothing is
// enforced), or -errno: not there, not a directory, or the rule refused.
int add_writable_dir(PreparedLandlock& prepared, const std::string& path);
int enforce_landlock(PreparedLandlock& prepared, std::string* report);

// A domain that only scopes signals (ABI 6), nothing else handled: the caller
// may signal itself, what shares the domain and what later nests in it (a
// process that applies more rules after this), and nothing outside. Needs
// no_new_privs. 0, or -errno (-EOPNOTSUPP: no scoping in this kernel).
int scope_signals_only();

}  // namespace exg::walls
