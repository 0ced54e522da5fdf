// Credential injection at the proxy (DESIGN.md §6, issue 5). The sandbox holds
// only placeholders; for hosts that have a secret the proxy terminates TLS with
// a per-sandbox CA kept in memory, verifies the upstream against the host's
// trust store and swaps placeholders for the real values in request headers.
// A placeholder on its way anywhere else is refused and logged as exfiltration.
#pragma once
#include <bitset>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "egress/rules.hpp"
#include "egress/secret.hpp"
#include "util/base64.hpp"
#include "util/error.hpp"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct x509_st X509;

namespace exg::egress {

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
  // Of `among`, the secrets whose placeholder occurs in `s` (as find: any case);
  // _in_header: also inside Basic credentials.
  std::vector<size_t> occurring(std::string_view s, const std::vector<size_t>& among) const;
  std::vector<size_t> occurring_in_header(std::string_view value, const std::vector<size_t>& among) const;
  size_t longest_placeholder() const { return longest_; }
  // Of `ids`, the secrets whose placeholder is replaced in the request header
  // `name` (no "headers" limit, or the limit names it). Nothing is replaced
  // outside header values (the target, a body).
  std::vector<size_t> allowed_in_header(const std::vector<size_t>& ids, std::string_view name) const;
  // Of `ids` (the secrets of `host`), the headers the proxy sets itself
  // (set_header), (name, value): only those of the most specific host pattern
  // that matches (an exact name beats any wildcard, a longer wildcard a shorter
  // one), as E2B applies its network.rules: matching rule sets are not merged.
  std::vector<std::pair<std::string, std::string>> headers_to_set(const std::vector<size_t>& ids, const std::string& host) const;
  const SecretsConfig& config() const { return *cfg_; }
  // OAuth refresh (token_refresh.cpp): a new index, this one plus a successor
  // of secret `of` holding `value` under a new placeholder, with exactly its
  // scope (hosts, headers, bodyHosts, refresh field, file); the successor is the
  // last secret. The old one stays (a request in flight may still carry its
  // placeholder), and every index of this one means the same secret there.
  // An index is never changed once built: SharedSecretIndex swaps them.
  Result<SecretIndex> with_successor(size_t of, std::string value) const;
  // `ids` and every successor of one of them (a successor's successor too): a list of a
  // host's secrets taken from an older index, brought up to this one.
  std::vector<size_t> with_successors(std::vector<size_t> ids) const;
  // Of `ids`, the secrets whose value goes into request bodies to host:port (bodyHosts).
  std::vector<size_t> in_body(const std::vector<size_t>& ids, const Host& host, uint16_t port) const;

 private:
  Result<void> index(const Secret& s);
  std::vector<std::optional<Rules>> body_hosts_;  // per secret; none: never in a body
  std::vector<std::optional<size_t>> successor_of_;  // per secret: the one it was learned for
  std::shared_ptr<const SecretsConfig> cfg_;
  std::vector<Rules> hosts_;            // one allow list per secret
  std::vector<std::string> lowered_;    // placeholders, lower-cased
  size_t longest_ = 0;
};

// The index in force for every session of a proxy. A reader takes a snapshot
// (now()) and holds it for as long as it uses what it found there (a request
// and its response): a snapshot never changes. An OAuth refresh (learn), on
// any session's thread, builds the next index from the newest under the lock
// and swaps it in; indices only grow, so an index taken from an older
// snapshot names the same secret in a newer one.
class SharedSecretIndex {
 public:
  explicit SharedSecretIndex(SecretIndex idx);
  std::shared_ptr<const SecretIndex> now() const;
  struct Learned {
    std::shared_ptr<const SecretIndex> index;  // the newest, with the successor when there is one
    std::optional<size_t> of, successor;       // both set: a successor was made
  };
  // A refreshed `value` for `field` from host:port: a successor of the newest
  // secret of that host whose refresh field is `field` (an earlier refresh's
  // successor, if any). None made (no such secret, or `value` is already a
  // secret's value: a refresh seen twice): index only.
  Result<Learned> learn(const Host& host, uint16_t port, const std::string& field, std::string value);

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const SecretIndex> now_;
};

// "exg_ph_<NAME>_<32 hex from getrandom>": unique per sandbox, recognisable.
Result<std::string> make_placeholder(const std::string& name);

// A header value with every placeholder of `secrets` (indices into `idx`)
// replaced by its value; "Basic base64(user:password)" credentials are
// decoded, replaced and re-encoded.
std::string inject_secrets(std::string_view value, const SecretIndex& idx, const std::vector<size_t>& secrets);

// What the sandbox is told when a placeholder of `s` is refused on its way to
// `host` (empty: not known), found `where` ("body", "url", "header X-Foo", ...):
// which secret, where, which host, and the hosts it is meant for. One line, no value.
std::string placeholder_refusal(const Secret& s, std::string_view host, std::string_view where);

