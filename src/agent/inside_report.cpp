#include "agent/inside_report.hpp"

#include <algorithm>

namespace exg::agent {

bool InsideReport::take(const Frame& f) {
  if (f.kind != Kind::Event) return false;
  const auto& h = f.header;
  const std::string ev = h.value("event", "");
  if (ev == "ready" && h.contains("walls") && h["walls"].is_object()) {
    walls_.clear();
    for (const auto& [what, how] : h["walls"].items())
      if (how.is_string()) walls_.push_back(what + ": " + how.get<std::string>());
    return false;
  }
  if (ev != "limit") return false;
  if (h.value("limit", "") == "pids" && h.contains("refused") && h["refused"].is_number_unsigned())
    pids_refused_ = std::max(pids_refused_, h["refused"].get<uint64_t>());
  return true;
}

}  // namespace exg::agent
