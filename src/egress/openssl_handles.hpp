// What the proxy's two TLS users share (the interception of a secret's host,
// intercept_session.cpp, and TLS to a parent proxy, parent_tls.cpp): an owning
// handle for an SSL and the reason OpenSSL gave for the last failure.
#pragma once
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <memory>
#include <string>

namespace exg::egress::detail {

struct SslFree {
  void operator()(SSL* s) const { SSL_free(s); }
};
using SslPtr = std::unique_ptr<SSL, SslFree>;

// OpenSSL's reason for the last failure (its error queue emptied), or
// `if_none` when it queued none (the peer closed the connection).
inline std::string openssl_reason(const char* if_none = "the connection closed") {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (!e) return if_none;
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

}  // namespace exg::egress::detail
