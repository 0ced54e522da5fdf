// exguardian mcp's transport (src/mcp/jsonrpc.cpp): one JSON-RPC 2.0 line
// from the MCP client. Any line gives a message, or the one error reply the
// peer is owed (none for a notification), never both and never a throw; a
// reply is itself one line of valid JSON-RPC carrying the request's id (or
// null); a message written back as a line parses to the same message; and
// trailing whitespace changes nothing.
#include <cstdint>
#include <string>

#include "check.hpp"
#include "mcp/jsonrpc.hpp"

using namespace exg::mcp;
using Kind = Message::Kind;

namespace {

bool valid_id(const nlohmann::json& id) { return id.is_string() || id.is_number_integer(); }

// The message as its sender would write it.
nlohmann::json json_of(const Message& m) {
  nlohmann::json j = {{"jsonrpc", "2.0"}};
  if (m.kind != Kind::Notification) j["id"] = m.id;
  if (m.kind == Kind::Response) {
    if (!m.error.is_null()) j["error"] = m.error;
    else j["result"] = m.result;
    return j;
  }
  j["method"] = m.method;
  if (!m.params.is_null()) j["params"] = m.params;
  return j;
}

bool same(const Message& a, const Message& b) {
  return a.kind == b.kind && a.id == b.id && a.method == b.method && a.params == b.params && a.result == b.result && a.error == b.error;
}

bool same(const ParseOutcome& a, const ParseOutcome& b) {
  if (a.message.has_value() != b.message.has_value() || a.error_reply != b.error_reply) return false;
  return !a.message || same(*a.message, *b.message);
}

void check_reply(const nlohmann::json& r, const std::string& line) {
  FUZZ_CHECK(r.is_object() && r.size() == 3 && r.value("jsonrpc", "") == "2.0", "a reply is a JSON-RPC 2.0 object");
  FUZZ_CHECK(r.contains("id") && (r["id"].is_null() || valid_id(r["id"])), "a reply's id is null, a string or an integer");
  const auto& e = r["error"];
  FUZZ_CHECK(e.is_object() && e["code"].is_number_integer() && e["message"].is_string() && !e["message"].get<std::string>().empty(),
             "a reply is an error {code, message}");
  int code = e["code"].get<int>();
  FUZZ_CHECK(code == static_cast<int>(RpcCode::ParseError) || code == static_cast<int>(RpcCode::InvalidRequest),
             "a bad line is a parse error or an invalid request");
  // The id a reply carries is the line's.
  if (!r["id"].is_null()) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    FUZZ_CHECK(j.is_object() && j.contains("id") && j["id"] == r["id"], "a reply carries the request's own id");
  }
  std::string out = to_line(r);
  FUZZ_CHECK(out.back() == '\n' && out.find('\n') == out.size() - 1, "a reply is one line");
  if (r["id"].is_null()) return;  // a response with a null id is not one a client may send
  auto back = parse_line(std::string_view(out).substr(0, out.size() - 1));
  FUZZ_CHECK(back.message && back.message->kind == Kind::Response && back.message->id == r["id"] && back.message->error == e,
             "a reply reads back as the response it is");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string line(reinterpret_cast<const char*>(data), size);
  auto p = parse_line(line);
  FUZZ_CHECK(!(p.message && p.error_reply), "a message or an error reply, not both");
  if (p.error_reply) check_reply(*p.error_reply, line);
  if (!p.message && !p.error_reply) {
    // Silence is only for what could not be answered: a notification, or a response of the peer's.
    auto j = nlohmann::json::parse(line, nullptr, false);
    FUZZ_CHECK(j.is_object(), "a line that is not a JSON object is always answered");
  }
  if (p.message) {
    const Message& m = *p.message;
    switch (m.kind) {
      case Kind::Request:
        FUZZ_CHECK(valid_id(m.id) && !m.method.empty(), "a request has an id and a method");
        break;
      case Kind::Notification:
        FUZZ_CHECK(m.id.is_null() && !m.method.empty(), "a notification has a method and no id");
        break;
      case Kind::Response:
        FUZZ_CHECK(valid_id(m.id) && m.method.empty(), "a response has an id and no method");
        FUZZ_CHECK(m.result.is_null() || m.error.is_null(), "a response has a result or an error");
        break;
    }
    FUZZ_CHECK(m.params.is_null() || m.params.is_object() || m.params.is_array(), "params are structured");
    std::string again = to_line(json_of(m));
    auto back = parse_line(std::string_view(again).substr(0, again.size() - 1));
    FUZZ_CHECK(back.message && same(*back.message, m), "a message written back parses to the same message");
  }
  // Trailing whitespace (a CRLF client) changes nothing.
  FUZZ_CHECK(same(parse_line(line + " \t\r"), p), "trailing whitespace changes nothing");
  return 0;
}
