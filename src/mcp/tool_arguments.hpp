// A tool call's arguments, checked before any tool runs: the tool's input
// schema first, then what a schema cannot say (command or argv, exactly one;
// an octal mode; base64 that decodes). One error naming the argument.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mcp/tool_catalog.hpp"

namespace exg::mcp {

std::optional<std::string> argument_error(const ToolDef& tool, const nlohmann::json& args);

// run_command / start_command: the argv to start (a shell line becomes /bin/sh -c LINE).
std::vector<std::string> command_argv(const nlohmann::json& args);
// write_file: the bytes to write (args already checked).
std::string content_bytes(const nlohmann::json& args);
// "0755" -> 0755; checked already.
uint32_t octal_mode(const std::string& s);
// 0644 -> "0644": a file mode as the tools report it.
std::string mode_text(uint32_t mode);
// "a/b/c" -> "a/b", "/x" -> "/", "x" -> "" (no directory named).
std::string parent_path(const std::string& p);
// Whether bytes are valid UTF-8 (read_file decides on base64 by it).
bool is_utf8(const std::string& s);

}  // namespace exg::mcp
