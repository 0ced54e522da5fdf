#include "serve/metrics.hpp"

#include <sstream>

namespace exg::serve {

void Metrics::observe_start(double s) {
  ++start_latency_count;
  start_latency_sum += s;
  for (size_t i = 0; i < kBuckets.size(); ++i)
    if (s <= kBuckets[i]) ++start_latency_buckets[i];
}

void Metrics::count_request(const std::string& route, unsigned status) {
  if (requests.size() > 1000) return;  // bounded: routes are a fixed set, statuses few
  ++requests[route + " " + std::to_string(status)];
}

std::string Metrics::text(size_t sandboxes, size_t paused, uint64_t created, uint64_t failed, uint64_t expired) const {
  std::ostringstream o;
  o << "# HELP exguardian_sandboxes Sandboxes held now (running and paused).\n# TYPE exguardian_sandboxes gauge\n"
    << "exguardian_sandboxes " << sandboxes << "\n";
  o << "# HELP exguardian_sandboxes_paused Sandboxes paused now.\n# TYPE exguardian_sandboxes_paused gauge\n"
    << "exguardian_sandboxes_paused " << paused << "\n";
  o << "# HELP exguardian_sandbox_creates_total Sandboxes that came up.\n# TYPE exguardian_sandbox_creates_total counter\n"
    << "exguardian_sandbox_creates_total " << created << "\n";
  o << "# HELP exguardian_sandbox_create_failures_total Sandboxes that failed to come up.\n# TYPE exguardian_sandbox_create_failures_total counter\n"
    << "exguardian_sandbox_create_failures_total " << failed << "\n";
  o << "# HELP exguardian_sandbox_timeouts_total Sandboxes killed by their timeout.\n# TYPE exguardian_sandbox_timeouts_total counter\n"
    << "exguardian_sandbox_timeouts_total " << expired << "\n";
  o << "# HELP exguardian_auth_failures_total Requests refused for a missing or unknown key or token.\n# TYPE exguardian_auth_failures_total counter\n"
    << "exguardian_auth_failures_total " << auth_failures << "\n";
  o << "# HELP exguardian_quota_refusals_total Creates refused by a quota.\n# TYPE exguardian_quota_refusals_total counter\n"
    << "exguardian_quota_refusals_total " << quota_refusals << "\n";
  o << "# HELP exguardian_commands_started_total Processes started through process.Process/Start.\n# TYPE exguardian_commands_started_total counter\n"
    << "exguardian_commands_started_total " << commands_started << "\n";
  o << "# HELP exguardian_command_start_seconds From a Start call to its process running.\n# TYPE exguardian_command_start_seconds histogram\n";
  for (size_t i = 0; i < kBuckets.size(); ++i)
    o << "exguardian_command_start_seconds_bucket{le=\"" << kBuckets[i] << "\"} " << start_latency_buckets[i] << "\n";
  o << "exguardian_command_start_seconds_bucket{le=\"+Inf\"} " << start_latency_count << "\n"
    << "exguardian_command_start_seconds_sum " << start_latency_sum << "\n"
    << "exguardian_command_start_seconds_count " << start_latency_count << "\n";
  o << "# HELP exguardian_http_requests_total Requests by route and status.\n# TYPE exguardian_http_requests_total counter\n";
  for (const auto& [k, v] : requests) {
    auto sp = k.rfind(' ');
    o << "exguardian_http_requests_total{route=\"" << k.substr(0, sp) << "\",status=\"" << k.substr(sp + 1) << "\"} " << v << "\n";
  }
  return o.str();
}

}  // namespace exg::serve
