// A placeholder on its way to a host it is not meant for: found in request
// targets, header values (also inside Basic credentials), CONNECT and SOCKS
// targets and the first bytes of a tunnel; refused and logged as
// {"event":"exfiltration"} with the secret's name (never its value). A secret
// limited to some request headers is refused the same way anywhere else.
#include <algorithm>

#include "egress/proxy.hpp"

namespace exg::egress::detail {

namespace {

// The first bytes a client sends through a tunnel that is not intercepted
// (a TLS ClientHello with its SNI, a plain protocol's first request) are
// scanned; then the tunnel goes back to splice. A plain-HTTP request body is
// scanned whole (it is copied through the filter anyway).
constexpr uint64_t kScanWindow = 64 * 1024;

class ExfiltrationFilter : public StreamFilter {
 public:
  ExfiltrationFilter(const SecretIndex& idx, std::vector<size_t> allowed, std::function<void(const Secret&)> found,
                     std::unique_ptr<StreamFilter> inner, uint64_t window)
      : scanner_(idx, std::move(allowed)), found_(std::move(found)), inner_(std::move(inner)), window_(window) {}
  Status feed(std::string_view in, std::string& out) override {
    if (scanning_) {
      if (const Secret* s = scanner_.feed(in)) {
        reason_ = "exfiltration: a placeholder of " + s->name;
        found_(*s);
        return Status::Error;  // nothing of this read goes on; the tunnel closes
      }
      scanning_ = scanner_.scanned() < window_;
    }
    if (inner_) return inner_->feed(in, out);
    out.append(in);
    return scanning_ ? Status::More : Status::Passthrough;
  }
  void eof(std::string& out) override {
    if (inner_) inner_->eof(out);
  }
  std::string error_reason() const override { return !reason_.empty() ? reason_ : inner_ ? inner_->error_reason() : ""; }

 private:
  PlaceholderScanner scanner_;
  std::function<void(const Secret&)> found_;
  std::unique_ptr<StreamFilter> inner_;
  uint64_t window_;
  bool scanning_ = true;
  std::string reason_;
};

}  // namespace

Result<SSL_CTX*> ProxyState::upstream_tls() {
  if (upstream_ctx) return upstream_ctx.get();
  if (!upstream_ctx_error.empty()) return fail(Error::msg("upstream TLS", upstream_ctx_error));
  auto c = make_upstream_ctx(cfg.secrets ? cfg.secrets->upstream_ca_file : std::string());
  if (!c) {
    upstream_ctx_error = c.error().str();
    return fail(c.error());
  }
  upstream_ctx = std::move(*c);
  return upstream_ctx.get();
}

std::vector<size_t> Session::secrets_for(const std::string& host, uint16_t port) const {
  if (!st_->secret_index) return {};
  auto h = normalise_host(host);
  if (!h) return {};
  return st_->secret_index->for_host(*h, port);
}

void Session::log_exfiltration(const Secret& s, const std::string& where, const std::string& host, uint16_t port) {
  ++st_->stats.exfiltration;
  st_->count_refused(host, "secret " + s.name + " on its way elsewhere (" + where + ")");
  if (!st_->audit_on()) return;
  nlohmann::json j = {{"event", "exfiltration"}, {"protocol", protocol_}, {"secret", s.name}, {"where", where}};
  if (!host.empty()) j["host"] = host;
  if (port) j["port"] = port;
  if (!s.headers.empty()) j["secret_headers"] = s.headers;  // where it would have been put in
  j["decision"] = "refused";
  j["duration_ms"] = elapsed_ms();
  st_->audit_write(std::move(j));
}

const Secret* Session::exfiltration_in(std::string_view s, const std::string& where, const std::string& host,
                                       uint16_t port, const std::vector<size_t>& allowed) {
  if (!st_->secret_index) return nullptr;
  const Secret* found = st_->secret_index->find(s, allowed);
  if (found) log_exfiltration(*found, where, host, port);
  return found;
}

const Secret* Session::exfiltration_in_headers(const HttpHead& h, const std::string& host, uint16_t port,
                                               const std::vector<size_t>& allowed) {
  if (!st_->secret_index) return nullptr;
  // A secret limited to some headers ("headers" in its declaration) is not for
  // the target, other headers or header names, even on its own host.
  const auto outside = st_->secret_index->allowed_outside_headers(allowed);
  if (const Secret* s = st_->secret_index->find(h.target, outside)) {
    log_exfiltration(*s, "url", host, port);
    return s;
  }
  for (const auto& [name, value] : h.headers) {
    const Secret* s = st_->secret_index->find_in_header(value, st_->secret_index->allowed_in_header(allowed, name));
    if (!s) s = st_->secret_index->find(name, outside);
    if (s) {
      std::string shown;
      for (unsigned char c : name.substr(0, 64)) shown += (c > 0x20 && c < 0x7f) ? (char)c : '?';
      log_exfiltration(*s, "header " + shown, host, port);
      return s;
    }
  }
  return nullptr;
}

std::unique_ptr<StreamFilter> Session::exfiltration_filter(const std::string& host, uint16_t port,
                                                           std::unique_ptr<StreamFilter> inner,
                                                           std::vector<size_t> allowed, std::string where) {
  if (!st_->secret_index || st_->secret_index->secrets().empty()) return inner;
  std::weak_ptr<Session> weak = weak_from_this();
  const uint64_t window = inner ? UINT64_MAX : kScanWindow;
  return std::make_unique<ExfiltrationFilter>(
      *st_->secret_index, std::move(allowed),
      [weak, host, port, where](const Secret& s) {
        if (auto self = weak.lock()) self->log_exfiltration(s, where, host, port);
      },
      std::move(inner), window);
}

}  // namespace exg::egress::detail
