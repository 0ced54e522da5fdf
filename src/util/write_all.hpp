// Writes the whole of `s` to a blocking descriptor, retrying on EINTR and
// short writes: false when the descriptor refused (errno says why).
#pragma once

#include <unistd.h>

#include <cerrno>
#include <string_view>

namespace exg {

inline bool write_all(int fd, std::string_view s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::write(fd, s.data() + off, s.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace exg
