// E2B's file metadata (envd 0.6.2): NAME -> value pairs kept on the file
// itself as user.e2b.NAME extended attributes, so they move with a rename,
// go with a remove, and a command inside can set them too
// (os.setxattr(path, "user.e2b.author", b"x")). Read and written by the
// agent, as the sandbox's user.
#pragma once
#include <map>
#include <string>

#include <nlohmann/json.hpp>

namespace exg::agent {

// The file's pairs (a symlink's own, not its target's): an object, empty
// when it has none or its filesystem keeps no user attributes.
nlohmann::json read_file_metadata(const std::string& path);

// Replaces the open file's pairs by `pairs` (none: all removed). 0 or the errno.
int replace_file_metadata(int fd, const std::map<std::string, std::string>& pairs);

}  // namespace exg::agent
