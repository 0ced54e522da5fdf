#include "util/layer_kind.hpp"

#include <algorithm>
#include <string>
#include <utility>

namespace exg::layer {

namespace {

constexpr std::pair<Kind, std::string_view> kTable[] = {
    {Kind::Process, "process"},
    {Kind::Container, "container"},
    {Kind::Gvisor, "gvisor"},
    {Kind::Microvm, "microvm"},
    {Kind::Landlock, "landlock"},
};

}  // namespace

std::string_view name(Kind k) {
  for (const auto& [kind, n] : kTable)
    if (kind == k) return n;
  return "?";
}

std::optional<Kind> parse_kind(std::string_view n) {
  for (const auto& [kind, name] : kTable)
    if (name == n) return kind;
  return std::nullopt;
}

const std::vector<Kind>& all_kinds() {
  static const std::vector<Kind> all = [] {
    std::vector<Kind> v;
    for (const auto& e : kTable) v.push_back(e.first);
    return v;
  }();
  return all;
}

const std::vector<Kind>& strongest_first() {
  static const std::vector<Kind> order = {Kind::Microvm, Kind::Gvisor, Kind::Container, Kind::Process,
                                             Kind::Landlock};
  return order;
}

bool at_least(Kind a, Kind b) {
  const auto& o = strongest_first();
  auto pos = [&](Kind k) { return std::find(o.begin(), o.end(), k) - o.begin(); };
  return pos(a) <= pos(b);
}

std::vector<std::string_view> all_names() {
  std::vector<std::string_view> v;
  for (const auto& e : kTable) v.push_back(e.second);
  return v;
}

std::string names_text(const std::vector<Kind>& kinds, std::string_view last_joiner) {
  std::string out;
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (i) out += i + 1 == kinds.size() ? last_joiner : std::string_view(", ");
    out += name(kinds[i]);
  }
  return out;
}

}  // namespace exg::layer
