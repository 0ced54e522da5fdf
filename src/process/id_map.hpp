// Lines of a user namespace's uid_map/gid_map.
#pragma once
#include <string>
#include <vector>

namespace exg::process {

// "from to 1", then, with identity_rest, every other id onto itself except
// those in `exclude` and `from`/`to` (a map may not give one id twice on
// either side). Used for the gid map of idmapped workspace mounts (root only):
// a directory of another group (`chgrp users sub`) must stay writable by its
// owner, and the kernel refuses writes to an inode whose group the mount does
// not map (HAS_UNMAPPED_ID: EACCES).
std::string id_map_lines(unsigned from, unsigned to, bool identity_rest, std::vector<unsigned> exclude = {});

}  // namespace exg::process
