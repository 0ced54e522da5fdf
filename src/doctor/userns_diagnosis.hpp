// Why this host refuses the user namespace the process layer needs, which
// layers would still run here, and the exact ways out: one line per fact, for
// the refusal of `exguardian run`/`session` (exit 125) and for `doctor`.
// The facts are read from the host (read_userns_facts, try_user_namespace);
// explain_userns_refusal() only reasons over them, so that hosts this machine
// cannot be (Ubuntu's AppArmor restriction, Docker's seccomp profile) are
// unit-tested with their facts. The default stays fail-closed: nothing here
// weakens a run, it only says why none started.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

#include "util/layer_kind.hpp"

namespace exg::doctor {

// What the host says, as read from /proc and /sys (empty string: absent or unreadable).
struct UsernsFacts {
  uid_t euid = 0;
  std::string max_user_namespaces;        // /proc/sys/user/max_user_namespaces (this user namespace's)
  std::string unprivileged_userns_clone;  // /proc/sys/kernel/unprivileged_userns_clone (Debian's patch)
  std::string apparmor_restrict;          // /proc/sys/kernel/apparmor_restrict_unprivileged_userns (Ubuntu 23.10+)
  bool apparmor_active = false;           // /sys/kernel/security/apparmor or /sys/module/apparmor/parameters/enabled
  bool apparmor_profile_loaded = false;   // a profile named exguardian in /sys/kernel/security/apparmor/profiles
  bool apparmor_profile_installed = false;  // /etc/apparmor.d/exguardian exists
  std::string apparmor_label;             // this process's AppArmor label (/proc/self/attr/current)
  std::string exe;                        // /proc/self/exe
  int seccomp_mode = 0;                   // Seccomp: in /proc/self/status (2: a filter)
  bool nested_userns = false;             // /proc/self/uid_map is not the whole identity map
  std::string uid_map;                    // its first line, spaces squeezed
  std::string setgroups;                  // /proc/self/setgroups: "allow" | "deny"
  std::string container;                  // "docker", "podman", "lxc", "kubernetes", ... or ""
  std::string container_evidence;         // what said so: "/.dockerenv", "container=podman", ...
  std::string container_runtime;          // crun or runc found for the container layer ("" none)
  int landlock_abi = 0;                   // the kernel's Landlock ABI (0: none): the landlock layer needs 6
};
// container_runtime: the container layer's runtime as that layer finds it
// ("" none; the caller asks it: cli/host_setup.hpp installed_container_runtime).
UsernsFacts read_userns_facts(std::string container_runtime);

// One attempt at what the process layer does first: clone(CLONE_NEWUSER), its
// maps written from outside, then what the setup does inside: a mount, UTS
// and pid namespace, sethostname, a tmpfs and a fresh proc
// (util/namespace_setup_probe.hpp). An AppArmor restriction bites there (the
// namespace is made, its capabilities are not given), and so do a container
// engine's seccomp profile (sethostname, mount: EPERM) and its masked /proc.
// In a forked child; nothing is left behind.
struct UsernsProbe {
  bool ok = false;
  std::string step;  // which call failed: "clone(CLONE_NEWUSER)", "write /proc/PID/uid_map", ...
  int err = 0;       // its errno
};
UsernsProbe try_user_namespace();

// The layers that make a user namespace of their own as this caller (and so
// cannot run where one is refused): all of them today: process; microvm (qemu
// runs inside the process layer); gvisor (runsc's host runs in one); container
// rootless (crun in one) and as root (its writable paths are idmapped mounts,
// whose idmap is a user namespace).
bool layer_needs_userns(layer::Kind kind, bool root);

// The refusal, one fact per line (no "exguardian: " prefix): the cause (which
// call, which sysctl or LSM, inside which kind of container), the layers that
// would run here and those that would not, and the ways out. `failed_call`:
// what the run itself tripped on ("setgroups", "create namespaces", ...), or
// "" for doctor. Empty when the probe worked and nothing failed.
std::vector<std::string> explain_userns_refusal(const UsernsFacts& facts, const UsernsProbe& probe,
                                                const std::string& failed_call);

// For a run whose layer `kind` failed with `error_text`: the explanation when
// that layer needs a user namespace here and one cannot be made now (the
// probe is run again: the lines say what is true, not what the error text
// suggests); else empty.
std::vector<std::string> userns_refusal_for(layer::Kind kind, const std::string& failed_call,
                                           const std::string& container_runtime);

}  // namespace exg::doctor
