// exguardian mcp's protocol side: JSON-RPC line framing, the MCP session
// (initialize, tools/list, tools/call, cancellation, ping) against a recording
// tool runner, and the tools' argument checks. Bad input gets one error reply
// naming what is wrong, and the session keeps answering.
#include <gtest/gtest.h>

#include "mcp/jsonrpc.hpp"
#include "mcp/schema_check.hpp"
#include "mcp/server.hpp"
#include "mcp/tool_arguments.hpp"
#include "mcp/tool_catalog.hpp"

using namespace exg::mcp;
using nlohmann::json;

namespace {

// Keeps the calls it gets; the test answers or cancels them.
struct RecordingRunner : ToolRunner {
  std::vector<ToolCallPtr> calls;
  int cancelled = 0;
  void call(ToolCallPtr c) override {
    c->on_cancel = [this] { ++cancelled; };
    calls.push_back(c);
  }
};

struct Session {
  RecordingRunner runner;
  std::vector<json> out;
  Server server{runner, [this](const std::string& line) {
                  ASSERT_EQ(line.back(), '\n');
                  ASSERT_EQ(line.find('\n'), line.size() - 1) << "one message, one line";
                  out.push_back(json::parse(line));
                }};
  json send(const std::string& line) {
    size_t before = out.size();
    server.handle_line(line);
    return out.size() > before ? out.back() : json();
  }
  json call(int id, const std::string& tool, const json& args) {
    return send(json{{"jsonrpc", "2.0"}, {"id", id}, {"method", "tools/call"}, {"params", {{"name", tool}, {"arguments", args}}}}.dump());
  }
};

int code(const json& reply) { return reply.at("error").at("code").get<int>(); }
std::string message(const json& reply) { return reply.at("error").at("message").get<std::string>(); }

}  // namespace

TEST(McpJsonRpc, ParsesRequestsNotificationsAndResponses) {
  auto r = parse_line(R"({"jsonrpc":"2.0","id":"a","method":"ping"})");
  ASSERT_TRUE(r.message);
  EXPECT_EQ(r.message->kind, Message::Kind::Request);
  EXPECT_EQ(r.message->id, "a");
  auto n = parse_line(R"({"jsonrpc":"2.0","method":"notifications/initialized"})" "\r");
  ASSERT_TRUE(n.message);
  EXPECT_EQ(n.message->kind, Message::Kind::Notification);
  auto resp = parse_line(R"({"jsonrpc":"2.0","id":3,"result":{}})");
  ASSERT_TRUE(resp.message);
  EXPECT_EQ(resp.message->kind, Message::Kind::Response);
}

TEST(McpJsonRpc, EachBadLineGetsOneErrorNamingWhatIsWrong) {
  struct Case {
    const char* line;
    int code;
    const char* says;
    json id;
  } cases[] = {
      {"{not json", -32700, "not valid JSON", nullptr},
      {R"([{"jsonrpc":"2.0","id":1,"method":"ping"}])", -32600, "batches", nullptr},
      {R"("text")", -32600, "expected a JSON object", nullptr},
      {R"({"id":1,"method":"ping"})", -32600, "\"jsonrpc\" must be \"2.0\"", 1},
      {R"({"jsonrpc":"2.0","id":{"x":1},"method":"ping"})", -32600, "\"id\" must be a string or an integer", nullptr},
      {R"({"jsonrpc":"2.0","id":2,"method":""})", -32600, "non-empty string", 2},
      {R"({"jsonrpc":"2.0","id":2,"method":"ping","params":5})", -32600, "\"params\" must be an object", 2},
      {R"({"jsonrpc":"2.0","id":2,"method":"ping","extra":1})", -32600, "unknown member \"extra\"", 2},
  };
  for (const auto& c : cases) {
    auto r = parse_line(c.line);
    EXPECT_FALSE(r.message) << c.line;
    ASSERT_TRUE(r.error_reply) << c.line;
    EXPECT_EQ(code(*r.error_reply), c.code) << c.line;
    EXPECT_NE(message(*r.error_reply).find(c.says), std::string::npos) << c.line << " -> " << message(*r.error_reply);
    EXPECT_EQ((*r.error_reply)["id"], c.id) << c.line;
  }
  // Nesting: a line 200 000 levels deep crashed `exguardian mcp` (a stack
  // overflow copying params); it is a parse error now, one level short is not.
  const size_t deep = 200000;
  auto d = parse_line(R"({"jsonrpc":"2.0","id":1,"method":"tools/call","params":)" + std::string(deep, '[') +
                      std::string(deep, ']') + "}");
  ASSERT_TRUE(d.error_reply);
  EXPECT_EQ(code(*d.error_reply), -32700);
  EXPECT_EQ(message(*d.error_reply), "Parse error: the line is nested more than 256 levels deep");
  auto ok = parse_line(R"({"jsonrpc":"2.0","id":1,"method":"x","params":)" + std::string(255, '[') + std::string(255, ']') + "}");
  EXPECT_TRUE(ok.message);
  // A bad notification is not answered (there is no id to answer).
  auto n = parse_line(R"({"jsonrpc":"2.0","method":"x","extra":1})");
  EXPECT_FALSE(n.message);
  EXPECT_FALSE(n.error_reply);
}

