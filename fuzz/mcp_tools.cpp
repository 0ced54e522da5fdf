// exguardian mcp's tool-call arguments (src/mcp/tool_arguments.cpp and
// schema_check.cpp): what the model asks a tool to do, checked before any
// tool runs. The first byte picks the tool, the rest is the arguments' JSON.
// Any arguments give nothing (they conform) or one error naming the
// argument, never a throw; what conforms is what the tools then read without
// a throw: an argv with a program, a content within the write limit, a mode
// of at most 07777, integers within their schema's bounds. Also is_utf8 (which
// decides read_file's encoding) agrees with nlohmann's UTF-8 check.
#include <cstdint>
#include <string>

#include "check.hpp"
#include "mcp/schema_check.hpp"
#include "mcp/tool_arguments.hpp"
#include "mcp/tool_catalog.hpp"
#include "serve/connect_rpc.hpp"

using namespace exg::mcp;

namespace {

// Integer arguments within their schema's bounds, compared as integers (no rounding through double).
void check_integers(const nlohmann::json& schema, const nlohmann::json& args) {
  for (auto& [k, v] : args.items()) {
    const auto& props = schema["properties"];
    if (!props.contains(k) || props[k].value("type", "") != "integer" || !v.is_number_integer()) continue;
    const auto& s = props[k];
    if (v.is_number_unsigned()) {
      if (s.contains("maximum")) FUZZ_CHECK(s["maximum"].get<int64_t>() >= 0 && v.get<uint64_t>() <= s["maximum"].get<uint64_t>(),
                                           "an accepted integer is at most its maximum");
    } else {
      if (s.contains("maximum")) FUZZ_CHECK(v.get<int64_t>() <= s["maximum"].get<int64_t>(), "an accepted integer is at most its maximum");
      if (s.contains("minimum")) FUZZ_CHECK(v.get<int64_t>() >= s["minimum"].get<int64_t>(), "an accepted integer is at least its minimum");
    }
  }
}

void check_utf8(const std::string& s) {
  bool strict_ok = true;
  try {
    (void)nlohmann::json(s).dump();
  } catch (const nlohmann::json::type_error&) {
    strict_ok = false;
  }
  FUZZ_CHECK(is_utf8(s) == strict_ok, "is_utf8 agrees with nlohmann's UTF-8 check");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const auto& tools = tool_catalog();
  const ToolDef& tool = tools[data[0] % tools.size()];
  std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  check_utf8(text);
  auto args = nlohmann::json::parse(text, nullptr, false);
  if (args.is_discarded()) return 0;

  auto err = argument_error(tool, args);
  if (err) {
    FUZZ_CHECK(err->starts_with("arguments") && err->size() > 10, "an error names the argument and says why");
    return 0;
  }
  FUZZ_CHECK(args.is_object() && !schema_error(tool.input_schema, args, "arguments"), "what is accepted conforms to the schema");
  check_integers(tool.input_schema, args);
  if (tool.name == "run_command" || tool.name == "start_command") {
    auto argv = command_argv(args);
    FUZZ_CHECK(!argv.empty() && !argv[0].empty(), "a command has a program");
    if (args.contains("command")) FUZZ_CHECK(argv.size() == 3 && argv[0] == "/bin/sh" && args["command"] == argv[2], "a shell line runs under sh -c");
    if (auto env = args.find("env"); env != args.end())
      for (auto& [k, v] : env->items())
        FUZZ_CHECK(!k.empty() && k.find_first_of(std::string("=\0", 2)) == std::string::npos && v.is_string(),
                   "an env entry is NAME (no '=' or NUL) -> string");
  }
  if (tool.name == "write_file") {
    std::string bytes = content_bytes(args);
    FUZZ_CHECK(bytes.size() <= kMaxWriteBytes, "a write is within the limit");
    if (args.value("encoding", "utf8") == "base64")
      FUZZ_CHECK(exg::serve::rpc::base64_decode(exg::serve::rpc::base64_encode(bytes)) == bytes, "base64 content is bytes");
    else FUZZ_CHECK(args["content"] == bytes, "utf8 content is written as given");
    if (args.contains("mode")) FUZZ_CHECK(octal_mode(args["mode"].get<std::string>()) <= 07777, "a mode is permission bits");
  }
  return 0;
}
