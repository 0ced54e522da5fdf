// The HTTP client side of `exguardian mcp --server`: requests to
// `exguardian serve` (Boost.Beast, over TCP or its unix socket, one
// connection per request), answered whole, or as a Connect-RPC server stream
// whose enveloped messages are handed over as they arrive. Everything runs on
// the session's io_context; a call can be cancelled (its connection closed,
// its callback never called). Failures are data (HttpAnswer), never a throw.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/beast/http/verb.hpp>
#include <nlohmann/json.hpp>

#include "mcp/serve_endpoint.hpp"

namespace exg::mcp {

struct HttpRequest {
  boost::beast::http::verb method = boost::beast::http::verb::get;
  std::string target;  // path and query
  std::vector<std::pair<std::string, std::string>> headers;
  std::string content_type;  // with a body
  std::string body;
  // For the whole exchange, connect to last byte; none: as long as it takes (a background command's stream).
  std::optional<std::chrono::milliseconds> deadline = std::chrono::seconds(120);
};

struct RpcEnd {
  std::string code, message;  // Connect's error code name ("not_found") and message
};

struct HttpAnswer {
  unsigned status = 0;          // 0: no HTTP answer; transport_error says why
  std::string transport_error;  // "cannot connect to unix:/x: Connection refused", "no answer within 120 s", ...
  std::string body;             // a whole answer's body; a stream's only when it is not one (an error answer)
  bool stream_ended = false;    // a stream: its end-of-stream message came
  std::optional<RpcEnd> rpc_error;  // ... carrying this error
};

class HttpCall {
 public:
  virtual ~HttpCall() = default;
  // Closes the connection; the call's callbacks are not called any more.
  virtual void cancel() = 0;
};
using HttpCallPtr = std::shared_ptr<HttpCall>;

class ServeHttp {
 public:
  ServeHttp(boost::asio::io_context& io, ServeEndpoint endpoint) : io_(io), ep_(std::move(endpoint)) {}
  const ServeEndpoint& endpoint() const { return ep_; }
  HttpCallPtr request(HttpRequest r, std::function<void(HttpAnswer)> done);
  // A Connect-RPC server stream: each message (not the end-of-stream one) to on_message, then done.
  HttpCallPtr stream(HttpRequest r, std::function<void(const nlohmann::json&)> on_message, std::function<void(HttpAnswer)> done);

  static constexpr size_t kMaxAnswer = 320 * 1024 * 1024;  // above serve's own download limit (256 MiB)
  static constexpr size_t kMaxMessage = 16 * 1024 * 1024;  // one stream message

 private:
  boost::asio::io_context& io_;
  ServeEndpoint ep_;
};

}  // namespace exg::mcp