TEST(McpJsonRpc, OutputIsOneLineEvenForBinaryBytes) {
  std::string line = to_line(make_result(1, {{"stdout", std::string("a\nb\xff\xfe", 5)}}));
  EXPECT_EQ(line.find('\n'), line.size() - 1);
  EXPECT_TRUE(json::parse(line)["result"]["stdout"].is_string());
}

TEST(McpServer, InitializeNegotiatesTheRevision) {
  Session s;
  auto r = s.send(R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})");
  EXPECT_EQ(r["result"]["protocolVersion"], "2025-06-18");
  EXPECT_TRUE(r["result"]["capabilities"].contains("tools"));
  EXPECT_EQ(r["result"]["serverInfo"]["name"], "exguardian");
  r = s.send(R"({"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"1999-01-01"}})");
  EXPECT_EQ(r["result"]["protocolVersion"], kProtocolVersions[0]) << "an unknown revision: ours, the newest";
  r = s.send(R"({"jsonrpc":"2.0","id":3,"method":"initialize","params":{}})");
  EXPECT_EQ(code(r), -32602);
  EXPECT_NE(message(r).find("protocolVersion"), std::string::npos);
}

TEST(McpServer, ListsEveryToolWithSchemas) {
  Session s;
  auto r = s.send(R"({"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}})");
  auto tools = r["result"]["tools"];
  std::vector<std::string> names;
  for (auto& t : tools) {
    names.push_back(t["name"]);
    EXPECT_EQ(t["inputSchema"]["type"], "object") << t["name"];
    EXPECT_EQ(t["inputSchema"]["additionalProperties"], false) << t["name"];
    EXPECT_EQ(t["outputSchema"]["type"], "object") << t["name"];
  }
  std::vector<std::string> want = {"create_sandbox", "run_command", "start_command", "read_output", "read_file", "write_file",
                                   "list_files", "stat_file", "remove_file", "list_sandboxes", "destroy_sandbox", "evidence"};
  EXPECT_EQ(names, want);
}

