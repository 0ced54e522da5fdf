// Escape probes: each tries one thing the sandbox's seccomp filter must refuse
// (or one ordinary thing it must allow) with the raw syscall, in a forked
// child so that a kill by SIGSYS (i386, x32) is observed, not suffered. Run
// from inside a sandbox (`exguardian probe NAME`) or from the unit tests. A
// refused probe expects the errno the supervisor answers with
// (walls::refused_errno), so the supervisor must be reading the listener.
#pragma once
#include <string>
#include <vector>

namespace exg::probe {

// 0: as expected (an attack refused, or an ordinary call allowed);
// 1: not as expected (an attack got through, or reached the kernel and failed
//    there with another errno; an ordinary call refused);
// 2: no probe of that name.
// out gets one line: "refused: EPERM", "allowed", "killed by SIGSYS",
// "failed: EINVAL (not the filter's answer)", ...
int run_probe(const std::string& name, std::string& out);

std::vector<std::string> probe_names();

// Where the probes that need a scratch directory make it (mkdtemp under it, removed
// afterwards): $TMPDIR (else /tmp) unless set. A foreign sandbox may give no writable /tmp (srt's
// settings do not unless the user adds it): escape-test gives its workspace instead,
// which every sandbox under test must let ordinary work write.
void set_scratch_parent(const std::string& dir);
// Probes of ordinary work that must succeed (names end in "-allowed").
bool probe_expects_success(const std::string& name);

// Whether the probe may run with no sandbox at all, on the host's kernel as the
// caller (escape-test --sandbox none): false, with why, for what would change
// the host's kernel or machine-wide state had the kernel taken its arguments
// (reboot, kexec, module loading, swap, accounting, the clock). Every probe
// says so in its row of the table (probes.cpp); an unknown name is unsafe.
bool probe_safe_without_sandbox(const std::string& name, std::string& why);

}  // namespace exg::probe
