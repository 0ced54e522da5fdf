#include "serve/http_server.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <optional>
#include <sstream>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>

namespace exg::serve {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using unix_sock = asio::local::stream_protocol;
using tls_stream = asio::ssl::stream<tcp::socket>;

Response json_response(http::status status, const std::string& body, unsigned version) {
  Response r{status, version};
  r.set(http::field::content_type, "application/json");
  r.body() = body;
  r.prepare_payload();
  return r;
}

namespace {

std::string serialize_head(Response& r) {
  http::response_serializer<http::string_body> sr{r};
  std::ostringstream os;
  os << r.base();
  return os.str();
}

std::string serialize(Response& r) {
  std::ostringstream os;
  os << r;
  return os.str();
}

struct Shared {
  Handler handler;
  HttpLimits limits;
  ServedFn served;
  size_t connections = 0;
};

using Clock = std::chrono::steady_clock;

template <class S>
std::string_view sv(const S& s) { return {s.data(), s.size()}; }

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// The target without its query, at most 200 bytes: held by value (no allocation per request).
struct LoggedPath {
  char text[200];
  size_t len = 0;
  explicit LoggedPath(std::string_view target) {
    target = target.substr(0, target.find('?'));
    len = std::min(target.size(), sizeof text);
    target.copy(text, len);
  }
  std::string_view view() const { return {text, len}; }
};

// The connection's socket itself (for a TLS stream: the TCP socket under it):
// what is shut down, closed and cancelled.
template <class Socket>
auto& lowest(Socket& s) {
  if constexpr (std::is_same_v<Socket, tls_stream>) return s.next_layer();
  else return s;
}

template <class Socket>
class Connection : public std::enable_shared_from_this<Connection<Socket>> {
  static constexpr bool kTls = std::is_same_v<Socket, tls_stream>;

 public:
  Connection(Socket s, std::shared_ptr<Shared> shared)
      : sock_(std::move(s)), timer_(sock_.get_executor()), shared_(std::move(shared)) {
    ++shared_->connections;
  }
  ~Connection() { --shared_->connections; }

  void start() {
    if constexpr (kTls) {
      // The handshake counts in the first request's time; a client that fails it is closed.
      arm_timer(shared_->limits.read_timeout_s);
      sock_.async_handshake(asio::ssl::stream_base::server, [self = this->shared_from_this()](boost::system::error_code ec) {
        if (ec) return self->close();
        self->read_request(true);
      });
    } else {
      read_request(true);
    }
  }

  // The per-request answer channel; stale ones (a request already answered) are ignored.
  class Ex : public Exchange {
   public:
    Ex(std::shared_ptr<Connection> c, uint64_t serial, bool keep_alive, unsigned version, http::verb method,
       std::string_view target, Clock::time_point began)
        : c_(std::move(c)), serial_(serial), keep_alive_(keep_alive), version_(version), method_(method), path_(target),
          began_(began) {}
    void respond(Response r) override {
      if (!live() || started_) return;
      started_ = true;
      status_ = r.result_int();
      r.version(version_);
      r.keep_alive(keep_alive_);
      r.prepare_payload();
      c_->send(serialize(r), true, keep_alive_);
      served(false);
    }
    void start_stream(Response head) override {
      if (!live() || started_) return;
      started_ = true;
      status_ = head.result_int();
      head.version(version_);
      head.keep_alive(keep_alive_);
      head.chunked(true);
      c_->send(serialize_head(head), false, keep_alive_);
    }
    void write_chunk(std::string data) override {
      if (!live() || !started_ || data.empty()) return;
      char len[24];
      std::snprintf(len, sizeof len, "%zx\r\n", data.size());
      c_->send(std::string(len) + data + "\r\n", false, keep_alive_);
    }
    void end_stream() override {
      if (!live() || !started_) return;
      c_->send("0\r\n\r\n", true, keep_alive_);
      served(false);
    }
    bool open() const override { return live(); }
    bool live() const { return c_->serial_ == serial_ && !c_->closed_ && !c_->answered_; }
    // Once per request: its answer is out, or its client left first.
    void served(bool client_gone) {
      if (logged_ || !c_->shared_->served) return;
      logged_ = true;
      c_->shared_->served({sv(http::to_string(method_)), path_.view(), status_, ms_since(began_), log_tenant, log_sandbox, client_gone});
    }

