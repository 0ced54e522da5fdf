// What the fuzz targets share: a check that aborts with a message (libFuzzer
// keeps the input as a crash), and a deterministic way to cut one input into
// the pieces a socket might deliver it in.
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <vector>

#define FUZZ_CHECK(cond, what)                                                   \
  do {                                                                           \
    if (!(cond)) {                                                               \
      std::fprintf(stderr, "fuzz check failed: %s (%s:%d)\n", what, __FILE__, __LINE__); \
      std::abort();                                                              \
    }                                                                            \
  } while (0)

namespace exg::fuzz {

// Pieces of `in` of 1..max bytes, their sizes drawn from `seed` (so the same
// input is always cut the same way: a crash replays).
inline std::vector<std::string_view> pieces(std::string_view in, uint8_t seed, size_t max = 64) {
  std::vector<std::string_view> out;
  uint32_t x = seed * 2654435761u + 1;
  while (!in.empty()) {
    x = x * 1103515245u + 12345u;
    size_t n = 1 + (x >> 16) % max;
    if (n > in.size()) n = in.size();
    out.push_back(in.substr(0, n));
    in.remove_prefix(n);
  }
  return out;
}

}  // namespace exg::fuzz