// Finds placeholders in a stream read in pieces: a placeholder split across
// two reads is still found (the last longest-1 bytes are carried over).
// feed() returns the first secret not in `allowed` it finds (refused); those of
// `allowed` it finds (passed on as they are) are kept for take_passed().
// Following a SharedSecretIndex, each feed looks at its newest index (a
// placeholder an OAuth refresh handed out while the stream was open is caught
// too; `allowed` takes in the successors of its secrets): the Secret returned
// and index() are then valid until the next feed.
class PlaceholderScanner {
 public:
  PlaceholderScanner(const SecretIndex& idx, std::vector<size_t> allowed = {}) : idx_(&idx), allowed_(std::move(allowed)) {}
  PlaceholderScanner(const SharedSecretIndex& follow, std::vector<size_t> allowed = {});
  const Secret* feed(std::string_view chunk);
  uint64_t scanned() const { return scanned_; }
  // The secrets of `allowed` seen since the last call, each once per stream.
  std::vector<size_t> take_passed();
  const SecretIndex& index() const { return *idx_; }

 private:
  const SharedSecretIndex* follow_ = nullptr;
  std::shared_ptr<const SecretIndex> held_;  // following: the snapshot idx_ points into
  const SecretIndex* idx_;
  std::vector<size_t> allowed_;
  std::vector<size_t> seen_, new_seen_;
  std::string carry_;
  uint64_t scanned_ = 0;
};

// Replaces the values of some secrets by their placeholders in a stream read
// in pieces (what an upstream answers goes back into the sandbox masked: an
// endpoint that reflects the request never shows the value), in every spelling
// an echo may use: as is, JSON/JS-escaped (\/, \uXXXX of any character),
// percent-encoded (either hex case), HTML character references, base64
// (standard and url-safe, the three alignments, line-wrapped), base32 and
// base32hex (either case, the five alignments), hex (either case, bare or with
// ':' '-' ' ' between bytes) and UTF-16/UTF-32 of either byte order
// (value_masker.cpp). Holds back a tail (the longest spelling) until more
// arrives or finish().
class ValueMasker {
 public:
  ValueMasker(const SecretIndex& idx, const std::vector<size_t>& secrets);
  ~ValueMasker();
  ValueMasker(ValueMasker&&) noexcept;
  bool empty() const { return pairs_.empty(); }
  void feed(std::string_view in, std::string& out);
  void finish(std::string& out);
  std::string mask(std::string_view whole);  // one complete piece (a header value, a reason phrase)
  // The longest tail of `s` that begins some spelling of a value and ends
  // before it does (a value split there, its rest still to come); 0: none.
  size_t open_tail(std::string_view s) const;
  size_t longest() const { return keep_; }  // bytes a spelling can take at most
  // What was masked since the last call: (secret name, form: "plain", "json",
  // "percent", "html", "base64", "base64url", "base32", "base32hex", "hex",
  // "utf-16le", "utf-16be", "utf-32le", "utf-32be"), each pair once.
  std::vector<std::pair<std::string, std::string>> take_hits();

 private:
  struct Target;
  struct Pair {
    std::string value, placeholder, name;
  };
  struct Span {
    size_t start = 0, end = 0;
    const char* form = nullptr;
    char sep = 0;  // hex: the separator between bytes (0: none)
  };
  bool match(const Target& t, std::string_view s, size_t p, size_t floor, Span& span, bool* ran_out = nullptr) const;
  size_t next_candidate(std::string_view s, size_t from, size_t to) const;
  std::vector<Pair> pairs_;
  std::vector<Target> targets_;
  bool first_[256] = {};      // bytes a match can start with
  bool esc_start_[256] = {};  // ... whatever follows them (escapes)
  std::vector<uint32_t> by_byte_[256];  // targets a match starting with that byte may be of
  void index_targets();
  std::bitset<65536> pair_;   // first byte << 8 | second byte of a possible match
  size_t keep_ = 0;
  std::string carry_;
  uint64_t offset_ = 0;  // where carry_ starts in everything fed (UTF-16/32's unit alignment)
  std::vector<std::pair<std::string, std::string>> hits_;
};

using util::base64_encode;  // util/base64.hpp

// The client context for upstream connections of intercepted hosts: peer
// verification against `ca_file` (empty: OpenSSL's default paths, i.e. the
// host's store), never against our CA; TLS >= 1.2; ALPN http/1.1.
struct SslCtxDeleter {
  void operator()(SSL_CTX* c) const;
};
using SslCtxPtr = std::unique_ptr<SSL_CTX, SslCtxDeleter>;
Result<SslCtxPtr> make_upstream_ctx(const std::string& ca_file);

}  // namespace exg::egress