   private:
    std::shared_ptr<Connection> c_;
    uint64_t serial_;
    bool keep_alive_;
    unsigned version_;
    bool started_ = false;
    bool logged_ = false;
    unsigned status_ = 0;
    http::verb method_;
    LoggedPath path_;
    Clock::time_point began_;
  };

 private:
  Socket sock_;
  asio::steady_timer timer_;
  std::shared_ptr<Shared> shared_;
  boost::beast::flat_buffer buf_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::deque<std::string> out_;
  bool writing_ = false;
  bool closed_ = false;
  bool answered_ = true;  // no request in progress
  bool close_after_ = false;
  bool watching_ = false;
  bool next_after_watch_ = false;
  uint64_t serial_ = 0;
  std::weak_ptr<Ex> current_;
  Clock::time_point began_{};  // the current request's head arrived

  void arm_timer(int seconds) {
    timer_.expires_after(std::chrono::seconds(seconds));
    timer_.async_wait([self = this->shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->close();
    });
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    boost::system::error_code ec;
    timer_.cancel();
    lowest(sock_).shutdown(asio::socket_base::shutdown_both, ec);
    lowest(sock_).close(ec);
    if (auto ex = current_.lock(); ex && !answered_) {
      ex->served(true);
      if (ex->on_close) {
        auto cb = std::move(ex->on_close);
        cb();
      }
    }
  }

  void read_request(bool first) {
    if (closed_) return;
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(shared_->limits.max_header));
    parser_->body_limit(shared_->limits.max_body);
    arm_timer(first || buf_.size() ? shared_->limits.read_timeout_s : shared_->limits.idle_timeout_s);
    http::async_read_header(sock_, buf_, *parser_, [self = this->shared_from_this()](boost::system::error_code ec, size_t) {
      self->on_header(ec);
    });
  }

  void on_header(boost::system::error_code ec) {
    if (ec) return fail_read(ec);
    began_ = Clock::now();
    arm_timer(shared_->limits.read_timeout_s);
    auto& h = parser_->get();
    // Uploads may be larger than everything else.
    if (h.method() == http::verb::post && h.target().starts_with("/files")) parser_->body_limit(shared_->limits.max_upload);
    http::async_read(sock_, buf_, *parser_, [self = this->shared_from_this()](boost::system::error_code ec, size_t) {
      self->on_body(ec);
    });
  }

  void fail_read(boost::system::error_code ec) {
    if (closed_) return;
    if (ec == http::error::end_of_stream || ec == asio::error::eof || ec == asio::error::operation_aborted ||
        ec == asio::error::connection_reset) {
      return close();
    }
    // A request we cannot read: one clear answer, then the connection ends.
    http::status st = http::status::bad_request;
    std::string what = "malformed HTTP request: " + ec.message();
    if (ec == http::error::body_limit) {
      st = http::status::payload_too_large;
      what = "request body too large";
    } else if (ec == http::error::header_limit) {
      st = http::status::request_header_fields_too_large;
      what = "request header too large";
    }
    if (shared_->served) {
      bool head = parser_ && parser_->is_header_done();
      std::string_view method = head ? sv(parser_->get().method_string()) : std::string_view();
      LoggedPath path(head ? sv(parser_->get().target()) : std::string_view());
      shared_->served({method, path.view(), static_cast<unsigned>(st), head ? ms_since(began_) : 0, {}, {}, false});
    }
    Response r = json_response(st, nlohmann_error(st, what));
    r.keep_alive(false);
    answered_ = false;
    ++serial_;
    send(serialize(r), true, false);
  }

