#include "policy/extract_pattern.hpp"

#include <re2/re2.h>

#include <algorithm>

namespace exg::policy {

namespace {

RE2::Options options() {
  RE2::Options o;
  o.set_log_errors(false);        // errors are returned, never written to stderr
  o.set_max_mem(8 << 20);         // a pattern whose program needs more fails to compile
  return o;
}

}  // namespace

std::optional<std::string> extract_pattern_error(std::string_view pattern) {
  if (pattern.size() > kMaxExtractPattern)
    return "the regular expression is " + std::to_string(pattern.size()) + " characters long (at most " +
           std::to_string(kMaxExtractPattern) + ")";
  RE2 re(re2::StringPiece(pattern.data(), pattern.size()), options());
  if (!re.ok()) {
    std::string why = re.error();
    // What ECMAScript or PCRE patterns use and RE2 cannot do (each needs
    // backtracking), named, so that a pattern from elsewhere can be rewritten.
    const auto code = re.error_code();
    if (code == RE2::ErrorBadEscape || code == RE2::ErrorBadPerlOp || code == RE2::ErrorRepeatOp)
      why += " (RE2 syntax: no back-references, no look-ahead or look-behind, no possessive repeats; a named group is "
             "(?P<name>...))";
    return "invalid regular expression \"" + std::string(pattern) + "\": " + why;
  }
  if (re.NumberOfCapturingGroups() < 1) return "needs a capture group: group 1 of each match is the secret's value";
  return std::nullopt;
}

std::vector<std::string> extract_values(std::string_view pattern, std::string_view text, size_t max_values) {
  std::vector<std::string> found;
  RE2 re(re2::StringPiece(pattern.data(), pattern.size()), options());
  if (!re.ok() || re.NumberOfCapturingGroups() < 1) return found;
  const re2::StringPiece all(text.data(), text.size());
  re2::StringPiece m[2];
  for (size_t pos = 0; pos <= all.size() && found.size() < max_values;) {
    if (!re.Match(all, pos, all.size(), RE2::UNANCHORED, m, 2)) break;
    if (m[1].data() != nullptr && !m[1].empty()) {
      std::string v(m[1].data(), m[1].size());
      if (std::find(found.begin(), found.end(), v) == found.end()) found.push_back(std::move(v));
    }
    const size_t end = static_cast<size_t>(m[0].data() - all.data()) + m[0].size();
    pos = m[0].empty() ? end + 1 : end;  // an empty match moves on by one
  }
  return found;
}

}  // namespace exg::policy
