// Milliseconds of the monotonic clock, and a sleep that finishes despite
// signals: for the bounded waits of cgroup handling (kill, freeze, rmdir).
#pragma once
#include <time.h>

#include <cerrno>
#include <cstdint>

namespace exg::util {

inline uint64_t now_ms() {
  struct timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

inline void sleep_ms(long ms) {
  struct timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

}  // namespace exg::util
