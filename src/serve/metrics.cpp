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
  if (requests.size() > 1000) return;  // bounded: the labels are a fixed set (the route table's and five more), statuses few
  ++requests[route + " " + std::to_string(status)];
}

namespace {
// A label value in the text format: backslash, quote and newline escaped.
std::string label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}
}  // namespace

std::string Metrics::text(size_t sandboxes, size_t paused, uint64_t created, uint64_t failed, uint64_t expired,
                          const std::map<std::string, EgressCounts>& egress, bool cgroup_limits) const {
  std::ostringstream o;
  o << "# HELP exguardian_cgroup_limits 1 when every sandbox gets cgroup limits, 0 under --no-cgroup-limits.\n# TYPE exguardian_cgroup_limits gauge\n"
    << "exguardian_cgroup_limits " << (cgroup_limits ? 1 : 0) << "\n";
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
  o << "# HELP exguardian_egress_decisions_total Egress decisions of the tenant's sandboxes' proxies (their audit logs), by protocol.\n"
       "# TYPE exguardian_egress_decisions_total counter\n";
  for (const auto& [tenant, c] : egress)
    for (const auto& [k, v] : c.decisions)
      o << "exguardian_egress_decisions_total{tenant=\"" << label(tenant) << "\",protocol=\"" << label(k.first) << "\",decision=\""
        << label(k.second) << "\"} " << v << "\n";
  o << "# HELP exguardian_egress_refusals_total Egress refused by the tenant's sandboxes' proxies (all protocols).\n"
       "# TYPE exguardian_egress_refusals_total counter\n";
  for (const auto& [tenant, c] : egress) {
    uint64_t refused = 0;
    for (const auto& [k, v] : c.decisions) refused += k.second == "refused" ? v : 0;
    o << "exguardian_egress_refusals_total{tenant=\"" << label(tenant) << "\"} " << refused << "\n";
  }
  o << "# HELP exguardian_egress_exfiltration_total Secrets' placeholders (or values) refused on their way to another host.\n"
       "# TYPE exguardian_egress_exfiltration_total counter\n";
  for (const auto& [tenant, c] : egress)
    o << "exguardian_egress_exfiltration_total{tenant=\"" << label(tenant) << "\"} " << c.exfiltration << "\n";
  o << "# HELP exguardian_http_requests_total Requests by route and status.\n# TYPE exguardian_http_requests_total counter\n";
  for (const auto& [k, v] : requests) {
    auto sp = k.rfind(' ');
    o << "exguardian_http_requests_total{route=\"" << k.substr(0, sp) << "\",status=\"" << k.substr(sp + 1) << "\"} " << v << "\n";
  }
  return o.str();
}

}  // namespace exg::serve
