// Whether every entry of the sandbox's writable trees carries the command's
// group. gVisor as an ordinary user runs its gofer as a subordinate uid that
// writes the command's files through CAP_DAC_OVERRIDE in its user namespace;
// the kernel grants that only over inodes whose owner AND group are mapped
// there, and only the caller's own gid can be (newgidmap), so a workspace entry
// of another group (`chown me:users sub`) could not be written (issue 12).
#pragma once
#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

namespace exg::oci {

// The first entry (host path) under roots whose group is not gid, or a note
// when more than `budget` entries would have to be read to know; nullopt when
// every entry has that group.
std::optional<std::string> entry_of_other_group(const std::vector<std::string>& roots, gid_t gid, size_t budget);

}  // namespace exg::oci
