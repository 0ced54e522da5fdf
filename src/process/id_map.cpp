#include "process/id_map.hpp"

#include <algorithm>
#include <cstdint>

namespace exg::process {

std::string id_map_lines(unsigned from, unsigned to, bool identity_rest, std::vector<unsigned> exclude) {
  std::string out = std::to_string(from) + " " + std::to_string(to) + " 1\n";
  if (!identity_rest) return out;
  exclude.push_back(from);
  exclude.push_back(to);
  std::sort(exclude.begin(), exclude.end());
  exclude.erase(std::unique(exclude.begin(), exclude.end()), exclude.end());
  constexpr uint64_t kEnd = 4294967295u;  // (uid_t)-1 is never an id
  uint64_t start = 0;
  auto range = [&](uint64_t a, uint64_t b) {  // [a, b)
    if (b > a) out += std::to_string(a) + " " + std::to_string(a) + " " + std::to_string(b - a) + "\n";
  };
  for (unsigned x : exclude) {
    if (x >= kEnd) break;
    range(start, x);
    start = uint64_t(x) + 1;
  }
  range(start, kEnd);
  return out;
}

}  // namespace exg::process
