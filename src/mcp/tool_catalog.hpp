// The tools `exguardian mcp` offers: names (fixed: users' configurations and
// prompts rely on them), descriptions, input and output schemas. tools/list
// publishes these; tools/call checks arguments against the same input schema.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace exg::mcp {

struct ToolDef {
  std::string name, title, description;
  nlohmann::json input_schema, output_schema;
};

const std::vector<ToolDef>& tool_catalog();
const ToolDef* find_tool(const std::string& name);
// The tools/list entry of a tool.
nlohmann::json tool_json(const ToolDef& t);

// Defaults and bounds the tools apply (named in their schemas too).
// Below the 60 s the TypeScript SDK waits for a reply by default: a command killed at its timeout
// still reaches a client that kept its default. Longer runs: timeout_seconds, or start_command.
inline constexpr double kDefaultCommandTimeoutS = 45;
inline constexpr double kMaxCommandTimeoutS = 3600;
inline constexpr size_t kDefaultMaxOutput = 64 * 1024;     // per stream, run_command
inline constexpr size_t kMaxMaxOutput = 4 * 1024 * 1024;
inline constexpr size_t kBackgroundBuffer = 1024 * 1024;   // per stream, start_command, until read
inline constexpr size_t kMaxReadBytes = 1024 * 1024;       // read_file
inline constexpr size_t kMaxWriteBytes = 16 * 1024 * 1024; // write_file (decoded)

}  // namespace exg::mcp
