// What a sandbox's cgroup has used so far: CPU time and memory, as serve's
// metrics report them (v1: cpuacct and memory; v2: cpu.stat, memory.current).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace exg::cgroup {

struct Usage {
  std::optional<uint64_t> cpu_ns;  // CPU time of every process, ever (none: no cpu accounting there)
  uint64_t memory_bytes = 0;       // memory charged now, page cache included
  uint64_t memory_cache = 0;       // of which page cache
};

// Read from a cgroup's directories (v1: one per hierarchy; v2: one).
Usage read_usage(const std::vector<std::string>& dirs);

}  // namespace exg::cgroup
