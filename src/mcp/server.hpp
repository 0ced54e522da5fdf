// The MCP session over one transport (stdio): the lifecycle (initialize,
// notifications/initialized, ping), tools/list, tools/call and cancellation
// (notifications/cancelled), on JSON-RPC 2.0 lines. What a tool does is the
// ToolRunner's (the sandboxes); this class checks every call's name and
// arguments first (the tools' input schemas), so a runner sees only calls
// that conform. Bad input of any kind gets one error reply naming what is
// wrong, and the session goes on.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "mcp/jsonrpc.hpp"

namespace exg::mcp {

// The MCP revisions this server speaks, newest first (the TypeScript SDK 1.x's list).
inline constexpr const char* kProtocolVersions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};

// A tool call's outcome: structured content (matching the tool's output
// schema) or an error the model reads (isError: the call ran but failed).
struct ToolOutcome {
  nlohmann::json structured;  // object; ignored when is_error
  std::string text;           // the content's text; for a success, empty means structured's JSON
  bool is_error = false;
  static ToolOutcome ok(nlohmann::json s) { return {std::move(s), "", false}; }
  static ToolOutcome error(std::string why) { return {nullptr, std::move(why), true}; }
};

// One call in flight: reply once; cancel() may come first (the client gave up:
// stop the work; a reply after it is dropped).
struct ToolCall {
  std::string name;
  nlohmann::json args;
  std::function<void(ToolOutcome)> reply;
  // Set by the runner when the work can be stopped early.
  std::function<void()> on_cancel;
  // notifications/progress for this call, when the client asked for them (a progressToken); else a no-op.
  std::function<void(double progress, const std::string& message)> progress = [](double, const std::string&) {};
};
using ToolCallPtr = std::shared_ptr<ToolCall>;

class ToolRunner {
 public:
  virtual ~ToolRunner() = default;
  virtual void call(ToolCallPtr c) = 0;
};

class Server {
 public:
  using Writer = std::function<void(const std::string& line)>;
  Server(ToolRunner& runner, Writer write, std::string instructions = {});
  void handle_line(std::string_view line);
  size_t in_flight() const { return calls_.size(); }
  bool initialized() const { return initialized_; }

 private:
  ToolRunner& runner_;
  Writer write_;
  std::string instructions_;
  bool initialized_ = false;
  std::map<std::string, ToolCallPtr> calls_;  // by the request id's JSON text

  void send(const nlohmann::json& m) { write_(to_line(m)); }
  void request(const Message& m);
  void notification(const Message& m);
  void tools_call(const Message& m);
};

}  // namespace exg::mcp
