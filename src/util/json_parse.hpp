// JSON that crosses a trust boundary (a client's request or line, an agent's
// frame, a server's answer, a file a user or an engine wrote) is parsed here,
// with a bound on its nesting. nlohmann's parser itself is iterative, but
// copying, comparing, dumping or walking a value recurses once per level: a
// 1.2 MB line nested 200 000 deep crashed `exguardian mcp` (a stack overflow).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace exg {

// Deeper than any document ExGuardian reads (policies, OCI configs, E2B's and
// MCP's messages nest a dozen levels at most).
inline constexpr size_t kMaxJsonNesting = 256;

// How deep `text` nests arrays and objects (brackets inside strings do not
// count); stops counting past `limit`. For any text, valid JSON or not.
size_t json_depth(std::string_view text, size_t limit = kMaxJsonNesting);

// The value, or a discarded one (is_discarded()) when `text` is not JSON or
// nests deeper than kMaxJsonNesting; *why then says which ("not valid JSON",
// "nested more than 256 levels deep").
// comments: // and /* */ comments are skipped (JSONC: VS Code's files).
nlohmann::json parse_json(std::string_view text, std::string* why = nullptr, bool comments = false);

}  // namespace exg
