#include "util/json_parse.hpp"

namespace exg {

size_t json_depth(std::string_view text, size_t limit) {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > deepest && (deepest = depth) > limit) return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) --depth;
  }
  return deepest;
}

nlohmann::json parse_json(std::string_view text, std::string* why, bool comments) {
  if (json_depth(text) > kMaxJsonNesting) {
    if (why) *why = "nested more than " + std::to_string(kMaxJsonNesting) + " levels deep";
    return nlohmann::json(nlohmann::json::value_t::discarded);
  }
  auto j = nlohmann::json::parse(text, nullptr, false, comments);
  if (j.is_discarded() && why) *why = "not valid JSON";
  return j;
}

}  // namespace exg
