// `exguardian serve`'s HTTP/1.1 server (Boost.Beast, one io_context, one
// thread): listens on ADDR:PORT or unix:PATH, reads one request at a time per
// connection within bounded sizes and times, and hands it to a Handler with an
// Exchange through which the answer goes out, whole or streamed (chunked:
// Connect-RPC's server streams). A client that goes away while its answer
// streams is noticed (a read that watches the socket) and reported through
// Exchange::on_close, so a stream's producer stops. With use_tls() a TCP
// listener speaks TLS (1.2 and 1.3, OpenSSL through Boost.Asio's ssl::stream)
// and nothing else: HTTP/1.1 inside each TLS connection, as without.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <boost/asio/io_context.hpp>
#include <boost/beast/http.hpp>

#include "util/error.hpp"

namespace exg::serve {

namespace http = boost::beast::http;
using Request = http::request<http::string_body>;
using Response = http::response<http::string_body>;

struct HttpLimits {
  size_t max_header = 16 * 1024;
  size_t max_body = 1024 * 1024;              // every request but uploads
  size_t max_upload = 100 * 1024 * 1024;      // POST /files
  size_t max_connections = 1024;
  int read_timeout_s = 120;                   // a whole request, once its first byte arrived
  int idle_timeout_s = 300;                   // between requests on a kept-alive connection
};

// One request's answer. Exactly one of respond() or start_stream() ...
// end_stream(); calls after the client left are ignored.
class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual void respond(Response r) = 0;
  // Sends the head with Transfer-Encoding: chunked; the body follows as chunks.
  virtual void start_stream(Response head) = 0;
  virtual void write_chunk(std::string data) = 0;
  virtual void end_stream() = 0;
  // False once the client has gone (or the answer ended).
  virtual bool open() const = 0;
  // Called once when the client goes away before the answer ended.
  std::function<void()> on_close;
  // For the request log: whom the request acted for, set by the handler once it knows.
  std::string log_tenant, log_sandbox;
};
using ExchangePtr = std::shared_ptr<Exchange>;
using Handler = std::function<void(Request&, ExchangePtr)>;

// One request, once its answer is out (or its client gone): what the request log says.
struct Served {
  std::string_view method, path;  // the target without its query (which the log never holds)
  unsigned status = 0;            // 0: the client left before any answer
  double ms = 0;                  // from the request's head to the end of its answer
  std::string_view tenant, sandbox;
  bool client_gone = false;       // the client left before the answer ended
};
using ServedFn = std::function<void(const Served&)>;

class HttpServer {
 public:
  HttpServer(boost::asio::io_context& io, Handler handler, HttpLimits limits, ServedFn served = {});
  ~HttpServer();
  // Before listen(): the listener speaks TLS with this certificate (chain, PEM)
  // and key (PEM). Refused, saying which file and why, when a file cannot be
  // read or parsed, the key is not the certificate's, or the certificate has
  // expired or is not valid yet.
  Result<void> use_tls(const std::string& cert_file, const std::string& key_file);
  // "127.0.0.1:3000", "[::1]:3000" or "unix:/path" (created 0660, must not exist unless a stale socket;
  // not with TLS).
  Result<void> listen(const std::string& address);
  // The bound address (port resolved when 0 was asked), for the ready line.
  std::string bound() const { return bound_; }
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string bound_;
};

// An answer with a JSON body.
Response json_response(http::status status, const std::string& body, unsigned version = 11);

}  // namespace exg::serve
