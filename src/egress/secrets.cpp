// Credential injection: the per-sandbox CA (OpenSSL 3, in memory), the index
// of secrets by host, placeholder search and replacement. The TLS relay that
// uses them is intercept_session.cpp.
#include "egress/secrets.hpp"

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <sys/random.h>

#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <ctime>
#include <list>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "egress/proxy.hpp"
#include "util/lazy_libs.hpp"

namespace exg::egress {

namespace {

std::string openssl_error(const char* what) {
  std::string s = what;
  unsigned long e = ERR_get_error();
  if (e) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    s += ": ";
    s += buf;
  }
  ERR_clear_error();
  return s;
}

Error ssl_fail(const char* what) { return Error::msg("certificate authority", openssl_error(what)); }

struct PkeyFree { void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); } };
struct X509Free { void operator()(X509* p) const { X509_free(p); } };
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;

PkeyPtr new_p256_key() { return PkeyPtr(EVP_EC_gen("P-256")); }

// A random positive 128-bit serial.
bool set_random_serial(X509* x) {
  unsigned char b[16];
  if (RAND_bytes(b, sizeof b) != 1) return false;
  b[0] &= 0x7f;
  b[0] |= 0x01;  // no leading zero byte: always 16 bytes, positive
  BIGNUM* bn = BN_bin2bn(b, sizeof b, nullptr);
  if (!bn) return false;
  bool ok = BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) != nullptr;
  BN_free(bn);
  return ok;
}

bool add_ext(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (!ext) return false;
  bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

bool set_validity(X509* x, std::chrono::seconds from_now_back, std::chrono::seconds from_now_ahead) {
  return X509_gmtime_adj(X509_getm_notBefore(x), -(long)from_now_back.count()) &&
         X509_gmtime_adj(X509_getm_notAfter(x), (long)from_now_ahead.count());
}

bool add_name(X509_NAME* n, const char* field, const std::string& v) {
  return X509_NAME_add_entry_by_txt(n, field, MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(v.data()),
                                    (int)v.size(), -1, 0) == 1;
}

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = (char)std::tolower((unsigned char)c);
  return r;
}