  static std::string nlohmann_error(http::status st, const std::string& what) {
    std::string esc;
    for (char c : what) {
      if (c == '"' || c == '\\') esc += '\\';
      if (static_cast<unsigned char>(c) < 0x20) continue;
      esc += c;
    }
    return "{\"code\":" + std::to_string(static_cast<unsigned>(st)) + ",\"message\":\"" + esc + "\"}";
  }

  void on_body(boost::system::error_code ec) {
    if (ec) return fail_read(ec);
    timer_.cancel();
    Request req = parser_->release();
    ++serial_;
    answered_ = false;
    auto ex = std::make_shared<Ex>(this->shared_from_this(), serial_, req.keep_alive(), req.version(), req.method(), sv(req.target()),
                                   began_);
    current_ = ex;
    watch();
    shared_->handler(req, ex);
  }

  // While the answer is pending: a read that notices the client leaving.
  // Bytes of a pipelined next request are kept for it.
  void watch() {
    if (watching_ || closed_ || answered_) return;
    if (buf_.size() > 64 * 1024) return;
    watching_ = true;
    sock_.async_read_some(buf_.prepare(4096), [self = this->shared_from_this()](boost::system::error_code ec, size_t n) {
      self->watching_ = false;
      if (!ec) {
        self->buf_.commit(n);
        if (self->answered_) {
          if (self->next_after_watch_) self->next_after_watch_ = false, self->read_request(false);
        } else {
          self->watch();
        }
        return;
      }
      if (ec == asio::error::operation_aborted && self->next_after_watch_ && !self->closed_) {
        self->next_after_watch_ = false;
        self->read_request(false);
        return;
      }
      if (ec != asio::error::operation_aborted) self->close();
    });
  }

  void send(std::string bytes, bool last, bool keep_alive) {
    if (closed_) return;
    out_.push_back(std::move(bytes));
    if (last) {
      answered_ = true;
      close_after_ = !keep_alive;
    }
    if (!writing_) write_next();
  }

  void write_next() {
    if (out_.empty()) {
      writing_ = false;
      if (answered_) finished();
      return;
    }
    writing_ = true;
    asio::async_write(sock_, asio::buffer(out_.front()), [self = this->shared_from_this()](boost::system::error_code ec, size_t) {
      if (ec) {
        self->writing_ = false;
        self->out_.clear();
        self->answered_ = false;  // so close() tells the producer
        self->close();
        return;
      }
      self->out_.pop_front();
      self->write_next();
    });
  }

  // The whole answer is out: the next request, or the end.
  void finished() {
    if (closed_) return;
    if (close_after_) {
      boost::system::error_code ec;
      closed_ = true;
      if constexpr (kTls) {
        // TLS's close_notify, then the socket closes (at once once the client
        // answers it, else after 2 s: a client that left sends nothing).
        timer_.expires_after(std::chrono::seconds(2));
        timer_.async_wait([self = this->shared_from_this()](boost::system::error_code e) {
          boost::system::error_code e2;
          if (!e) lowest(self->sock_).close(e2);
        });
        sock_.async_shutdown([self = this->shared_from_this()](boost::system::error_code) {
          boost::system::error_code e2;
          self->timer_.cancel();
          lowest(self->sock_).close(e2);
        });
        return;
      }
      lowest(sock_).shutdown(asio::socket_base::shutdown_send, ec);
      lowest(sock_).close(ec);
      return;
    }
    if (watching_) {
      next_after_watch_ = true;
      boost::system::error_code ec;
      lowest(sock_).cancel(ec);
      return;
    }
    read_request(false);
  }
};

template <class Acceptor, class Socket>
void accept_loop(Acceptor& acc, std::shared_ptr<Shared> shared, asio::ssl::context* tls = nullptr) {
  acc.async_accept([&acc, shared, tls](boost::system::error_code ec, Socket s) {
    if (ec == asio::error::operation_aborted) return;
    if (!ec) {
      if (shared->connections >= shared->limits.max_connections) {
        boost::system::error_code e2;
        s.close(e2);
      } else {
        // Stream events go out as small writes one after another: no Nagle delay on them.
        if constexpr (std::is_same_v<Socket, tcp::socket>) {
          boost::system::error_code e3;
          s.set_option(tcp::no_delay(true), e3);
          if (tls) {
            std::make_shared<Connection<tls_stream>>(tls_stream(std::move(s), *tls), shared)->start();
            return accept_loop<Acceptor, Socket>(acc, shared, tls);
          }
        }
        std::make_shared<Connection<Socket>>(std::move(s), shared)->start();
      }
    }
    accept_loop<Acceptor, Socket>(acc, shared, tls);
  });
}

}  // namespace

