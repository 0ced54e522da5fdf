#include "walls/landlock.hpp"

#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>

#include "util/unique_fd.hpp"

// Debian 12's <linux/landlock.h> stops at ABI 2: the rest is defined here.
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP (1ULL << 0)
#endif
#ifndef LANDLOCK_ACCESS_NET_CONNECT_TCP
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#endif
#ifndef LANDLOCK_SCOPE_SIGNAL
#define LANDLOCK_SCOPE_SIGNAL (1ULL << 1)
#endif
#ifndef LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON
#define LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON (1U << 1)
#endif
#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#endif

namespace exg::walls {
namespace {

// The kernel's structs as of ABI 6; older kernels get a prefix of them.
struct RulesetAttr {
  std::uint64_t handled_access_fs;
  std::uint64_t handled_access_net;  // ABI 4
  std::uint64_t scoped;              // ABI 6
};
struct __attribute__((packed)) PathBeneathAttr {
  std::uint64_t allowed_access;
  std::int32_t parent_fd;
};
struct NetPortAttr {
  std::uint64_t allowed_access;
  std::uint64_t port;
};
constexpr int kRulePathBeneath = 1;
constexpr int kRuleNetPort = 2;

long create_ruleset(const RulesetAttr* attr, std::size_t size, std::uint32_t flags) {
  return ::syscall(SYS_landlock_create_ruleset, attr, size, flags);
}
long add_rule(int ruleset, int type, const void* attr) {
  return ::syscall(SYS_landlock_add_rule, ruleset, type, attr, 0);
}
long restrict_self(int ruleset, std::uint32_t flags) {
  return ::syscall(SYS_landlock_restrict_self, ruleset, flags);
}

constexpr std::uint64_t kRead = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE |
                                LANDLOCK_ACCESS_FS_READ_DIR;
// Rights that make sense on a file (a rule on a non-directory may hold only these).
constexpr std::uint64_t kFileRights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                      LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_TRUNCATE |
                                      LANDLOCK_ACCESS_FS_IOCTL_DEV;

std::uint64_t fs_rights(int abi) {
  if (abi < 1) return 0;
  std::uint64_t all = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1;  // ABI 1: bits 0..12
  if (abi >= 2) all |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) all |= LANDLOCK_ACCESS_FS_TRUNCATE;
  if (abi >= 5) all |= LANDLOCK_ACCESS_FS_IOCTL_DEV;
  return all;
}

// A directory these credentials cannot search (a rule path beneath it could
// not be opened: EACCES, and faccessat says so of the directory itself):
// every later path beneath it is skipped without an open, as its open would
// fail. A root run's rules name HOME's entries, /root/..., which the
// sandbox's uid cannot reach: 14 failed opens a run. A view into the rules'
// own strings: nothing allocated (this runs in the cloned child).
struct Unsearchable {
  std::string_view dir;
  bool holds(const std::string& path) const {
    return !dir.empty() && path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/';
  }
  // After `path` failed with EACCES: remember its directory if that cannot be searched.
  void learn(const std::string& path) {
    size_t slash = path.rfind('/');
    char buf[4096];
    if (slash == std::string::npos || slash == 0 || slash >= sizeof buf) return;
    path.copy(buf, slash);
    buf[slash] = '\0';
    // (raw: a libc function no one called before would be bound lazily here,
    // in the cloned child, faulting in libc's symbol tables; faccessat2 is
    // older than Landlock)
    if (::syscall(SYS_faccessat2, AT_FDCWD, buf, X_OK, AT_EACCESS) != 0 && errno == EACCES)
      dir = std::string_view(path).substr(0, slash);
  }
};

// Adds one path-beneath rule; false (and the path in `skipped`, unless null)
// when the path cannot be opened. Other failures are returned as -errno through `err`.
bool add_path(int ruleset, const std::string& path, std::uint64_t access, std::uint64_t handled,
              std::string* skipped, int& err, Unsearchable& unsearchable) {
  UniqueFd fd(unsearchable.holds(path) ? -1 : ::open(path.c_str(), O_PATH | O_CLOEXEC));
  if (!fd) {
    if (errno == EACCES && !unsearchable.holds(path)) unsearchable.learn(path);
    if (skipped) *skipped += (skipped->empty() ? "" : ", ") + path;
    return false;
  }
  // Most rules are on directories: added as they are, and only a
  // non-directory (which the kernel refuses rights of directories: EINVAL, the
  // rights being a subset of the handled ones) added again with its file
  // rights. No fstat() of every path first.
  PathBeneathAttr attr{access & handled, fd.get()};
  if (attr.allowed_access == 0) return true;
  if (add_rule(ruleset, kRulePathBeneath, &attr) == 0) return true;
  if (errno == EINVAL && (attr.allowed_access & ~kFileRights) != 0) {
    attr.allowed_access &= kFileRights;
    if (attr.allowed_access == 0 || add_rule(ruleset, kRulePathBeneath, &attr) == 0) return true;
  }
  err = -errno;
  return false;
}

}  // namespace

