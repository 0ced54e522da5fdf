// Credential injection at the proxy (DESIGN.md §6, issue 5). The sandbox holds
// only placeholders; for hosts that have a secret the proxy terminates TLS with
// a per-sandbox CA kept in memory, verifies the upstream against the host's
// trust store and swaps placeholders for the real values in request headers.
// A placeholder on its way anywhere else is refused and logged as exfiltration.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "util/error.hpp"

typedef struct ssl_ctx_st SSL_CTX;

namespace exg::egress {

struct Secret {
  std::string name;                // "GITHUB_TOKEN"
  std::string placeholder;         // "exg_ph_GITHUB_TOKEN_<random>": all the sandbox ever holds
  std::string value;               // the real value: lives in the supervisor only
  std::vector<std::string> hosts;  // patterns, matched as allowedDomains entries are
};

// Per-sandbox certificate authority, generated in memory (the key never
// touches the disk or the sandbox); leaf certificates on demand, cached.
class CertAuthority {
 public:
  static Result<std::shared_ptr<CertAuthority>> generate(std::string_view sandbox_id);
  ~CertAuthority();
  const std::string& cert_pem() const;  // what the sandbox trusts
  // A server context presenting a leaf for `host` (DNS name or IP literal), ALPN http/1.1.
  Result<SSL_CTX*> server_ctx_for(const std::string& host);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

struct SecretsConfig {
  std::vector<Secret> secrets;
  std::shared_ptr<CertAuthority> ca;
  std::string upstream_ca_file;  // the host's trust store, for upstream verification; empty: OpenSSL's default paths
};

}  // namespace exg::egress
