// Credential injection at the proxy (DESIGN.md §6, issue 5). The sandbox holds
// only placeholders; for hosts that have a secret the proxy terminates TLS with
// a per-sandbox CA kept in memory, verifies the upstream against the host's
// trust store and swaps placeholders for the real values in request headers.
// A placeholder on its way anywhere else is refused and logged as exfiltration.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "egress/rules.hpp"
#include "util/error.hpp"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct x509_st X509;

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
  // The context stays owned by the cache: call SSL_new on it at once (the SSL
  // holds its own reference, so an eviction later does not affect it).
  Result<SSL_CTX*> server_ctx_for(const std::string& host);

  // For tests and diagnostics.
  X509* cert() const;                   // the CA certificate (owned by the CA)
  size_t cached_leaves() const;
  static constexpr size_t kMaxCachedLeaves = 256;
  static constexpr std::chrono::hours kLeafValidity{72};     // leaves are valid this long after issue
  static constexpr std::chrono::minutes kBackdate{60};       // notBefore lies this far back (clock skew)

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

struct SecretsConfig {
  std::vector<Secret> secrets;
  std::shared_ptr<CertAuthority> ca;
  std::string upstream_ca_file;  // the host's trust store, for upstream verification; empty: OpenSSL's default paths
};

// What the proxy derives from a SecretsConfig: which secrets belong to which
// host (the hosts are matched exactly as allowedDomains entries are, by Rules),
// and where placeholders hide in bytes.
class SecretIndex {
 public:
  // Error: a host pattern that allowedDomains would refuse (names the secret).
  static Result<SecretIndex> build(std::shared_ptr<const SecretsConfig> cfg);
  const std::vector<Secret>& secrets() const;
  // Indices of the secrets whose hosts match host:port.
  std::vector<size_t> for_host(const Host& host, uint16_t port) const;
  // The first secret (not in `allowed`) whose placeholder occurs in `s`,
  // compared case-insensitively (host names and tricks with case are still caught).
  const Secret* find(std::string_view s, const std::vector<size_t>& allowed = {}) const;
  // As find, and also inside "Basic base64(user:password)" credentials.
  const Secret* find_in_header(std::string_view value, const std::vector<size_t>& allowed = {}) const;
  size_t longest_placeholder() const { return longest_; }
  const SecretsConfig& config() const { return *cfg_; }

 private:
  std::shared_ptr<const SecretsConfig> cfg_;
  std::vector<Rules> hosts_;            // one allow list per secret
  std::vector<std::string> lowered_;    // placeholders, lower-cased
  size_t longest_ = 0;
};

// A header value with every placeholder of `secrets` (indices into `idx`)
// replaced by its value; "Basic base64(user:password)" credentials are
// decoded, replaced and re-encoded.
std::string inject_secrets(std::string_view value, const SecretIndex& idx, const std::vector<size_t>& secrets);

// Finds placeholders in a stream read in pieces: a placeholder split across
// two reads is still found (the last longest-1 bytes are carried over).
class PlaceholderScanner {
 public:
  PlaceholderScanner(const SecretIndex& idx, std::vector<size_t> allowed = {}) : idx_(idx), allowed_(std::move(allowed)) {}
  const Secret* feed(std::string_view chunk);
  uint64_t scanned() const { return scanned_; }

 private:
  const SecretIndex& idx_;
  std::vector<size_t> allowed_;
  std::string carry_;
  uint64_t scanned_ = 0;
};

// Replaces the values of some secrets by their placeholders in a stream read
// in pieces (what an upstream answers goes back into the sandbox masked: an
// endpoint that reflects the request never shows the value). Holds back the
// last longest-value-1 bytes until more arrive or finish().
class ValueMasker {
 public:
  ValueMasker(const SecretIndex& idx, const std::vector<size_t>& secrets);
  bool empty() const { return pairs_.empty(); }
  void feed(std::string_view in, std::string& out);
  void finish(std::string& out);
  std::string mask(std::string_view whole);  // one complete piece (a header value)

 private:
  std::vector<std::pair<std::string, std::string>> pairs_;  // value -> placeholder
  size_t keep_ = 0;
  std::string carry_;
};

std::string base64_encode(std::string_view in);

// The client context for upstream connections of intercepted hosts: peer
// verification against `ca_file` (empty: OpenSSL's default paths, i.e. the
// host's store), never against our CA; TLS >= 1.2; ALPN http/1.1.
struct SslCtxDeleter {
  void operator()(SSL_CTX* c) const;
};
using SslCtxPtr = std::unique_ptr<SSL_CTX, SslCtxDeleter>;
Result<SslCtxPtr> make_upstream_ctx(const std::string& ca_file);

}  // namespace exg::egress