int landlock_abi() {
  long v = create_ruleset(nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  return v < 0 ? 0 : static_cast<int>(v);
}

LandlockFeatures landlock_features() {
  LandlockFeatures f;
  f.abi = landlock_abi();
  f.fs = f.abi >= 1;
  f.truncate = f.abi >= 3;
  f.net = f.abi >= 4;
  f.ioctl_dev = f.abi >= 5;
  f.scope = f.abi >= 6;
  f.audit_flags = f.abi >= 7;
  return f;
}

int scope_signals_only() {
  if (!landlock_features().scope) return -EOPNOTSUPP;
  RulesetAttr attr{};
  attr.scoped = LANDLOCK_SCOPE_SIGNAL;  // nothing else handled: no access is taken away
  UniqueFd ruleset(static_cast<int>(create_ruleset(&attr, sizeof attr, 0)));
  if (!ruleset) return -errno;
  if (restrict_self(ruleset.get(), 0) != 0) return -errno;
  return 0;
}

int prepare_landlock(const LandlockRules& rules, PreparedLandlock* out, std::string* report, bool say_applied) {
  out->ruleset.reset();
  out->flags = 0;
  const LandlockFeatures f = landlock_features();
  auto say = [&](const std::string& s) {
    if (report) *report = s;
  };
  if (!f.fs) {
    int e = errno;  // from landlock_abi(): ENOSYS (not built in) or EOPNOTSUPP (disabled at boot)
    std::string why = e == EOPNOTSUPP ? "disabled at boot (not in lsm=)" : "not in this kernel";
    say("landlock: " + why + (rules.required ? ": required by the policy" : ": not applied"));
    return rules.required ? -EOPNOTSUPP : 0;
  }

  RulesetAttr attr{};
  // Not handled by default: reads (the mounts decide what is readable) and
  // TRUNCATE/IOCTL_DEV, which Landlock resolves on EVERY open by walking the
  // path to "/" (measured: +20% on a stat/open loop). Without them an open for
  // reading costs nothing; O_TRUNC still needs WRITE_FILE, and truncate(2) of
  // a file outside the writable trees meets a read-only mount.
  constexpr std::uint64_t kPerOpen = LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV;
  attr.handled_access_fs = fs_rights(f.abi) & (rules.handle_reads ? ~std::uint64_t{0} : ~(kRead | kPerOpen));
  std::size_t size = sizeof attr.handled_access_fs;
  const bool net = rules.handle_net && f.net;
  if (net) attr.handled_access_net = LANDLOCK_ACCESS_NET_BIND_TCP | LANDLOCK_ACCESS_NET_CONNECT_TCP;
  if (f.net) size += sizeof attr.handled_access_net;
  if (f.scope) {
    if (rules.scope_abstract_unix) attr.scoped |= LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET;
    if (rules.scope_signals) attr.scoped |= LANDLOCK_SCOPE_SIGNAL;
    size += sizeof attr.scoped;
  }
  UniqueFd ruleset(static_cast<int>(create_ruleset(&attr, size, 0)));
  if (!ruleset) {
    int e = errno;
    say("landlock: ABI " + std::to_string(f.abi) + ": create_ruleset failed");
    return -e;
  }

  const std::uint64_t handled = attr.handled_access_fs;
  std::string skipped_paths;  // (only for the line of what was applied)
  std::string* skipped = report && say_applied ? &skipped_paths : nullptr;
  int err = 0;
  Unsearchable unsearchable;
  if (rules.handle_reads)
    for (const auto& p : rules.read_only) add_path(ruleset.get(), p, kRead, handled, skipped, err, unsearchable);
  for (const auto& p : rules.read_write) add_path(ruleset.get(), p, handled, handled, skipped, err, unsearchable);
  for (const auto& p : rules.write_files)
    add_path(ruleset.get(), p, LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_TRUNCATE, handled,
             skipped, err, unsearchable);
  // Terminals (tty, the sandbox's own pts) need ioctls; the sandbox's /dev
  // holds only harmless devices besides them.
  if (f.ioctl_dev && (handled & LANDLOCK_ACCESS_FS_IOCTL_DEV)) {
    add_path(ruleset.get(), "/dev", LANDLOCK_ACCESS_FS_IOCTL_DEV, handled, nullptr, err, unsearchable);
  }
  if (net) {
    for (auto port : rules.bind_tcp) {
      NetPortAttr a{LANDLOCK_ACCESS_NET_BIND_TCP, port};
      if (add_rule(ruleset.get(), kRuleNetPort, &a) != 0) err = -errno;
    }
    for (auto port : rules.connect_tcp) {
      NetPortAttr a{LANDLOCK_ACCESS_NET_CONNECT_TCP, port};
      if (add_rule(ruleset.get(), kRuleNetPort, &a) != 0) err = -errno;
    }
  }
  if (err != 0) {
    say("landlock: ABI " + std::to_string(f.abi) + ": add_rule failed");
    return err;
  }

  std::uint32_t flags = 0;
  if (f.audit_flags && rules.log_after_exec) flags |= LANDLOCK_RESTRICT_SELF_LOG_NEW_EXEC_ON;
  out->flags = flags;
  out->handled_fs = handled;
  if (!report || !say_applied) {
    out->ruleset = std::move(ruleset);
    return 0;
  }

  std::string r = "landlock: ABI " + std::to_string(f.abi) + (rules.handle_reads ? ": filesystem" : ": filesystem writes");
  if (handled & LANDLOCK_ACCESS_FS_TRUNCATE) r += ", truncate";
  if (handled & LANDLOCK_ACCESS_FS_IOCTL_DEV) r += ", ioctl on devices";
  if (attr.scoped == (LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET | LANDLOCK_SCOPE_SIGNAL))
    r += ", signal and abstract-unix scoping";
  else if (attr.scoped & LANDLOCK_SCOPE_SIGNAL)
    r += ", signal scoping";
  else if (attr.scoped & LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET)
    r += ", abstract-unix scoping";
  if (net)
    r += ", TCP bind/connect by port";
  else if (f.net)
    r += "; TCP not handled (the sandbox's own netns: every port is its own loopback)";
  std::string missing;
  if (!f.truncate) missing += (missing.empty() ? "" : ", ") + std::string("truncate (ABI 3)");
  if (!f.net && rules.handle_net) missing += (missing.empty() ? "" : ", ") + std::string("network (ABI 4)");
  if (!f.ioctl_dev) missing += (missing.empty() ? "" : ", ") + std::string("ioctl on devices (ABI 5)");
  if (!f.scope && (rules.scope_signals || rules.scope_abstract_unix))
    missing += (missing.empty() ? "" : ", ") + std::string("scoping (ABI 6)");
  if (!missing.empty()) r += "; missing: " + missing;
  if (!skipped_paths.empty()) r += "; skipped missing paths: " + skipped_paths;
  say(r);
  out->ruleset = std::move(ruleset);
  return 0;
}

int add_writable_dir(PreparedLandlock& prepared, const std::string& path) {
  if (!prepared.ruleset) return 0;
  UniqueFd fd(::open(path.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return -errno;
  PathBeneathAttr attr{prepared.handled_fs, fd.get()};
  if (attr.allowed_access != 0 && add_rule(prepared.ruleset.get(), kRulePathBeneath, &attr) != 0) return -errno;
  return 0;
}

int enforce_landlock(PreparedLandlock& prepared, std::string* report) {
  if (!prepared.ruleset) return 0;  // no Landlock here and none required (prepare_landlock said so)
  UniqueFd ruleset = std::move(prepared.ruleset);
  if (restrict_self(ruleset.get(), prepared.flags) != 0) {
    int e = errno;
    if (report)
      *report = "landlock: ABI " + std::to_string(landlock_abi()) + ": restrict_self failed" +
                (e == EPERM ? " (no_new_privs not set)" : "");
    return -e;
  }
  return 0;
}

int apply_landlock(const LandlockRules& rules, std::string* report, bool say_applied) {
  PreparedLandlock prepared;
  if (int r = prepare_landlock(rules, &prepared, report, say_applied); r != 0) return r;
  return enforce_landlock(prepared, report);
}

}  // namespace exg::walls
