// Where a layer gets the sandbox's pid-1 program (pid1/image.hpp) from: the
// installed copy when it holds exactly the embedded bytes (no copy per run),
// else the embedded bytes written to a private file of the run. A stale or
// foreign file at the installed path is never used.
#pragma once
#include <optional>
#include <string>

namespace exg::pid1 {

// EXE_DIR/installed_relpath() when that regular file's bytes are the embedded
// ones and only root or the caller can change it; nullopt otherwise (absent,
// different, unreadable, writable by others).
std::optional<std::string> installed_copy(const std::string& exe_dir);

// The directory of the running exguardian (/proc/self/exe), "" if unknown.
std::string exe_dir();

// Writes the embedded program to PATH (a new file, mode 0555). Plain
// syscalls only: the container layers' runtime host calls it after clone.
// Fails with errno set; the file is removed on a failed write.
bool write_private_copy(const char* path);

}  // namespace exg::pid1
