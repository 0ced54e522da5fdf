// The whole text of a small file: a kernel one (/proc, /sys), read to EOF
// since its size is not known in advance, or a small config (/etc/passwd,
// direnv's), read with read(2) rather than a stream whose set-up costs more.
// Empty when it cannot be read.
#pragma once
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "util/unique_fd.hpp"

namespace exg::util {

inline std::string read_proc_text(const char* path) {
  std::string text;
  UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd) return text;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  return text;
}

}  // namespace exg::util
