// JSON parsing that remembers where every key and value was written, so that
// policy errors can say "file:line:column". nlohmann's DOM parser forgets
// positions, so we drive its SAX parser and build the document ourselves.
#pragma once
#include <cstddef>
#include <expected>
#include <string>
#include <string_view>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace exg::policy {

struct TextPos {
  int line = 0;    // 1-based
  int column = 0;  // 1-based, in UTF-8 code points
};

// Byte offset (0-based) -> line:column. An offset at or past the end points
// just after the last character.
TextPos offset_to_pos(std::string_view text, std::size_t offset);

// RFC 6901 escaping of one reference token ("a/b" -> "a~1b").
std::string json_pointer_token(std::string_view key);

struct PositionedJson {
  nlohmann::ordered_json root;  // ordered: we report the first error in document order
  // Keyed by JSON pointer ("" is the root, "/network/allowedDomains/0").
  std::unordered_map<std::string, TextPos> value_pos;
  std::unordered_map<std::string, TextPos> key_pos;  // object members only
};

struct JsonError {
  std::string message;  // without position
  TextPos pos;
};

// Strict JSON (no comments, no trailing commas); duplicate keys are an error.
std::expected<PositionedJson, JsonError> parse_json_with_positions(std::string_view text);

}  // namespace exg::policy
