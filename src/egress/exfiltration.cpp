// A placeholder on its way to a host its secret is not meant for: found in
// request targets, header names and values (also inside Basic credentials),
// CONNECT and SOCKS targets, bodies and the first bytes of a tunnel; refused
// and logged as {"event":"exfiltration"} with the secret's name (never its
// value). A placeholder that reaches its own host somewhere it is not put in
// (a secret limited to some headers, found in the body, the URL or another
// header; any secret on plain HTTP, where nothing is put in) goes on as the
// placeholder: it carries nothing the host may not have, and refusing it would
// let whatever prints the environment into a conversation with the host end
// that conversation. It is logged as {"event":"placeholder_passed"}.
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
  // Follows `idx`: a placeholder learned while the stream is open is caught too.
  ExfiltrationFilter(const SharedSecretIndex& idx, std::vector<size_t> allowed, std::function<void(const Secret&)> found,
                     std::function<void(const Secret&)> passed, std::unique_ptr<StreamFilter> inner, uint64_t window)
      : scanner_(idx, std::move(allowed)), found_(std::move(found)), passed_(std::move(passed)),
        inner_(std::move(inner)), window_(window) {}
  Status feed(std::string_view in, std::string& out) override {
    if (scanning_) {
      if (const Secret* s = scanner_.feed(in)) {
        reason_ = "exfiltration: a placeholder of " + s->name;
        found_(*s);
        return Status::Error;  // nothing of this read goes on; the tunnel closes
      }
      for (size_t i : scanner_.take_passed()) passed_(scanner_.index().secrets()[i]);
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
  std::function<void(const Secret&)> found_, passed_;
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
  return st_->secret_index->now()->for_host(*h, port);
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

void Session::log_placeholder_passed(const Secret& s, const std::string& where, const std::string& host, uint16_t port) {
  if (!passed_logged_.emplace(s.name, where).second || !st_->audit_on()) return;
  nlohmann::json j = {{"event", "placeholder_passed"}, {"protocol", protocol_}, {"secret", s.name}, {"where", where}};
  if (!host.empty()) j["host"] = host;
  if (port) j["port"] = port;
  if (!s.headers.empty()) j["secret_headers"] = s.headers;  // where it is put in
  j["duration_ms"] = elapsed_ms();
  st_->audit_write(std::move(j));
}

std::optional<Session::PlaceholderFound> Session::exfiltration_in(std::string_view s, const std::string& where,
                                                                  const std::string& host, uint16_t port,
                                                                  const std::vector<size_t>& allowed) {
  if (!st_->secret_index) return std::nullopt;
  auto idx = st_->secret_index->now();
  const Secret* found = idx->find(s, idx->with_successors(allowed));
  if (!found) return std::nullopt;
  log_exfiltration(*found, where, host, port);
  return PlaceholderFound{found, where, std::move(idx)};
}

namespace {
std::string shown_header_name(const std::string& name) {
  std::string shown;
  for (unsigned char c : name.substr(0, 64)) shown += (c > 0x20 && c < 0x7f) ? (char)c : '?';
  return shown;
}
}  // namespace

std::optional<Session::PlaceholderFound> Session::exfiltration_in_headers(const HttpHead& h, const std::string& host,
                                                                          uint16_t port,
                                                                          const std::vector<size_t>& allowed) {
  if (!st_->secret_index) return std::nullopt;
  // Only secrets meant for another host are refused here: the host's own may
  // be anywhere in its requests (put in where their "headers" say, passed as
  // the placeholder elsewhere: note_placeholders_passed).
  auto snap = st_->secret_index->now();
  const SecretIndex& idx = *snap;
  const std::vector<size_t> own = idx.with_successors(allowed);
  if (const Secret* s = idx.find(h.target, own)) {
    log_exfiltration(*s, "url", host, port);
    return PlaceholderFound{s, "url", std::move(snap)};
  }
  for (const auto& [name, value] : h.headers) {
    const Secret* s = idx.find_in_header(value, own);
    if (!s) s = idx.find(name, own);
    if (s) {
      std::string where = "header " + shown_header_name(name);
      log_exfiltration(*s, where, host, port);
      return PlaceholderFound{s, where, std::move(snap)};
    }
  }
  return std::nullopt;
}

void Session::note_placeholders_passed(const HttpHead& h, const std::string& host, uint16_t port,
                                       const std::vector<size_t>& own_ids) {
  if (!st_->secret_index || own_ids.empty()) return;
  auto snap = st_->secret_index->now();
  const SecretIndex& idx = *snap;
  const std::vector<size_t> own = idx.with_successors(own_ids);
  for (size_t i : idx.occurring(h.target, own)) log_placeholder_passed(idx.secrets()[i], "url", host, port);
  for (const auto& [name, value] : h.headers) {
    for (size_t i : idx.occurring(name, own))
      log_placeholder_passed(idx.secrets()[i], "header name " + shown_header_name(name), host, port);
    for (size_t i : idx.occurring_in_header(value, own))
      log_placeholder_passed(idx.secrets()[i], "header " + shown_header_name(name), host, port);
  }
}

std::unique_ptr<StreamFilter> Session::exfiltration_filter(const std::string& host, uint16_t port,
                                                           std::unique_ptr<StreamFilter> inner,
                                                           std::vector<size_t> allowed, std::string where) {
  if (!st_->secret_index || st_->secret_index->now()->secrets().empty()) return inner;
  std::weak_ptr<Session> weak = weak_from_this();
  const uint64_t window = inner ? UINT64_MAX : kScanWindow;
  return std::make_unique<ExfiltrationFilter>(
      *st_->secret_index, std::move(allowed),
      [weak, host, port, where](const Secret& s) {
        if (auto self = weak.lock()) self->log_exfiltration(s, where, host, port);
      },
      [weak, host, port, where](const Secret& s) {
        if (auto self = weak.lock()) self->log_placeholder_passed(s, where, host, port);
      },
      std::move(inner), window);
}

}  // namespace exg::egress::detail
