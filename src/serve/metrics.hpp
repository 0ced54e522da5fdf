// The server's own figures, in Prometheus' text format at GET /metrics.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <string>

namespace exg::serve {

// Egress decisions of a tenant's sandboxes, counted from their audit logs
// (the supervisors' proxies write one line per decision): (protocol,
// decision) -> lines, and placeholders refused as exfiltration.
struct EgressCounts {
  std::map<std::pair<std::string, std::string>, uint64_t> decisions;
  uint64_t exfiltration = 0;
};

struct Metrics {
  // "label status" -> count. A label is a route's (route_table(): "POST /sandboxes/{sandboxID}/pause",
  // "envd POST /process.Process/Start") or what answered without one: auth (no key), unknown (no such
  // endpoint), envd (the sandbox named is not the caller's), envd unknown, error (a malformed body).
  std::map<std::string, uint64_t> requests;
  uint64_t auth_failures = 0;
  uint64_t quota_refusals = 0;
  uint64_t commands_started = 0;
  // Seconds from a Start call to the process running, as a histogram.
  static constexpr std::array<double, 10> kBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5};
  std::array<uint64_t, kBuckets.size()> start_latency_buckets{};
  uint64_t start_latency_count = 0;
  double start_latency_sum = 0;
  void observe_start(double seconds);
  void count_request(const std::string& route, unsigned status);
  // Gauges and counters owned by others are passed in.
  std::string text(size_t sandboxes, size_t paused, uint64_t created, uint64_t failed, uint64_t expired,
                   const std::map<std::string, EgressCounts>& egress, bool cgroup_limits) const;
};

}  // namespace exg::serve
