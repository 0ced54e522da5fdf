// exguardian mcp's session (src/mcp/server.cpp) over the lines an MCP client
// writes: initialize, tools/list, tools/call, cancellation, anything else. A
// stand-in runner answers a call at once (ok or an error, and tries a second
// reply), or holds it (sending progress) until the input ends. Every line the
// server writes is one JSON-RPC message; a request is answered exactly once
// with its own id (a held call when it is answered, unless cancelled first);
// a notification, a response or a blank line is never answered; a bad line
// gets exactly the reply parse_line owes; and the runner sees only calls
// whose arguments conform.
#include <cstdint>
#include <string>
#include <vector>

#include "check.hpp"
#include "mcp/server.hpp"
#include "mcp/tool_arguments.hpp"
#include "mcp/tool_catalog.hpp"

using namespace exg::mcp;

namespace {

struct Runner : ToolRunner {
  uint32_t choice;
  std::vector<ToolCallPtr> held;
  size_t calls = 0;
  explicit Runner(uint8_t seed) : choice(seed) {}
  void call(ToolCallPtr c) override {
    ++calls;
    const ToolDef* tool = find_tool(c->name);
    FUZZ_CHECK(tool != nullptr && !argument_error(*tool, c->args), "the runner sees only calls that conform");
    if (c->name == "run_command" || c->name == "start_command") FUZZ_CHECK(!command_argv(c->args).empty(), "a command to run");
    if (c->name == "write_file") (void)content_bytes(c->args);
    choice = choice * 1103515245u + 12345u;
    switch ((choice >> 16) % 4) {
      case 0:
        c->reply(ToolOutcome::ok({{"done", true}}));
        c->reply(ToolOutcome::error("a second reply"));  // dropped
        break;
      case 1:
        c->reply(ToolOutcome::error("it failed"));
        break;
      default:
        c->on_cancel = [] {};
        c->progress(0.5, "half way");
        held.push_back(c);
    }
  }
};

struct Written {
  std::vector<nlohmann::json> responses, notifications;
};

void check_written(const std::string& line, Written* w) {
  FUZZ_CHECK(!line.empty() && line.back() == '\n' && line.find('\n') == line.size() - 1, "one message, one line");
  auto p = parse_line(std::string_view(line).substr(0, line.size() - 1));
  auto j = nlohmann::json::parse(line, nullptr, false);
  FUZZ_CHECK(j.is_object() && j.value("jsonrpc", "") == "2.0", "the server writes JSON-RPC 2.0");
  if (j.contains("method")) {
    FUZZ_CHECK(p.message && p.message->kind == Message::Kind::Notification && p.message->method == "notifications/progress",
               "the server's only notification is progress");
    w->notifications.push_back(j);
    return;
  }
  FUZZ_CHECK(j.contains("id") && (j.contains("result") != j.contains("error")), "a response has an id and a result or an error");
  if (j.contains("error"))
    FUZZ_CHECK(j["error"]["code"].is_number_integer() && j["error"]["message"].is_string(), "an error is {code, message}");
  w->responses.push_back(j);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  Runner runner(data[0]);
  Written w;
  Server server(runner, [&w](const std::string& line) { check_written(line, &w); }, "fuzzing");
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  while (!in.empty()) {
    size_t nl = in.find('\n');
    std::string_view line = in.substr(0, nl);
    in.remove_prefix(nl == std::string_view::npos ? in.size() : nl + 1);

    size_t responses = w.responses.size(), calls = runner.calls, held = runner.held.size();
    server.handle_line(line);
    size_t answered = w.responses.size() - responses;
    bool blank = line.find_first_not_of(" \t\r") == std::string_view::npos;
    auto p = parse_line(line);
    if (blank || (!p.message && !p.error_reply) || (p.message && p.message->kind != Message::Kind::Request)) {
      FUZZ_CHECK(answered == 0, "a blank line, a notification or a response is not answered");
    } else if (p.error_reply) {
      FUZZ_CHECK(answered == 1 && w.responses.back() == *p.error_reply, "a bad line gets the reply it is owed, once");
    } else {
      bool holding = runner.held.size() > held;
      FUZZ_CHECK(runner.calls - calls <= 1, "a request is at most one call");
      FUZZ_CHECK(answered == (holding ? 0u : 1u), "a request is answered once (a held call when it ends)");
      if (answered) FUZZ_CHECK(w.responses.back()["id"] == p.message->id, "an answer carries its request's id");
    }
  }
  // The held calls end: each one still in flight is answered once.
  size_t in_flight = server.in_flight(), responses = w.responses.size();
  FUZZ_CHECK(in_flight <= runner.held.size(), "only held calls are in flight");
  for (auto& c : runner.held) c->reply(ToolOutcome::ok({{"later", true}}));
  FUZZ_CHECK(w.responses.size() - responses == in_flight, "every call in flight is answered once when it ends");
  FUZZ_CHECK(server.in_flight() == 0, "nothing is in flight after every call ended");
  return 0;
}
