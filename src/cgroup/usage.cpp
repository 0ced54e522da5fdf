#include "cgroup/usage.hpp"

#include "cgroup/files.hpp"

namespace exg::cgroup {

Usage read_usage(const std::vector<std::string>& dirs) {
  Usage u;
  for (const auto& d : dirs) {
    if (auto s = read_text(d + "/cpuacct.usage"))  // v1
      if (auto v = parse_number(*s)) u.cpu_ns = *v;
    if (auto s = read_text(d + "/memory.usage_in_bytes"))  // v1
      if (auto v = parse_number(*s)) u.memory_bytes = *v;
    if (auto s = read_text(d + "/memory.current"))  // v2
      if (auto v = parse_number(*s)) u.memory_bytes = *v;
    if (auto s = read_text(d + "/cpu.stat"))  // v2
      if (auto v = parse_keyed(*s, "usage_usec")) u.cpu_ns = *v * 1000;
    if (auto s = read_text(d + "/memory.stat")) {
      if (auto v = parse_keyed(*s, "total_cache")) u.memory_cache = *v;  // v1
      else if (auto f = parse_keyed(*s, "file")) u.memory_cache = *f;    // v2
    }
  }
  return u;
}

}  // namespace exg::cgroup
