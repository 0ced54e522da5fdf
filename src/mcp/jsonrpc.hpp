// JSON-RPC 2.0 as MCP's stdio transport carries it: one message per line
// (UTF-8 JSON, no embedded newline), requests, notifications and responses.
// Batches are not part of MCP since its 2025-06-18 revision: an array is an
// invalid request. Parsing never throws; every bad line yields the error reply
// the peer is owed (or none, when the line was a notification).
#pragma once
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace exg::mcp {

// JSON-RPC's error codes.
enum class RpcCode : int {
  ParseError = -32700,
  InvalidRequest = -32600,
  MethodNotFound = -32601,
  InvalidParams = -32602,
  InternalError = -32603,
};

struct Message {
  enum class Kind { Request, Notification, Response };
  Kind kind = Kind::Request;
  nlohmann::json id;      // string or integer (requests and responses); null for notifications
  std::string method;     // requests and notifications
  nlohmann::json params;  // object, array or null (absent)
  nlohmann::json result;  // responses
  nlohmann::json error;   // responses: {code, message, data?}, else null
};

struct ParseOutcome {
  std::optional<Message> message;
  // When the line is not a valid message: the error response to send back
  // (id null when the id could not be read), unless it was a notification.
  std::optional<nlohmann::json> error_reply;
};

// One line of the transport, without its newline.
ParseOutcome parse_line(std::string_view line);

nlohmann::json make_result(const nlohmann::json& id, nlohmann::json result);
nlohmann::json make_error(const nlohmann::json& id, RpcCode code, const std::string& message,
                          const nlohmann::json& data = nullptr);
nlohmann::json make_notification(const std::string& method, nlohmann::json params);

// A message as one transport line (ends with '\n'); bytes that are not UTF-8
// (a command's binary output, say) are replaced, never a throw.
std::string to_line(const nlohmann::json& message);

// Lines longer than this are refused (-32600) without being held whole.
inline constexpr size_t kMaxLineBytes = 16 * 1024 * 1024;

}  // namespace exg::mcp