// ALPN: HTTP/1.1 only (we speak nothing else to either side). A client that
// offers only h2 gets no ALPN answer and speaks HTTP/1.1 by default.
int alpn_select(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in, unsigned int inlen,
                void*) {
  static const unsigned char kHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  unsigned char* sel = nullptr;
  if (SSL_select_next_proto(&sel, outlen, kHttp11, sizeof kHttp11, in, inlen) == OPENSSL_NPN_NEGOTIATED) {
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

}  // namespace

void SslCtxDeleter::operator()(SSL_CTX* c) const { SSL_CTX_free(c); }

// ---- CertAuthority ----------------------------------------------------------------------------

struct CertAuthority::Impl {
  PkeyPtr key;       // the CA's key: in this process's memory only
  X509Ptr cert;
  PkeyPtr leaf_key;  // one key for every leaf of this sandbox (the CA signs each name)
  std::string pem;
  mutable std::mutex mu;
  struct Leaf {
    SslCtxPtr ctx;
    std::chrono::steady_clock::time_point made;
    std::list<std::string>::iterator lru;
  };
  std::unordered_map<std::string, Leaf> leaves;
  std::list<std::string> lru;  // front: most recently used

  Result<SslCtxPtr> make_leaf_ctx(const std::string& host);
};

Result<std::shared_ptr<CertAuthority>> CertAuthority::generate(std::string_view sandbox_id) {
  // OpenSSL is bound on first use (util/lazy_libs.hpp): here, where a missing library is a clean error.
  if (auto libs = load_shared_libs(); !libs) return fail(libs.error());
  auto ca = std::shared_ptr<CertAuthority>(new CertAuthority());
  ca->impl_ = std::make_unique<Impl>();
  Impl& im = *ca->impl_;
  im.key = new_p256_key();
  im.leaf_key = new_p256_key();
  if (!im.key || !im.leaf_key) return fail(ssl_fail("generate a P-256 key"));
  im.cert.reset(X509_new());
  X509* x = im.cert.get();
  if (!x || !X509_set_version(x, 2) || !set_random_serial(x)) return fail(ssl_fail("new CA certificate"));
  std::string id(sandbox_id.substr(0, 40));
  X509_NAME* name = X509_get_subject_name(x);
  if (!add_name(name, "O", "ExGuardian") || !add_name(name, "CN", "ExGuardian sandbox " + id + " CA"))
    return fail(ssl_fail("CA name"));
  if (!X509_set_issuer_name(x, name)) return fail(ssl_fail("CA issuer"));
  // A year at most: the CA lives as long as the sandbox; leaves never outlive it.
  if (!set_validity(x, kBackdate, std::chrono::hours(24 * 365))) return fail(ssl_fail("CA validity"));
  if (!X509_set_pubkey(x, im.key.get())) return fail(ssl_fail("CA public key"));
  if (!add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") ||
      !add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign") ||
      !add_ext(x, x, NID_subject_key_identifier, "hash") ||
      !add_ext(x, x, NID_authority_key_identifier, "keyid:always"))
    return fail(ssl_fail("CA extensions"));
  if (!X509_sign(x, im.key.get(), EVP_sha256())) return fail(ssl_fail("sign the CA certificate"));
  BIO* b = BIO_new(BIO_s_mem());
  if (!b || !PEM_write_bio_X509(b, x)) {
    BIO_free(b);
    return fail(ssl_fail("CA certificate PEM"));
  }
  char* data = nullptr;
  long n = BIO_get_mem_data(b, &data);
  im.pem.assign(data, (size_t)n);
  BIO_free(b);
  return ca;
}

CertAuthority::~CertAuthority() = default;

const std::string& CertAuthority::cert_pem() const { return impl_->pem; }
X509* CertAuthority::cert() const { return impl_->cert.get(); }
size_t CertAuthority::cached_leaves() const {
  std::lock_guard<std::mutex> l(impl_->mu);
  return impl_->leaves.size();
}

Result<SslCtxPtr> CertAuthority::Impl::make_leaf_ctx(const std::string& host) {
  X509Ptr leaf(X509_new());
  X509* x = leaf.get();
  if (!x || !X509_set_version(x, 2) || !set_random_serial(x)) return fail(ssl_fail("new leaf certificate"));
  X509_NAME* name = X509_get_subject_name(x);
  // CN is informational (clients check the SAN); it is limited to 64 characters.
  if (host.size() <= 64 && !add_name(name, "CN", host)) return fail(ssl_fail("leaf name"));
  if (!X509_set_issuer_name(x, X509_get_subject_name(cert.get()))) return fail(ssl_fail("leaf issuer"));
  if (!set_validity(x, kBackdate, kLeafValidity)) return fail(ssl_fail("leaf validity"));
  if (!X509_set_pubkey(x, leaf_key.get())) return fail(ssl_fail("leaf public key"));
  std::string san = (parse_ip(host) ? "IP:" : "DNS:") + host;
  if (!add_ext(x, cert.get(), NID_basic_constraints, "critical,CA:FALSE") ||
      !add_ext(x, cert.get(), NID_key_usage, "critical,digitalSignature") ||
      !add_ext(x, cert.get(), NID_ext_key_usage, "serverAuth") ||
      !add_ext(x, cert.get(), NID_subject_alt_name, san.c_str()) ||
      !add_ext(x, cert.get(), NID_subject_key_identifier, "hash") ||
      !add_ext(x, cert.get(), NID_authority_key_identifier, "keyid:always"))
    return fail(ssl_fail("leaf extensions"));
  if (!X509_sign(x, key.get(), EVP_sha256())) return fail(ssl_fail("sign a leaf certificate"));

  SslCtxPtr ctx(SSL_CTX_new(TLS_server_method()));
  if (!ctx) return fail(ssl_fail("server context"));
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_IGNORE_UNEXPECTED_EOF);
  if (SSL_CTX_use_certificate(ctx.get(), x) != 1 || SSL_CTX_use_PrivateKey(ctx.get(), leaf_key.get()) != 1 ||
      SSL_CTX_check_private_key(ctx.get()) != 1)
    return fail(ssl_fail("server context certificate"));
  // Clients that want the chain get it; the CA is what they trust.
  X509_up_ref(cert.get());
  if (SSL_CTX_add_extra_chain_cert(ctx.get(), cert.get()) != 1) {
    X509_free(cert.get());
    return fail(ssl_fail("server context chain"));
  }
  SSL_CTX_set_alpn_select_cb(ctx.get(), alpn_select, nullptr);
  SSL_CTX_set_session_cache_mode(ctx.get(), SSL_SESS_CACHE_OFF);
  SSL_CTX_set_num_tickets(ctx.get(), 0);
  return ctx;
}

