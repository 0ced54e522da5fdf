#include "mcp/server.hpp"

#include "mcp/tool_arguments.hpp"
#include "mcp/tool_catalog.hpp"

namespace exg::mcp {

Server::Server(ToolRunner& runner, Writer write, std::string instructions)
    : runner_(runner), write_(std::move(write)), instructions_(std::move(instructions)) {}

void Server::handle_line(std::string_view line) {
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) return;  // blank lines between messages
  auto p = parse_line(line);
  if (!p.message) {
    if (p.error_reply) send(*p.error_reply);
    return;
  }
  const Message& m = *p.message;
  if (m.kind == Message::Kind::Request) return request(m);
  if (m.kind == Message::Kind::Notification) return notification(m);
  // Responses: this server sends no requests, so there is nothing to match; dropped.
}

void Server::request(const Message& m) {
  if (m.method == "initialize") {
    std::string asked;
    if (m.params.is_object()) {
      auto v = m.params.find("protocolVersion");
      if (v == m.params.end() || !v->is_string())
        return send(make_error(m.id, RpcCode::InvalidParams, "initialize: params.protocolVersion: expected a string"));
      asked = v->get<std::string>();
    } else {
      return send(make_error(m.id, RpcCode::InvalidParams, "initialize: params: expected an object"));
    }
    // The client's revision when we speak it; else our newest (the client decides whether to go on).
    std::string version = kProtocolVersions[0];
    for (const char* v : kProtocolVersions)
      if (asked == v) version = v;
    nlohmann::json r = {{"protocolVersion", version},
                        {"capabilities", {{"tools", {{"listChanged", false}}}}},
                        {"serverInfo", {{"name", "exguardian"}, {"title", "ExGuardian sandboxes"}, {"version", "0.1.0"}}}};
    if (!instructions_.empty()) r["instructions"] = instructions_;
    initialized_ = true;
    return send(make_result(m.id, r));
  }
  if (m.method == "ping") return send(make_result(m.id, nlohmann::json::object()));
  if (m.method == "tools/list") {
    if (!m.params.is_null() && !m.params.is_object())
      return send(make_error(m.id, RpcCode::InvalidParams, "tools/list: params: expected an object"));
    nlohmann::json tools = nlohmann::json::array();
    for (const auto& t : tool_catalog()) tools.push_back(tool_json(t));
    return send(make_result(m.id, {{"tools", tools}}));
  }
  if (m.method == "tools/call") return tools_call(m);
  send(make_error(m.id, RpcCode::MethodNotFound, "Method not found: " + m.method));
}

void Server::notification(const Message& m) {
  if (m.method == "notifications/cancelled") {
    if (!m.params.is_object() || !m.params.contains("requestId")) return;  // nothing to answer a notification with
    auto it = calls_.find(m.params["requestId"].dump());
    if (it == calls_.end()) return;  // finished already, or never ours: ignored, as the spec asks
    ToolCallPtr c = it->second;
    calls_.erase(it);  // its reply, should one still come, is dropped
    if (c->on_cancel) {
      auto f = std::move(c->on_cancel);
      c->on_cancel = nullptr;
      f();
    }
  }
  // notifications/initialized and the rest need nothing from us.
}

void Server::tools_call(const Message& m) {
  if (!m.params.is_object()) return send(make_error(m.id, RpcCode::InvalidParams, "tools/call: params: expected an object {name, arguments}"));
  auto n = m.params.find("name");
  if (n == m.params.end() || !n->is_string()) return send(make_error(m.id, RpcCode::InvalidParams, "tools/call: params.name: expected a tool name"));
  const ToolDef* tool = find_tool(n->get<std::string>());
  if (!tool) return send(make_error(m.id, RpcCode::InvalidParams, "Unknown tool: " + n->get<std::string>()));
  nlohmann::json args = nlohmann::json::object();
  if (auto a = m.params.find("arguments"); a != m.params.end() && !a->is_null()) args = *a;
  if (auto why = argument_error(*tool, args))
    return send(make_error(m.id, RpcCode::InvalidParams, tool->name + ": " + *why, {{"tool", tool->name}}));
  std::string key = m.id.dump();
  if (calls_.count(key)) return send(make_error(m.id, RpcCode::InvalidRequest, "request id " + key + " is already in use by a call in flight"));
  auto c = std::make_shared<ToolCall>();
  c->name = tool->name;
  c->args = std::move(args);
  nlohmann::json id = m.id;
  std::weak_ptr<ToolCall> weak = c;
  c->reply = [this, id, key, weak](ToolOutcome o) {
    auto self = weak.lock();
    auto it = calls_.find(key);
    if (!self || it == calls_.end() || it->second != self) return;  // cancelled: no reply, as the spec asks
    calls_.erase(it);
    nlohmann::json result;
    if (o.is_error) {
      result = {{"content", {{{"type", "text"}, {"text", o.text}}}}, {"isError", true}};
    } else {
      // The JSON as text too, for clients that show only content.
      std::string text = o.text.empty() ? o.structured.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) : o.text;
      result = {{"content", {{{"type", "text"}, {"text", text}}}}, {"structuredContent", o.structured}, {"isError", false}};
    }
    send(make_result(id, result));
  };
  if (auto meta = m.params.find("_meta"); meta != m.params.end() && meta->is_object()) {
    auto tok = meta->find("progressToken");
    if (tok != meta->end() && (tok->is_string() || tok->is_number_integer())) {
      nlohmann::json token = *tok;
      c->progress = [this, token, key, weak](double progress, const std::string& message) {
        auto self = weak.lock();
        auto it = calls_.find(key);
        if (!self || it == calls_.end() || it->second != self) return;  // only while the call is in flight
        send(make_notification("notifications/progress", {{"progressToken", token}, {"progress", progress}, {"message", message}}));
      };
    }
  }
  calls_[key] = c;
  runner_.call(c);
}

}  // namespace exg::mcp
