#include "mcp/jsonrpc.hpp"

#include "util/json_parse.hpp"

namespace exg::mcp {

namespace {

bool valid_id(const nlohmann::json& id) { return id.is_string() || id.is_number_integer(); }

ParseOutcome invalid(const nlohmann::json& id, const std::string& why, bool reply = true) {
  ParseOutcome o;
  if (reply) o.error_reply = make_error(id, RpcCode::InvalidRequest, "Invalid Request: " + why);
  return o;
}

}  // namespace

ParseOutcome parse_line(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
  if (line.size() > kMaxLineBytes) return invalid(nullptr, "the message is longer than 16 MiB");
  std::string why;
  auto j = parse_json(line, &why);
  if (j.is_discarded()) {
    ParseOutcome o;
    o.error_reply = make_error(nullptr, RpcCode::ParseError, "Parse error: the line is " + why);
    return o;
  }
  if (j.is_array()) return invalid(nullptr, "batches (JSON arrays) are not part of MCP since its 2025-06-18 revision");
  if (!j.is_object()) return invalid(nullptr, "expected a JSON object");
  auto jv = j.find("jsonrpc");
  nlohmann::json id = nullptr;
  bool has_id = false;
  if (auto it = j.find("id"); it != j.end()) {
    has_id = true;
    if (valid_id(*it)) id = *it;
  }
  if (jv == j.end() || *jv != "2.0") return invalid(id, "\"jsonrpc\" must be \"2.0\"");
  if (has_id && !valid_id(j["id"])) return invalid(nullptr, "\"id\" must be a string or an integer");
  for (auto& [k, v] : j.items())
    if (k != "jsonrpc" && k != "id" && k != "method" && k != "params" && k != "result" && k != "error")
      return invalid(id, "unknown member \"" + k + "\"", has_id);

  Message m;
  m.id = id;
  if (auto me = j.find("method"); me != j.end()) {
    if (!me->is_string() || me->get<std::string>().empty()) return invalid(id, "\"method\" must be a non-empty string", has_id);
    if (j.contains("result") || j.contains("error")) return invalid(id, "a request carries no \"result\" or \"error\"", has_id);
    m.method = me->get<std::string>();
    m.kind = has_id ? Message::Kind::Request : Message::Kind::Notification;
    if (auto p = j.find("params"); p != j.end()) {
      if (!p->is_object() && !p->is_array()) return invalid(id, "\"params\" must be an object", has_id);
      m.params = *p;
    }
    ParseOutcome o;
    o.message = std::move(m);
    return o;
  }
  // A response (to a request of ours: this server sends none, but a client may answer a ping).
  bool has_result = j.contains("result"), has_error = j.contains("error");
  if (!has_id || has_result == has_error) return invalid(id, "expected \"method\" (a request) or one of \"result\"/\"error\" with an \"id\"", false);
  m.kind = Message::Kind::Response;
  if (has_result) m.result = j["result"];
  else m.error = j["error"];
  ParseOutcome o;
  o.message = std::move(m);
  return o;
}

nlohmann::json make_result(const nlohmann::json& id, nlohmann::json result) {
  return {{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

nlohmann::json make_error(const nlohmann::json& id, RpcCode code, const std::string& message, const nlohmann::json& data) {
  nlohmann::json e = {{"code", static_cast<int>(code)}, {"message", message}};
  if (!data.is_null()) e["data"] = data;
  return {{"jsonrpc", "2.0"}, {"id", id}, {"error", std::move(e)}};
}

nlohmann::json make_notification(const std::string& method, nlohmann::json params) {
  nlohmann::json n = {{"jsonrpc", "2.0"}, {"method", method}};
  if (!params.is_null()) n["params"] = std::move(params);
  return n;
}

std::string to_line(const nlohmann::json& message) {
  return message.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace exg::mcp
