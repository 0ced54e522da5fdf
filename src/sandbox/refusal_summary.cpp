#include "sandbox/refusal_summary.hpp"

#include <algorithm>
#include <utility>

namespace exg::sandbox {

namespace {

constexpr size_t kListed = 5;  // entries per line; the rest are counted

std::string count_of(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// "a x2 (why), b x1": most refused first, cut at kListed.
template <typename Map>
std::string most_first(const Map& counts, const std::map<std::string, std::string>& why = {}) {
  std::vector<std::pair<uint64_t, std::string>> v;
  for (const auto& [k, n] : counts) v.emplace_back(n, k);
  std::stable_sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.first > b.first; });
  std::string s;
  for (size_t i = 0; i < v.size() && i < kListed; ++i) {
    s += (i ? ", " : "") + v[i].second + " x" + std::to_string(v[i].first);
    if (auto w = why.find(v[i].second); w != why.end()) s += " (" + w->second + ")";
  }
  if (v.size() > kListed) s += ", and " + std::to_string(v.size() - kListed) + " more";
  return s;
}

}  // namespace

std::vector<std::string> refusal_summary(const RunRefusals& r) {
  std::vector<std::string> out;
  if (!r.any()) return out;
  out.push_back("refused in this run (each one: -v or --audit-log; no summary: --quiet):");
  if (r.egress) {
    std::string l = "  egress: " + count_of(r.egress, "refusal", "refusals");
    if (!r.hosts.empty()) l += ": " + most_first(r.hosts, r.host_rules);
    out.push_back(l);
  }
  if (!r.syscalls.empty()) {
    size_t n = 0;
    for (const auto& [name, c] : r.syscalls) n += c;
    out.push_back("  syscalls: " + count_of(n, "refused", "refused") + ": " + most_first(r.syscalls));
  }
  if (!r.planted.empty()) {
    std::string l = "  planted files: " + count_of(r.planted.size(), "quarantined", "quarantined") + ": ";
    for (size_t i = 0; i < r.planted.size() && i < kListed; ++i) l += (i ? ", " : "") + r.planted[i];
    if (r.planted.size() > kListed) l += ", and " + std::to_string(r.planted.size() - kListed) + " more";
    out.push_back(l);
  }
  if (!r.unix_sockets.empty()) {
    size_t n = 0;
    for (const auto& [path, c] : r.unix_sockets) n += c;
    out.push_back("  unix sockets bound outside the sandbox: " + count_of(n, "connection refused", "connections refused") +
                  ": " + most_first(r.unix_sockets));
  }
  if (r.setid) out.push_back("  set-id files: " + std::to_string(r.setid) + " (bits removed, or not checked: see above)");
  return out;
}

}  // namespace exg::sandbox
