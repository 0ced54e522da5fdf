// What every sandbox's setup does inside its new namespaces, tried for real:
// the host probes (process/host_probe.cpp, for doctor and `--layer auto`) and
// the refusal's diagnosis (doctor/userns_diagnosis.hpp) call it in a child.
//
// Why a user namespace of one's own is not enough to know: inside a container
// the engine's seccomp profile lets clone(CLONE_NEWUSER) through but answers
// sethostname(2) and mount(2) with EPERM (Docker's and Podman's default
// profiles allow them only with CAP_SYS_ADMIN of the host), and its masked
// /proc and /sys (/proc/kcore, /proc/acpi, /sys/firmware, ... mounted over)
// make the kernel refuse a fresh proc or sysfs in a user namespace (one may be
// mounted there only where the whole of one is visible). Both stop the setup
// after the namespace was made.
#pragma once
#include <string>

namespace exg::util {

struct SetupProbe {
  std::string step;  // the call that failed ("sethostname", "mount proc ..."); empty: every call worked
  int err = 0;       // its errno
};

// In the calling process, which must be a throwaway child that is root of a
// new user namespace (or root): a new mount, UTS, pid and network namespace,
// then sethostname, a tmpfs, a sysfs, and a fresh proc from a child that is
// the new pid namespace's first process, through the mount API the setup uses
// (fsopen, fsconfig, fsmount; nothing is attached anywhere).
SetupProbe try_namespace_setup_calls();

}  // namespace exg::util
