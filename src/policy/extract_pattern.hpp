// A secret's `extract` pattern: checked when the policy is loaded, matched
// against the secret's source when the plan is made. A policy can come with
// the project (.exguardian.json) and the source can be any file of up to
// 1 MiB, so neither the pattern nor the text may cost more than linear time,
// a bounded amount of memory, or any stack: RE2 (no backtracking, no
// recursion) is used, not std::regex, whose libstdc++ matcher recursed once
// per character (a stack overflow at a few tens of thousands) and backtracks
// exponentially. RE2's syntax is Perl's without back-references and
// look-around; what it cannot do is an error when the policy is loaded.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace exg::policy {

inline constexpr size_t kMaxExtractPattern = 1024;  // characters of a pattern

// Why `pattern` cannot be an extract pattern (too long, not RE2 syntax, no
// capture group), or nothing.
std::optional<std::string> extract_pattern_error(std::string_view pattern);

// The distinct non-empty values of group 1 over the pattern's successive
// matches in `text`, in order of first appearance; at most `max_values`
// (the caller needs to know only whether there is more than one). The
// pattern must have passed extract_pattern_error.
std::vector<std::string> extract_values(std::string_view pattern, std::string_view text, size_t max_values);

}  // namespace exg::policy