Result<SSL_CTX*> CertAuthority::server_ctx_for(const std::string& raw_host) {
  std::string host = lower(raw_host);
  if (host.empty() || host.size() > 253) return fail(Error::msg("leaf certificate", "invalid host name"));
  Impl& im = *impl_;
  std::lock_guard<std::mutex> l(im.mu);
  auto now = std::chrono::steady_clock::now();
  if (auto it = im.leaves.find(host); it != im.leaves.end()) {
    // Reissued after a third of its validity: a long sandbox never meets an expired leaf.
    if (now - it->second.made < kLeafValidity / 3) {
      im.lru.splice(im.lru.begin(), im.lru, it->second.lru);
      return it->second.ctx.get();
    }
    im.lru.erase(it->second.lru);
    im.leaves.erase(it);
  }
  auto ctx = im.make_leaf_ctx(host);
  if (!ctx) return fail(ctx.error());
  while (im.leaves.size() >= kMaxCachedLeaves && !im.lru.empty()) {
    im.leaves.erase(im.lru.back());
    im.lru.pop_back();
  }
  im.lru.push_front(host);
  SSL_CTX* raw = ctx->get();
  im.leaves.emplace(host, Impl::Leaf{std::move(*ctx), now, im.lru.begin()});
  return raw;
}

// ---- upstream context -------------------------------------------------------------------------

Result<SslCtxPtr> make_upstream_ctx(const std::string& ca_file) {
  SslCtxPtr ctx(SSL_CTX_new(TLS_client_method()));
  if (!ctx) return fail(Error::msg("upstream TLS", openssl_error("client context")));
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  // Many servers close without close_notify; a body delimited by the close ends
  // there (what a client without a proxy would accept too).
  SSL_CTX_set_options(ctx.get(), SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  if (!ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(ctx.get(), ca_file.c_str(), nullptr) != 1)
      return fail(Error::msg("upstream trust store " + ca_file, openssl_error("cannot load")));
  } else if (SSL_CTX_set_default_verify_paths(ctx.get()) != 1) {
    return fail(Error::msg("upstream TLS", openssl_error("default trust store")));
  }
  static const unsigned char kHttp11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  SSL_CTX_set_alpn_protos(ctx.get(), kHttp11, sizeof kHttp11);
  return ctx;
}

// ---- SecretIndex ------------------------------------------------------------------------------

Result<void> SecretIndex::index(const Secret& s) {
  if (s.placeholder.size() < 8) return fail(Error::msg("secret " + s.name, "placeholder too short to be recognised"));
  policy::Network net;
  for (const auto& h : s.hosts) net.allowed_domains.push_back(policy::DomainEntry{h, {}});
  auto r = Rules::from_policy(net);
  if (!r) return fail(Error::msg("secret " + s.name + " hosts", r.error().str()));
  hosts_.push_back(std::move(*r));
  body_hosts_.emplace_back();
  if (!s.body_hosts.empty()) {
    policy::Network body;
    for (const auto& h : s.body_hosts) body.allowed_domains.push_back(policy::DomainEntry{h, {}});
    auto b = Rules::from_policy(body);
    if (!b) return fail(Error::msg("secret " + s.name + " bodyHosts", b.error().str()));
    body_hosts_.back() = std::move(*b);
  }
  lowered_.push_back(lower(s.placeholder));
  longest_ = std::max(longest_, s.placeholder.size());
  successor_of_.emplace_back();
  return {};
}

Result<SecretIndex> SecretIndex::build(std::shared_ptr<const SecretsConfig> cfg) {
  SecretIndex idx;
  for (const auto& s : cfg->secrets)
    if (auto r = idx.index(s); !r) return fail(r.error());
  idx.cfg_ = std::move(cfg);
  return idx;
}

Result<SecretIndex> SecretIndex::with_successor(size_t of, std::string value) const {
  const Secret& old = cfg_->secrets.at(of);
  auto ph = make_placeholder(old.name);
  if (!ph) return fail(ph.error());
  Secret next = old;  // its whole scope
  next.value = std::move(value);
  next.placeholder = std::move(*ph);
  // A new config: what was handed out of the old one (its CA, its other
  // secrets) stays as it was for whoever still holds the old index.
  SecretIndex idx = *this;
  auto cfg = std::make_shared<SecretsConfig>(*cfg_);
  cfg->secrets.push_back(std::move(next));
  if (auto r = idx.index(cfg->secrets.back()); !r) return fail(r.error());
  idx.successor_of_.back() = of;
  idx.cfg_ = std::move(cfg);
  return idx;
}

std::vector<size_t> SecretIndex::with_successors(std::vector<size_t> ids) const {
  // Successors come after what they succeed: one pass in order finds chains.
  for (size_t i = 0; i < successor_of_.size(); ++i)
    if (successor_of_[i] && std::find(ids.begin(), ids.end(), *successor_of_[i]) != ids.end() &&
        std::find(ids.begin(), ids.end(), i) == ids.end())
      ids.push_back(i);
  return ids;
}

