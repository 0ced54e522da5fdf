// What a sandbox may use: plain data of the Plan, enforced by the layers
// (cgroup/cgroup.cpp, rlimits, the OCI spec's resources).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace exg::plan {

struct Limits {
  std::optional<uint64_t> memory_bytes;  // v1 memory.limit_in_bytes (+memsw); v2 memory.max (+swap.max 0)
  std::optional<uint32_t> pids;          // pids.max
  std::optional<double> cpus;            // v1 cfs quota/period (100000); v2 cpu.max
  bool explicit_memory = false, explicit_pids = false, explicit_cpus = false;
  // The microVM layer's scratch disk as guest root (microvm/scratch_disk.hpp);
  // unset: its default; 0: none.
  std::optional<uint64_t> scratch_disk_bytes;
};

// The defaults: memory half of RAM (whole MiB, at most 8G; 2G when RAM is
// unknown), 4096 pids, no cpu limit.
Limits default_limits();
// "512M", "1G", "1536M", "1000": the largest unit that divides it.
std::string format_bytes(uint64_t bytes);
// MemTotal of /proc/meminfo, in bytes.
std::optional<uint64_t> parse_memtotal(std::string_view meminfo);

}  // namespace exg::plan