struct HttpServer::Impl {
  asio::io_context& io;
  std::shared_ptr<Shared> shared;
  std::optional<tcp::acceptor> tcp_acc;
  std::optional<unix_sock::acceptor> unix_acc;
  std::string unix_path;
  std::optional<asio::ssl::context> tls;  // use_tls()
  Impl(asio::io_context& i) : io(i), shared(std::make_shared<Shared>()) {}
};

namespace {

// OpenSSL's reasons for the last failure, oldest first (its error queue, emptied).
std::string openssl_reasons(const boost::system::error_code& ec) {
  std::string why;
  for (unsigned long e; (e = ERR_get_error()) != 0;) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    why += (why.empty() ? "" : "; ") + std::string(buf);
  }
  return why.empty() ? ec.message() : why;
}

}  // namespace

// What is wrong with a PEM file before OpenSSL reads it: "" when it can be read and holds a PEM block.
std::string pem_file_error(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::string("cannot be read: ") + std::strerror(errno);
  char buf[65536];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  int err = errno;
  ::close(fd);
  if (n < 0) return std::string("cannot be read: ") + std::strerror(err);
  if (std::string_view(buf, static_cast<size_t>(n)).find("-----BEGIN ") == std::string_view::npos)
    return "holds no PEM block (-----BEGIN ...)";
  return "";
}

Result<void> HttpServer::use_tls(const std::string& cert_file, const std::string& key_file) {
  if (auto why = pem_file_error(cert_file); !why.empty()) return fail(Error::msg("--tls-cert " + cert_file, why));
  if (auto why = pem_file_error(key_file); !why.empty()) return fail(Error::msg("--tls-key " + key_file, why));
  ERR_clear_error();
  asio::ssl::context ctx(asio::ssl::context::tls_server);
  ctx.set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 | asio::ssl::context::no_sslv3 |
                  asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1 | asio::ssl::context::single_dh_use);
  boost::system::error_code ec;
  ctx.use_certificate_chain_file(cert_file, ec);
  if (ec) return fail(Error::msg("--tls-cert " + cert_file, "not a readable PEM certificate (chain): " + openssl_reasons(ec)));
  ctx.use_private_key_file(key_file, asio::ssl::context::pem, ec);
  if (ec) return fail(Error::msg("--tls-key " + key_file, "not a PEM private key, or not the key of --tls-cert " + cert_file + ": " +
                                                       openssl_reasons(ec)));
  SSL_CTX* native = ctx.native_handle();
  if (SSL_CTX_check_private_key(native) != 1)
    return fail(Error::msg("--tls-key " + key_file, "is not the key of the certificate in --tls-cert " + cert_file + ": " +
                                                        openssl_reasons({})));
  X509* cert = SSL_CTX_get0_certificate(native);
  if (!cert) return fail(Error::msg("--tls-cert " + cert_file, "holds no certificate"));
  if (X509_cmp_current_time(X509_get0_notAfter(cert)) <= 0)
    return fail(Error::msg("--tls-cert " + cert_file, "has expired (its notAfter is past)"));
  if (X509_cmp_current_time(X509_get0_notBefore(cert)) >= 0)
    return fail(Error::msg("--tls-cert " + cert_file, "is not valid yet (its notBefore is in the future)"));
  impl_->tls.emplace(std::move(ctx));
  return {};
}