TEST(McpServer, BadToolCallsAreProtocolErrorsAndTheSessionGoesOn) {
  Session s;
  struct Case {
    std::string tool;
    json args;
    const char* says;
  } cases[] = {
      {"no_such", json::object(), "Unknown tool: no_such"},
      {"run_command", json::object(), "arguments.sandbox_id: missing"},
      {"run_command", {{"sandbox_id", "s"}}, "exactly one of \"command\""},
      {"run_command", {{"sandbox_id", "s"}, {"command", "x"}, {"argv", {"x"}}}, "exactly one of"},
      {"run_command", {{"sandbox_id", "s"}, {"argv", json::array()}}, "arguments.argv: at least 1 item"},
      {"run_command", {{"sandbox_id", "s"}, {"argv", {""}}}, "arguments.argv[0]: the program must not be empty"},
      {"run_command", {{"sandbox_id", "s"}, {"argv", {"a", 1}}}, "arguments.argv[1]: expected a string"},
      {"run_command", {{"sandbox_id", "s"}, {"command", "x"}, {"timeout_seconds", 0}}, "arguments.timeout_seconds: at least"},
      {"run_command", {{"sandbox_id", "s"}, {"command", "x"}, {"timeout_seconds", "10"}}, "arguments.timeout_seconds: expected a number"},
      {"run_command", {{"sandbox_id", "s"}, {"command", "x"}, {"env", {{"A=B", "c"}}}}, "arguments.env.A=B"},
      {"run_command", {{"sandbox_id", "s"}, {"command", "x"}, {"env", {{"A", 1}}}}, "arguments.env.A: expected a string"},
      {"run_command", {{"sandbox_id", "s"}, {"command", std::string("a\0b", 3)}}, "NUL"},
      {"run_command", {{"sandbox_id", ""}, {"command", "x"}}, "arguments.sandbox_id: must not be empty"},
      {"create_sandbox", {{"layer", "chroot"}}, "arguments.layer: expected one of"},
      {"create_sandbox", {{"memory_mb", 1}}, "arguments.memory_mb: at least 16"},
      {"create_sandbox", {{"allow_domains", "example.com"}}, "arguments.allow_domains: expected an array"},
      {"read_file", {{"sandbox_id", "s"}, {"path", "a"}, {"length", 2 * 1024 * 1024}}, "arguments.length: at most"},
      {"read_file", {{"sandbox_id", "s"}, {"path", "a"}, {"encoding", "latin1"}}, "arguments.encoding: expected one of"},
      {"write_file", {{"sandbox_id", "s"}, {"path", "a"}}, "arguments.content: missing"},
      {"write_file", {{"sandbox_id", "s"}, {"path", "a"}, {"content", "x"}, {"mode", "rwx"}}, "arguments.mode: expected octal"},
      {"write_file", {{"sandbox_id", "s"}, {"path", "a"}, {"content", "%%"}, {"encoding", "base64"}}, "not valid base64"},
      {"read_output", {{"sandbox_id", "s"}, {"pid", 0}}, "arguments.pid: at least 1"},
      {"list_sandboxes", {{"all", true}}, "arguments.all: unknown argument (this tool takes none)"},
      {"stat_file", {{"sandbox_id", "s"}, {"path", "a"}, {"follow", true}}, "arguments.follow: unknown argument (expected: path, sandbox_id)"},
  };
  int id = 1;
  for (const auto& c : cases) {
    auto r = s.call(id, c.tool, c.args);
    ASSERT_TRUE(r.contains("error")) << c.tool << " " << c.args.dump();
    EXPECT_EQ(r["id"], id);
    EXPECT_EQ(code(r), -32602) << c.tool << " " << c.args.dump();
    EXPECT_NE(message(r).find(c.says), std::string::npos) << c.args.dump() << " -> " << message(r);
    ++id;
  }
  EXPECT_TRUE(s.runner.calls.empty()) << "no bad call reaches the runner";
  auto bad_params = s.send(R"({"jsonrpc":"2.0","id":100,"method":"tools/call","params":{"arguments":{}}})");
  EXPECT_EQ(code(bad_params), -32602);
  EXPECT_EQ(code(s.send(R"({"jsonrpc":"2.0","id":101,"method":"resources/list"})")), -32601);
  EXPECT_EQ(s.send(R"({"jsonrpc":"2.0","id":102,"method":"ping"})")["result"], json::object());
}

TEST(McpServer, GoodCallsReachTheRunnerAndRepliesCarryStructuredContent) {
  Session s;
  s.call(1, "run_command", {{"sandbox_id", "s"}, {"argv", {"echo", "hi"}}});
  ASSERT_EQ(s.runner.calls.size(), 1u);
  EXPECT_EQ(command_argv(s.runner.calls[0]->args), (std::vector<std::string>{"echo", "hi"}));
  size_t before = s.out.size();
  s.runner.calls[0]->reply(ToolOutcome::ok({{"exit_code", 0}, {"stdout", "hi\n"}}));
  ASSERT_EQ(s.out.size(), before + 1);
  auto r = s.out.back();
  EXPECT_EQ(r["id"], 1);
  EXPECT_EQ(r["result"]["structuredContent"]["stdout"], "hi\n");
  EXPECT_EQ(r["result"]["isError"], false);
  EXPECT_EQ(r["result"]["content"][0]["type"], "text");
  // A tool that ran but failed: isError, the reason as text.
  s.call(2, "stat_file", {{"sandbox_id", "s"}, {"path", "nope"}});
  s.runner.calls[1]->reply(ToolOutcome::error("stat_file nope: ENOENT"));
  EXPECT_EQ(s.out.back()["result"]["isError"], true);
  EXPECT_EQ(s.out.back()["result"]["content"][0]["text"], "stat_file nope: ENOENT");
  // A second reply to the same call is dropped.
  before = s.out.size();
  s.runner.calls[1]->reply(ToolOutcome::error("again"));
  EXPECT_EQ(s.out.size(), before);
  EXPECT_EQ(command_argv(json{{"command", "ls | wc"}}), (std::vector<std::string>{"/bin/sh", "-c", "ls | wc"}));
}

