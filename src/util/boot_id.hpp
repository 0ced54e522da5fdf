// A boot id of the sandbox's own (/proc/sys/kernel/random/boot_id inside):
// the kernel gives one per boot of the host, which every sandbox on the host's
// kernel would otherwise share. A sandbox is a machine that boots when it
// starts (serve's filesystem-only pause ends it; the resume is a new boot), so
// the layers that mount their own /proc bind one of these over the kernel's,
// read-only, and a program that compares boot ids (E2B's tests, a cache keyed
// on the boot) sees a reboot exactly when the sandbox started again.
#pragma once

#include <optional>
#include <string>

namespace exg {

// A random (version 4) UUID in the kernel's own form: 36 lowercase characters
// and a newline. None when the kernel's random source failed.
std::optional<std::string> new_boot_id();

}  // namespace exg
