// The whole text of a small kernel file (/proc, /sys): read to EOF, since
// their size is not known in advance. Empty when it cannot be read.
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