TEST(McpServer, CancellationStopsTheCallAndDropsItsReply) {
  Session s;
  s.call(7, "run_command", {{"sandbox_id", "s"}, {"command", "sleep 100"}});
  ASSERT_EQ(s.runner.calls.size(), 1u);
  size_t before = s.out.size();
  s.send(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user"}})");
  EXPECT_EQ(s.runner.cancelled, 1);
  EXPECT_EQ(s.server.in_flight(), 0u);
  s.runner.calls[0]->reply(ToolOutcome::ok({{"exit_code", 137}}));
  EXPECT_EQ(s.out.size(), before) << "no reply after a cancel";
  // Unknown ids and bad cancel notifications: nothing happens, nothing is sent.
  s.send(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":12345}})");
  s.send(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":"x"})");
  EXPECT_EQ(s.out.size(), before);
  // An id still in flight cannot be reused.
  s.call(8, "run_command", {{"sandbox_id", "s"}, {"command", "x"}});
  auto dup = s.call(8, "run_command", {{"sandbox_id", "s"}, {"command", "x"}});
  EXPECT_EQ(code(dup), -32600);
}

TEST(McpArguments, Utf8AndModes) {
  EXPECT_TRUE(is_utf8("héllo"));
  EXPECT_FALSE(is_utf8(std::string("\xff\x00", 2)));
  EXPECT_FALSE(is_utf8("\xc0\xaf"));  // overlong
  EXPECT_FALSE(is_utf8("\xed\xa0\x80"));  // a surrogate
  EXPECT_EQ(octal_mode("0755"), 0755u);
  EXPECT_EQ(content_bytes(json{{"content", "AP8="}, {"encoding", "base64"}}), std::string("\x00\xff", 2));
}

TEST(McpArguments, IntegerBoundsAreExact) {
  // fuzz/mcp_tools' bounds check: compared as doubles, 2^63 equalled read_file's maximum INT64_MAX.
  const ToolDef* read = find_tool("read_file");
  ASSERT_NE(read, nullptr);
  auto args = [](json offset) { return json{{"sandbox_id", "s"}, {"path", "p"}, {"offset", offset}}; };
  EXPECT_EQ(argument_error(*read, args(json(uint64_t{1} << 63))).value_or("accepted"), "arguments.offset: at most 9223372036854775807");
  EXPECT_FALSE(argument_error(*read, args(json(INT64_MAX))));
  EXPECT_EQ(argument_error(*read, args(json(-1))).value_or("accepted"), "arguments.offset: at least 0");
  EXPECT_FALSE(argument_error(*read, args(json(0))));
  EXPECT_FALSE(schema_error(json{{"minimum", -5}, {"maximum", uint64_t{1} << 63}}, json(-5), "x"));
  EXPECT_TRUE(schema_error(json{{"minimum", -5}}, json(-6), "x"));
  EXPECT_TRUE(schema_error(json{{"maximum", 1.5}}, json(2), "x"));  // an integer against a fractional bound
}

TEST(McpArguments, IntegerTypeTakesWholeFloats) {
  auto integer = json{{"type", "integer"}};
  EXPECT_FALSE(schema_error(integer, json(3.0), "x"));
  EXPECT_FALSE(schema_error(integer, json(-3.0), "x"));
  EXPECT_FALSE(schema_error(integer, json(1e300), "x"));  // beyond int64_t: every such double is whole
  EXPECT_TRUE(schema_error(integer, json(2.5), "x"));
  EXPECT_TRUE(schema_error(integer, json(-0.5), "x"));
  EXPECT_TRUE(schema_error(integer, json(4503599627370495.5), "x"));  // the largest fraction a double holds
}