SharedSecretIndex::SharedSecretIndex(SecretIndex idx) : now_(std::make_shared<const SecretIndex>(std::move(idx))) {}

std::shared_ptr<const SecretIndex> SharedSecretIndex::now() const {
  std::lock_guard lock(mu_);
  return now_;
}

Result<SharedSecretIndex::Learned> SharedSecretIndex::learn(const Host& host, uint16_t port, const std::string& field,
                                                            std::string value) {
  // Held while the next index is built: two refreshes at once both land, in turn.
  std::lock_guard lock(mu_);
  const auto& all = now_->secrets();
  if (std::any_of(all.begin(), all.end(), [&](const Secret& x) { return x.value == value; })) return Learned{now_, {}, {}};
  std::optional<size_t> of;
  for (size_t i : now_->for_host(host, port))
    if (all[i].refresh_field == field) of = i;
  if (!of) return Learned{now_, {}, {}};
  auto next = now_->with_successor(*of, std::move(value));
  if (!next) return fail(next.error());
  now_ = std::make_shared<const SecretIndex>(std::move(*next));
  return Learned{now_, of, now_->secrets().size() - 1};
}

std::vector<size_t> SecretIndex::in_body(const std::vector<size_t>& ids, const Host& host, uint16_t port) const {
  std::vector<size_t> r;
  for (size_t i : ids)
    if (body_hosts_.at(i) && body_hosts_[i]->allow_list_matches(host, port)) r.push_back(i);
  return r;
}

Result<std::string> make_placeholder(const std::string& name) {
  unsigned char r[16];
  if (::getrandom(r, sizeof r, 0) != static_cast<ssize_t>(sizeof r))
    return fail(Error::sys("getrandom for the placeholder of secret " + name));
  std::string s = "exg_ph_" + name + "_";
  char h[3];
  for (unsigned char b : r) {
    std::snprintf(h, sizeof h, "%02x", b);
    s += h;
  }
  return s;
}

const std::vector<Secret>& SecretIndex::secrets() const { return cfg_->secrets; }

std::vector<size_t> SecretIndex::for_host(const Host& host, uint16_t port) const {
  std::vector<size_t> r;
  for (size_t i = 0; i < hosts_.size(); ++i)
    if (hosts_[i].allow_list_matches(host, port)) r.push_back(i);
  return r;
}

const Secret* SecretIndex::find(std::string_view s, const std::vector<size_t>& allowed) const {
  if (s.size() < 8 || lowered_.empty()) return nullptr;
  std::string l = lower(s);
  for (size_t i = 0; i < lowered_.size(); ++i) {
    if (std::find(allowed.begin(), allowed.end(), i) != allowed.end()) continue;
    if (l.find(lowered_[i]) != std::string::npos) return &cfg_->secrets[i];
  }
  return nullptr;
}

std::vector<size_t> SecretIndex::allowed_in_header(const std::vector<size_t>& ids, std::string_view name) const {
  std::vector<size_t> r;
  std::string n = lower(name);
  for (size_t i : ids) {
    const auto& hs = cfg_->secrets[i].headers;
    if (hs.empty() || std::find(hs.begin(), hs.end(), n) != hs.end()) r.push_back(i);
  }
  return r;
}

std::vector<std::pair<std::string, std::string>> SecretIndex::headers_to_set(const std::vector<size_t>& ids,
                                                                            const std::string& host) const {
  // How specifically `pattern` names `host`: exact beats every wildcard; among
  // wildcards the longer suffix wins; 0: it does not name it (a port is ignored:
  // for_host has checked it).
  const std::string h = lower(host);
  auto specificity = [&](std::string p) -> size_t {
    p = lower(p);
    if (auto colon = p.rfind(':'); colon != std::string::npos && p.find(']') == std::string::npos) p.resize(colon);
    if (p == h) return SIZE_MAX;
    if (p.starts_with("*.") && h.size() > p.size() - 1 && h.ends_with(p.substr(1))) return p.size();
    return 0;
  };
  size_t best = 0;
  std::vector<std::pair<size_t, size_t>> cand;  // (secret, specificity)
  for (size_t i : ids) {
    const Secret& s = cfg_->secrets[i];
    if (s.set_header.empty()) continue;
    size_t sp = 0;
    for (const auto& p : s.hosts) sp = std::max(sp, specificity(p));
    if (sp == 0) continue;
    cand.emplace_back(i, sp);
    best = std::max(best, sp);
  }
  std::vector<std::pair<std::string, std::string>> out;
  for (auto [i, sp] : cand)
    if (sp == best) out.emplace_back(cfg_->secrets[i].set_header, cfg_->secrets[i].value);
  return out;
}

