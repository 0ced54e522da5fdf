// Connect-RPC (connectrpc.com/docs/protocol) with the JSON codec, as envd
// speaks it and the e2b SDK calls it: unary calls are a POST of one JSON
// object (Content-Type application/json), answered with one JSON object or an
// error {"code": "not_found", "message": ...} under the matching HTTP status;
// server streams take and give enveloped messages (Content-Type
// application/connect+json; each a flags byte, a 4-byte big-endian length and
// the JSON), the last one flagged 0x02 carrying {} or {"error": {...}}.
// Protobuf's JSON mapping: lowerCamelCase names (the proto names accepted
// too), bytes as base64, enums by name, timestamps in RFC 3339.
#pragma once
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/http_server.hpp"
#include "util/base64.hpp"

namespace exg::serve::rpc {

enum class Code {
  Canceled, Unknown, InvalidArgument, DeadlineExceeded, NotFound, AlreadyExists, PermissionDenied,
  ResourceExhausted, FailedPrecondition, Aborted, OutOfRange, Unimplemented, Internal, Unavailable,
  DataLoss, Unauthenticated,
};
const char* code_name(Code c);
http::status http_status(Code c);
// The code an agent errno stands for (ENOENT -> not_found, EEXIST -> already_exists, ...).
Code code_of_errno(const std::string& errno_name);

struct RpcError {
  Code code;
  std::string message;
};

// Is this a streaming call (application/connect+json) or a unary one (application/json)?
bool is_stream_request(const Request& req);
// The request's one message, or the error to answer with.
std::optional<nlohmann::json> read_message(const Request& req, RpcError* err);

// A client stream's messages (application/connect+json: every envelope of the
// body, in order; each a JSON object, none flagged), or the error to answer with.
std::optional<std::vector<nlohmann::json>> read_messages(const Request& req, RpcError* err, size_t max_messages);

Response unary_ok(const nlohmann::json& msg);
Response unary_error(const RpcError& e);

// One server stream over an Exchange: begin() sends the head, send() one
// message, end() the end-of-stream message (with an error or not).
class ServerStream {
 public:
  explicit ServerStream(ExchangePtr ex) : ex_(std::move(ex)) {}
  void begin();
  void send(const nlohmann::json& msg);
  void end(const std::optional<RpcError>& err = std::nullopt);
  bool open() const { return ex_->open() && !ended_; }
  Exchange& exchange() { return *ex_; }

 private:
  ExchangePtr ex_;
  bool begun_ = false, ended_ = false;
};

std::string envelope(const std::string& json, uint8_t flags);

// A field by its JSON (lowerCamelCase) or proto (snake_case) name.
const nlohmann::json* field(const nlohmann::json& msg, const char* camel, const char* snake = nullptr);

using util::base64_encode;  // util/base64.hpp
std::optional<std::string> base64_decode(const std::string& text);  // standard or URL alphabet, padding optional

// RFC 3339 in UTC with nanoseconds ("2026-12-01T13:15:34.123456789Z").
std::string rfc3339(int64_t seconds, int64_t nanos = 0);
std::string rfc3339(std::chrono::system_clock::time_point t);
// "2026-12-06T21:00:00.123Z" (or an offset, +01:00) -> the time; nullopt if not that shape.
std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view s);

// The Connect-Timeout-Ms header, if any (a malformed one is ignored as absent).
std::optional<std::chrono::milliseconds> timeout_of(const Request& req);

}  // namespace exg::serve::rpc
