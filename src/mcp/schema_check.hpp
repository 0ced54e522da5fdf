// Checks a tool's arguments against its input schema: the subset of JSON
// Schema the tools' schemas use (type, properties, required,
// additionalProperties false, items, enum, minimum/maximum, minLength/
// maxLength, maxItems, pattern-free). One schema is both what tools/list
// publishes and what a call is checked by, so they cannot disagree.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace exg::mcp {

// The first thing wrong with `value`, naming where ("arguments.argv[2]:
// expected a string"); nothing when it conforms.
std::optional<std::string> schema_error(const nlohmann::json& schema, const nlohmann::json& value, const std::string& where);

}  // namespace exg::mcp