namespace {
// "Basic <credentials>" -> the credentials, else nullopt.
std::optional<std::string_view> basic_credentials(std::string_view v) {
  if (v.size() < 6 || lower(v.substr(0, 6)) != "basic ") return std::nullopt;
  v.remove_prefix(6);
  while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
  while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
  return v;
}
}  // namespace

const Secret* SecretIndex::find_in_header(std::string_view value, const std::vector<size_t>& allowed) const {
  if (const Secret* s = find(value, allowed)) return s;
  if (auto cred = basic_credentials(value))
    if (auto dec = detail::base64_decode(*cred)) return find(*dec, allowed);
  return nullptr;
}

std::vector<size_t> SecretIndex::occurring(std::string_view s, const std::vector<size_t>& among) const {
  std::vector<size_t> r;
  if (s.size() < 8 || among.empty()) return r;
  std::string l = lower(s);
  for (size_t i : among)
    if (i < lowered_.size() && l.find(lowered_[i]) != std::string::npos) r.push_back(i);
  return r;
}

std::vector<size_t> SecretIndex::occurring_in_header(std::string_view value, const std::vector<size_t>& among) const {
  std::vector<size_t> r = occurring(value, among);
  if (auto cred = basic_credentials(value))
    if (auto dec = detail::base64_decode(*cred))
      for (size_t i : occurring(*dec, among))
        if (std::find(r.begin(), r.end(), i) == r.end()) r.push_back(i);
  return r;
}

std::string placeholder_refusal(const Secret& s, std::string_view host, std::string_view where) {
  std::string hosts;
  for (const auto& h : s.hosts) hosts += (hosts.empty() ? "" : ", ") + h;
  std::string r = "the placeholder of secret " + s.name + " (in the " + std::string(where) + ") was refused on its way to ";
  r += host.empty() ? std::string("a host it is not meant for") : std::string(host);
  r += hosts.empty() ? std::string(": it is meant for no host") : ": it is meant only for " + hosts;
  if (!s.headers.empty()) {
    std::string hs;
    for (const auto& h : s.headers) hs += (hs.empty() ? "" : ", ") + h;
    r += " (header " + hs + ")";
  }
  return r;
}

// ---- replacement and scanning -----------------------------------------------------------------

namespace {
std::string replace_all(std::string_view in, const SecretIndex& idx, const std::vector<size_t>& which) {
  std::string s(in);
  for (size_t i : which) {
    const Secret& sec = idx.secrets()[i];
    for (size_t pos = 0; (pos = s.find(sec.placeholder, pos)) != std::string::npos;) {
      s.replace(pos, sec.placeholder.size(), sec.value);
      pos += sec.value.size();
    }
  }
  return s;
}
}  // namespace

std::string inject_secrets(std::string_view value, const SecretIndex& idx, const std::vector<size_t>& secrets) {
  if (auto cred = basic_credentials(value)) {
    if (auto dec = detail::base64_decode(*cred)) {
      std::string rep = replace_all(*dec, idx, secrets);
      if (rep != *dec) return std::string(value.substr(0, 5)) + " " + base64_encode(rep);
    }
  }
  return replace_all(value, idx, secrets);
}

PlaceholderScanner::PlaceholderScanner(const SharedSecretIndex& follow, std::vector<size_t> allowed)
    : follow_(&follow), held_(follow.now()), idx_(held_.get()), allowed_(std::move(allowed)) {}

const Secret* PlaceholderScanner::feed(std::string_view chunk) {
  if (follow_) {
    if (auto n = follow_->now(); n != held_) {
      held_ = std::move(n);
      idx_ = held_.get();
      allowed_ = idx_->with_successors(std::move(allowed_));
    }
  }
  scanned_ += chunk.size();
  size_t keep = idx_->longest_placeholder() ? idx_->longest_placeholder() - 1 : 0;
  std::string buf = carry_;
  buf.append(chunk);
  const Secret* hit = idx_->find(buf, allowed_);
  std::vector<size_t> unseen;
  for (size_t i : allowed_)
    if (std::find(seen_.begin(), seen_.end(), i) == seen_.end()) unseen.push_back(i);
  for (size_t i : idx_->occurring(buf, unseen)) {
    seen_.push_back(i);
    new_seen_.push_back(i);
  }
  carry_ = buf.size() > keep ? buf.substr(buf.size() - keep) : buf;
  return hit;
}

std::vector<size_t> PlaceholderScanner::take_passed() { return std::exchange(new_seen_, {}); }

}  // namespace exg::egress
