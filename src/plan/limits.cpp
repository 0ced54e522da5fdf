#include "plan/limits.hpp"

#include <algorithm>
#include <charconv>

#include "util/proc_text.hpp"

namespace exg::plan {

std::optional<uint64_t> parse_memtotal(std::string_view meminfo) {
  size_t at = 0;
  while (at < meminfo.size()) {
    size_t end = meminfo.find('\n', at);
    if (end == std::string_view::npos) end = meminfo.size();
    std::string_view line = meminfo.substr(at, end - at);
    at = end + 1;
    if (!line.starts_with("MemTotal:")) continue;
    line.remove_prefix(9);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(line.data(), line.data() + line.size(), v);
    if (ec != std::errc() || p == line.data()) return std::nullopt;
    std::string_view unit(p, static_cast<size_t>(line.data() + line.size() - p));
    while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
    return v * (unit.starts_with("kB") ? 1024 : 1);
  }
  return std::nullopt;
}

Limits default_limits() {
  Limits l;
  constexpr uint64_t kCap = 8ull << 30;
  // Read with read(2), not through a stream: the streams' set-up was most of this step.
  if (auto total = parse_memtotal(util::read_proc_text("/proc/meminfo"))) {
    uint64_t half = (*total / 2) & ~((1ull << 20) - 1);  // whole MiB
    l.memory_bytes = std::min(half, kCap);
  }
  if (!l.memory_bytes) l.memory_bytes = 2ull << 30;
  l.pids = 4096;
  return l;
}

std::string format_bytes(uint64_t b) {
  constexpr uint64_t K = 1024, M = K * 1024, G = M * 1024;
  if (b != 0 && b % G == 0) return std::to_string(b / G) + "G";
  if (b != 0 && b % M == 0) return std::to_string(b / M) + "M";
  if (b != 0 && b % K == 0) return std::to_string(b / K) + "K";
  return std::to_string(b);
}

}  // namespace exg::plan