HttpServer::HttpServer(asio::io_context& io, Handler handler, HttpLimits limits, ServedFn served)
    : impl_(std::make_unique<Impl>(io)) {
  impl_->shared->handler = std::move(handler);
  impl_->shared->limits = limits;
  impl_->shared->served = std::move(served);
}

HttpServer::~HttpServer() { stop(); }

void HttpServer::stop() {
  boost::system::error_code ec;
  if (impl_->tcp_acc) impl_->tcp_acc->close(ec);
  if (impl_->unix_acc) {
    impl_->unix_acc->close(ec);
    ::unlink(impl_->unix_path.c_str());
    impl_->unix_acc.reset();
  }
}

Result<void> HttpServer::listen(const std::string& address) {
  boost::system::error_code ec;
  if (address.starts_with("unix:")) {
    if (impl_->tls) return fail(Error::msg("--listen " + address, "TLS (--tls-cert) is served on an ADDR:PORT listener only"));
    std::string path = address.substr(5);
    if (path.empty() || path.size() > 107) return fail(Error::msg("--listen " + address, "path empty or longer than 107 bytes"));
    if (struct stat st; ::lstat(path.c_str(), &st) == 0) {
      // A socket no one listens on (a server killed with SIGKILL) is taken over.
      unix_sock::socket probe(impl_->io);
      probe.connect(unix_sock::endpoint(path), ec);
      if (!S_ISSOCK(st.st_mode) || ec != asio::error::connection_refused || ::unlink(path.c_str()) != 0)
        return fail(Error::msg("--listen " + address, "exists already (a live server's socket, or not a socket)"));
      ec.clear();
    }
    impl_->unix_acc.emplace(impl_->io);
    mode_t old = ::umask(0117);
    impl_->unix_acc->open(unix_sock(), ec);
    if (!ec) impl_->unix_acc->bind(unix_sock::endpoint(path), ec);
    ::umask(old);
    if (ec) return fail(Error::msg("--listen " + address, ec.message()));
    impl_->unix_path = path;
    impl_->unix_acc->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return fail(Error::msg("--listen " + address, ec.message()));
    bound_ = address;
    accept_loop<unix_sock::acceptor, unix_sock::socket>(*impl_->unix_acc, impl_->shared);
    return {};
  }
  auto colon = address.rfind(':');
  if (colon == std::string::npos) return fail(Error::msg("--listen " + address, "expected ADDR:PORT or unix:PATH"));
  std::string host = address.substr(0, colon), port_s = address.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  char* end = nullptr;
  long port = std::strtol(port_s.c_str(), &end, 10);
  if (port_s.empty() || *end || port < 0 || port > 65535) return fail(Error::msg("--listen " + address, "bad port"));
  auto addr = asio::ip::make_address(host, ec);
  if (ec) return fail(Error::msg("--listen " + address, "not an IP address: " + host));
  tcp::endpoint ep(addr, static_cast<uint16_t>(port));
  impl_->tcp_acc.emplace(impl_->io);
  impl_->tcp_acc->open(ep.protocol(), ec);
  if (!ec) impl_->tcp_acc->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl_->tcp_acc->bind(ep, ec);
  if (!ec) impl_->tcp_acc->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return fail(Error::msg("--listen " + address, ec.message()));
  auto local = impl_->tcp_acc->local_endpoint(ec);
  bound_ = (addr.is_v6() ? "[" + local.address().to_string() + "]" : local.address().to_string()) + ":" +
           std::to_string(local.port());
  accept_loop<tcp::acceptor, tcp::socket>(*impl_->tcp_acc, impl_->shared, impl_->tls ? &*impl_->tls : nullptr);
  return {};
}

}  // namespace exg::serve
