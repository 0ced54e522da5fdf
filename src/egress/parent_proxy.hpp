// Where an allowed connection goes once the rules have passed it: straight to
// the host, or through a proxy of the user's (srt's network.parentProxy,
// httpProxyPort / socksProxyPort, mitmProxy). The proxy is asked with CONNECT
// (SOCKS5 for socksProxyPort) and its credentials, kept here, never reach the
// sandbox. A proxy with an https:// URL is reached over TLS (parent_tls.hpp),
// its certificate verified. Names go to it unresolved (it resolves them, as in srt: the address
// checks are then its own); a literal address is still checked here.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "egress/rules.hpp"
#include "policy/policy.hpp"
#include "util/error.hpp"

typedef struct ssl_ctx_st SSL_CTX;

namespace exg::egress {

struct Via {
  enum class Kind { HttpConnect, Socks5 } kind = Kind::HttpConnect;
  std::string host;           // the proxy's host name or address (TCP)
  uint16_t port = 0;
  std::string unix_path;      // or its Unix socket (mitmProxy)
  std::string authorization;  // the Proxy-Authorization value ("Basic ..."), empty: none
  std::string label;          // for the audit line: "parentProxy http://***@proxy:3128"
  std::shared_ptr<SSL_CTX> tls;  // an https:// proxy: TLS to it with this context; null: plain TCP
};

class Upstreams {
 public:
  static Result<Upstreams> from_policy(const policy::Network& net);
  bool empty() const { return !mitm_ && !http_port_ && !socks_port_ && !parent_http_ && !parent_https_; }
  // The proxy a connection to `host` goes through, or nothing (direct).
  // `tunnel`: CONNECT or SOCKS (else a plain-HTTP request); `socks`: it came over SOCKS5.
  std::optional<Via> route(const Host& host, bool tunnel, bool socks) const;

 private:
  struct Mitm {
    std::string socket;
    std::vector<std::string> patterns;  // normalised, "*.x" kept
  };
  std::optional<Mitm> mitm_;
  std::optional<uint16_t> http_port_, socks_port_;
  std::optional<Via> parent_http_, parent_https_;
  policy::NoProxy no_proxy_;
  std::vector<Cidr> no_proxy_cidrs_;
};

}  // namespace exg::egress
