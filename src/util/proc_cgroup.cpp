#include "util/proc_cgroup.hpp"

namespace exg::util {

std::vector<ProcCgroup> parse_proc_cgroup(std::string_view text) {
  std::vector<ProcCgroup> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    auto a = line.find(':');
    if (a == std::string_view::npos) continue;
    auto b = line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    ProcCgroup c;
    c.hierarchy = line.substr(0, a);
    std::string_view ctrls = line.substr(a + 1, b - a - 1);
    while (!ctrls.empty()) {
      auto comma = ctrls.find(',');
      auto one = ctrls.substr(0, comma);
      if (!one.empty()) c.controllers.emplace_back(one);
      if (comma == std::string_view::npos) break;
      ctrls.remove_prefix(comma + 1);
    }
    c.path = line.substr(b + 1);
    out.push_back(std::move(c));
  }
  return out;
}

std::optional<std::string> cgroup_path_of(const std::vector<ProcCgroup>& lines, std::string_view ctrl) {
  for (const auto& l : lines) {
    if (ctrl.empty()) {
      if (l.v2()) return l.path;
      continue;
    }
    for (const auto& c : l.controllers)
      if (c == ctrl) return l.path;
  }
  return std::nullopt;
}

}  // namespace exg::util
