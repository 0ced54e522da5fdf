// Credential injection, proxy side: the in-memory CA and its leaves (checked
// with OpenSSL's own chain verification), the index of secrets by host,
// placeholder replacement (also inside Basic credentials) and the scanning
// that catches a placeholder on its way elsewhere, across read boundaries.
#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <random>

#include "egress/proxy.hpp"
#include "egress/secrets.hpp"

namespace {

using namespace exg::egress;

std::shared_ptr<CertAuthority> make_ca(const char* id = "t1") {
  auto ca = CertAuthority::generate(id);
  EXPECT_TRUE(ca.has_value()) << (ca ? "" : ca.error().str());
  return *ca;
}

X509* leaf_of(CertAuthority& ca, const std::string& host) {
  auto ctx = ca.server_ctx_for(host);
  EXPECT_TRUE(ctx.has_value());
  return ctx ? SSL_CTX_get0_certificate(*ctx) : nullptr;
}

// X509_verify_cert of `leaf` against a store holding only `ca`, as a TLS client checks a server.
int verify(X509* ca, X509* leaf, const std::string& host) {
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca);
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, leaf, nullptr);
  X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER);
  X509_VERIFY_PARAM* p = X509_STORE_CTX_get0_param(ctx);
  if (exg::egress::parse_ip(host)) X509_VERIFY_PARAM_set1_ip_asc(p, host.c_str());
  else X509_VERIFY_PARAM_set1_host(p, host.c_str(), host.size());
  int ok = X509_verify_cert(ctx);
  int err = ok == 1 ? X509_V_OK : X509_STORE_CTX_get_error(ctx);
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  return err;
}

TEST(CertAuthority, IsACaNamedForTheSandbox) {
  auto ca = make_ca("sbx-42");
  X509* c = ca->cert();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(X509_check_ca(c), 1);
  int crit = -1;
  auto* bc = static_cast<BASIC_CONSTRAINTS*>(X509_get_ext_d2i(c, NID_basic_constraints, &crit, nullptr));
  ASSERT_NE(bc, nullptr);
  EXPECT_TRUE(bc->ca);
  EXPECT_EQ(crit, 1);
  BASIC_CONSTRAINTS_free(bc);
  EXPECT_TRUE(X509_get_key_usage(c) & KU_KEY_CERT_SIGN);
  char cn[256];
  X509_NAME_get_text_by_NID(X509_get_subject_name(c), NID_commonName, cn, sizeof cn);
  EXPECT_STREQ(cn, "ExGuardian sandbox sbx-42 CA");
  // The PEM is the certificate only: no key in it.
  EXPECT_NE(ca->cert_pem().find("BEGIN CERTIFICATE"), std::string::npos);
  EXPECT_EQ(ca->cert_pem().find("PRIVATE"), std::string::npos);
  EXPECT_EQ(EVP_PKEY_get_base_id(X509_get0_pubkey(c)), EVP_PKEY_EC);
}

TEST(CertAuthority, LeafVerifiesAgainstItsCaOnly) {
  auto ca = make_ca();
  X509* leaf = leaf_of(*ca, "api.secret.test");
  ASSERT_NE(leaf, nullptr);
  EXPECT_EQ(verify(ca->cert(), leaf, "api.secret.test"), X509_V_OK);
  EXPECT_EQ(verify(ca->cert(), leaf, "other.test"), X509_V_ERR_HOSTNAME_MISMATCH);
  auto other = make_ca("t2");
  EXPECT_NE(verify(other->cert(), leaf, "api.secret.test"), X509_V_OK);
  // serverAuth, not a CA, backdated a little, short-lived.
  EXPECT_TRUE(X509_get_extended_key_usage(leaf) & XKU_SSL_SERVER);
  EXPECT_EQ(X509_check_ca(leaf), 0);
  EXPECT_LT(X509_cmp_current_time(X509_get0_notBefore(leaf)), 0);
  int days = 0, secs = 0;
  ASSERT_EQ(ASN1_TIME_diff(&days, &secs, X509_get0_notBefore(leaf), X509_get0_notAfter(leaf)), 1);
  EXPECT_LE(days, 4);
}

TEST(CertAuthority, IpLiteralLeafHasAnIpSan) {
  auto ca = make_ca();
  X509* leaf = leaf_of(*ca, "192.0.2.7");
  ASSERT_NE(leaf, nullptr);
  EXPECT_EQ(verify(ca->cert(), leaf, "192.0.2.7"), X509_V_OK);
  EXPECT_NE(verify(ca->cert(), leaf, "192.0.2.8"), X509_V_OK);
}

TEST(CertAuthority, LeavesAreCachedAndBounded) {
  auto ca = make_ca();
  auto a = ca->server_ctx_for("a.test"), b = ca->server_ctx_for("A.TEST");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(ca->cached_leaves(), 1u);
  for (size_t i = 0; i < CertAuthority::kMaxCachedLeaves + 20; ++i)
    ASSERT_TRUE(ca->server_ctx_for("h" + std::to_string(i) + ".test"));
  EXPECT_EQ(ca->cached_leaves(), CertAuthority::kMaxCachedLeaves);
  EXPECT_FALSE(ca->server_ctx_for(""));
}

TEST(CertAuthority, EachSandboxHasItsOwnCa) {
  auto a = make_ca("x"), b = make_ca("x");
  EXPECT_NE(a->cert_pem(), b->cert_pem());
  X509* leaf = leaf_of(*a, "api.secret.test");
  EXPECT_NE(verify(b->cert(), leaf, "api.secret.test"), X509_V_OK);
}

std::shared_ptr<SecretsConfig> config() {
  auto c = std::make_shared<SecretsConfig>();
  c->secrets.push_back({"GITHUB_TOKEN", "exg_ph_GITHUB_TOKEN_0123456789abcdef0123456789abcdef", "ghp_realvalue1",
                        {"api.github.com", "*.githubusercontent.com"}});
  c->secrets.push_back({"NPM_TOKEN", "exg_ph_NPM_TOKEN_fedcba9876543210fedcba9876543210", "npm_realvalue2",
                        {"registry.npmjs.org:443"}});
  return c;
}

Host host(const char* h) { return *normalise_host(h); }

TEST(SecretIndex, HostsMatchAsAllowedDomains) {
  auto idx = SecretIndex::build(config());
  ASSERT_TRUE(idx);
  EXPECT_EQ(idx->for_host(host("api.github.com"), 443), std::vector<size_t>{0});
  EXPECT_EQ(idx->for_host(host("API.GitHub.com."), 443), std::vector<size_t>{0});
  EXPECT_EQ(idx->for_host(host("raw.githubusercontent.com"), 443), std::vector<size_t>{0});
  EXPECT_TRUE(idx->for_host(host("githubusercontent.com"), 443).empty());  // "*." means subdomains only
  EXPECT_TRUE(idx->for_host(host("api.github.com.evil.test"), 443).empty());
  EXPECT_EQ(idx->for_host(host("registry.npmjs.org"), 443), std::vector<size_t>{1});
  EXPECT_TRUE(idx->for_host(host("registry.npmjs.org"), 80).empty());  // the port is part of the entry
  EXPECT_TRUE(idx->for_host(host("192.0.2.1"), 443).empty());
}

TEST(SecretIndex, BadHostPatternIsAnErrorNamingTheSecret) {
  auto c = config();
  c->secrets[1].hosts = {"*.com"};
  auto idx = SecretIndex::build(c);
  ASSERT_FALSE(idx);
  EXPECT_NE(idx.error().str().find("NPM_TOKEN"), std::string::npos);
}

// E2B's network.rules precedence: an exact host beats every wildcard, a longer
// wildcard a shorter one; rule sets are not merged; secrets without setHeader
// are never set as headers.
TEST(SecretIndex, HeadersToSetTakeTheMostSpecificHostOnly) {
  auto c = std::make_shared<SecretsConfig>();
  auto add = [&](const char* name, const char* host, const char* header, const char* value) {
    exg::egress::Secret s{name, std::string("exg_ph_") + name + "_0123456789abcdef0123456789abcdef", value, {host}};
    s.set_header = header;
    c->secrets.push_back(s);
  };
  add("E2B_RULE_1", "*.example.test", "X-Wild", "wild-value");
  add("E2B_RULE_2", "*.api.example.test", "X-Api", "api-value");
  add("E2B_RULE_3", "v1.api.example.test", "Authorization", "Bearer exact");
  add("E2B_RULE_4", "v1.api.example.test", "X-Team", "team-blue");
  c->secrets.push_back({"PLAIN", "exg_ph_PLAIN_0123456789abcdef0123456789abcdef", "plain-value", {"*.example.test"}});
  auto idx = SecretIndex::build(c);
  ASSERT_TRUE(idx) << idx.error().str();
  auto set = [&](const char* h) { return idx->headers_to_set(idx->for_host(host(h), 443), h); };
  using V = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(set("v1.api.example.test"), (V{{"Authorization", "Bearer exact"}, {"X-Team", "team-blue"}}));
  EXPECT_EQ(set("V1.API.example.test"), (V{{"Authorization", "Bearer exact"}, {"X-Team", "team-blue"}}));
  EXPECT_EQ(set("v2.api.example.test"), (V{{"X-Api", "api-value"}}));
  EXPECT_EQ(set("deep.v2.api.example.test"), (V{{"X-Api", "api-value"}}));
  EXPECT_EQ(set("www.example.test"), (V{{"X-Wild", "wild-value"}}));
  EXPECT_TRUE(set("example.test").empty());  // "*." is subdomains only
  EXPECT_TRUE(set("other.test").empty());
}

TEST(Injection, ReplacesPlaceholdersOfTheGivenSecretsOnly) {
  auto c = config();
  auto idx = *SecretIndex::build(c);
  const std::string gh = c->secrets[0].placeholder, npm = c->secrets[1].placeholder;
  EXPECT_EQ(inject_secrets("Bearer " + gh, idx, {0}), "Bearer ghp_realvalue1");
  EXPECT_EQ(inject_secrets("token " + gh + " and " + gh, idx, {0}), "token ghp_realvalue1 and ghp_realvalue1");
  EXPECT_EQ(inject_secrets("Bearer " + npm, idx, {0}), "Bearer " + npm);  // not this host's secret
  EXPECT_EQ(inject_secrets("nothing here", idx, {0, 1}), "nothing here");
  // Basic credentials: decoded, replaced, re-encoded (user and password).
  std::string basic = "Basic " + base64_encode("x-access-token:" + gh);
  EXPECT_EQ(inject_secrets(basic, idx, {0}), "Basic " + base64_encode("x-access-token:ghp_realvalue1"));
  EXPECT_EQ(inject_secrets("basic " + base64_encode(gh + ":"), idx, {0}), "basic " + base64_encode("ghp_realvalue1:"));
  EXPECT_EQ(inject_secrets("Basic " + base64_encode("user:pw"), idx, {0}), "Basic " + base64_encode("user:pw"));
}

TEST(Injection, Base64RoundTrips) {
  for (std::string s : {"", "a", "ab", "abc", "abcd", "user:pass\xff\x01"}) {
    auto d = exg::egress::detail::base64_decode(base64_encode(s));
    ASSERT_TRUE(d);
    EXPECT_EQ(*d, s);
  }
  EXPECT_EQ(base64_encode("user:pass"), "dXNlcjpwYXNz");
}

TEST(Exfiltration, FoundInHeadersTargetsAndBasicCredentials) {
  auto c = config();
  auto idx = *SecretIndex::build(c);
  const std::string gh = c->secrets[0].placeholder;
  EXPECT_EQ(idx.find("https://x.test/?t=" + gh), &c->secrets[0]);
  EXPECT_EQ(idx.find(gh + ".attacker.test"), &c->secrets[0]);
  std::string lowered = gh;
  for (char& ch : lowered) ch = (char)std::tolower((unsigned char)ch);
  EXPECT_EQ(idx.find(lowered + ".attacker.test"), &c->secrets[0]);  // DNS names are case-insensitive
  EXPECT_EQ(idx.find("Bearer " + gh, {0}), nullptr);                  // allowed here
  EXPECT_EQ(idx.find_in_header("Basic " + base64_encode("u:" + gh)), &c->secrets[0]);
  EXPECT_EQ(idx.find_in_header("Basic " + base64_encode("u:" + gh), {0}), nullptr);
  // No false positives: prefixes, the values themselves, the bare prefix.
  EXPECT_EQ(idx.find(gh.substr(0, gh.size() - 1)), nullptr);
  EXPECT_EQ(idx.find("exg_ph_GITHUB_TOKEN_"), nullptr);
  EXPECT_EQ(idx.find("ghp_realvalue1"), nullptr);
  EXPECT_EQ(idx.find_in_header("Basic !!notbase64"), nullptr);
}

TEST(Exfiltration, ScannerCatchesAPlaceholderSplitAtEveryPosition) {
  auto c = config();
  auto idx = *SecretIndex::build(c);
  const std::string npm = c->secrets[1].placeholder;
  std::string stream = std::string(1000, 'x') + npm + std::string(50, 'y');
  for (size_t cut = 1; cut < stream.size(); cut += (cut > 990 && cut < 1060) ? 1 : 97) {
    PlaceholderScanner sc(idx);
    const Secret* a = sc.feed(std::string_view(stream).substr(0, cut));
    const Secret* b = sc.feed(std::string_view(stream).substr(cut));
    EXPECT_EQ(a ? a : b, &c->secrets[1]) << "cut at " << cut;
  }
  // One byte at a time.
  PlaceholderScanner sc(idx);
  const Secret* hit = nullptr;
  for (char ch : stream)
    if (!hit) hit = sc.feed(std::string_view(&ch, 1));
  EXPECT_EQ(hit, &c->secrets[1]);
  // Allowed secrets are not reported.
  PlaceholderScanner allowed(idx, {1});
  EXPECT_EQ(allowed.feed(stream), nullptr);
}

TEST(Exfiltration, ScannerHasNoFalsePositivesOnRandomBytes) {
  auto c = config();
  auto idx = *SecretIndex::build(c);
  std::mt19937 rng(7);
  PlaceholderScanner sc(idx);
  std::string chunk(4096, '\0');
  for (int i = 0; i < 64; ++i) {
    for (char& ch : chunk) ch = (char)(rng() & 0xff);
    // Near misses too: the placeholder with its last character changed.
    std::string near = c->secrets[0].placeholder;
    near.back() = near.back() == '0' ? '1' : '0';
    chunk.replace(100, near.size(), near);
    ASSERT_EQ(sc.feed(chunk), nullptr);
  }
  EXPECT_EQ(sc.scanned(), 64u * 4096u);
}

TEST(ValueMasking, ValuesBecomePlaceholdersAcrossReads) {
  auto c = config();
  auto idx = *SecretIndex::build(c);
  const std::string gh = c->secrets[0].placeholder, npm = c->secrets[1].placeholder;
  const std::string body = "{\"echo\": \"Bearer ghp_realvalue1\", \"npm\": \"npm_realvalue2\", \"again\": \"ghp_realvalue1\"}";
  const std::string want = "{\"echo\": \"Bearer " + gh + "\", \"npm\": \"npm_realvalue2\", \"again\": \"" + gh + "\"}";
  for (size_t step = 1; step <= body.size(); ++step) {
    ValueMasker m(idx, {0});  // only the secrets that went to this host
    std::string out;
    for (size_t i = 0; i < body.size(); i += step) m.feed(std::string_view(body).substr(i, step), out);
    m.finish(out);
    ASSERT_EQ(out, want) << "pieces of " << step;
  }
  ValueMasker both(idx, {0, 1});
  EXPECT_EQ(both.mask("x ghp_realvalue1 npm_realvalue2 y"), "x " + gh + " " + npm + " y");
  EXPECT_EQ(both.mask("ghp_realvalue"), "ghp_realvalue");  // a prefix is left alone
  EXPECT_EQ(both.mask(""), "");
}

TEST(InterceptedHttp, ChunkTrackerDecodes) {
  exg::egress::detail::ChunkTracker ct;
  std::string data;
  std::string in = "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: x\r\n\r\nNEXT";
  long n = ct.feed(in, &data);
  EXPECT_EQ(n, (long)(in.size() - 4));
  EXPECT_TRUE(ct.done());
  EXPECT_EQ(data, "hello world");
}

TEST(InterceptedHttp, KeepAliveHeadsAndConnectionTokens) {
  using namespace exg::egress::detail;
  auto h = *parse_request_head("GET / HTTP/1.1\r\nHost: a.test\r\nConnection: Keep-Alive, Close\r\n\r\n");
  EXPECT_TRUE(connection_has(h, "close"));
  EXPECT_TRUE(connection_has(h, "keep-alive"));
  EXPECT_FALSE(connection_has(h, "upgrade"));
  EXPECT_EQ(forwarded_request_head(h, false), "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n");
  auto r = *parse_response_head("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(client_response_head(r, false), "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
}

TEST(InterceptedHttp, HostHeaderInsideTlsDefaultsTo443) {
  using namespace exg::egress::detail;
  Authority a{"api.secret.test", 443, true};
  EXPECT_TRUE(host_header_matches("api.secret.test", a, 443));
  EXPECT_TRUE(host_header_matches("API.secret.test:443", a, 443));
  EXPECT_FALSE(host_header_matches("api.secret.test", a));  // plain HTTP's default 80
  EXPECT_FALSE(host_header_matches("attacker.example", a, 443));
  EXPECT_FALSE(host_header_matches("api.secret.test:8443", a, 443));
}

TEST(InterceptedHttp, ResponseFraming) {
  using namespace exg::egress::detail;
  auto resp = [](const char* h) { return *parse_response_head(h); };
  EXPECT_EQ(response_body_framing(resp("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"), "GET").kind,
            ResponseFraming::Length);
  EXPECT_EQ(response_body_framing(resp("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"), "HEAD").kind,
            ResponseFraming::None);
  EXPECT_EQ(response_body_framing(resp("HTTP/1.1 204 No Content\r\n\r\n"), "GET").kind, ResponseFraming::None);
  EXPECT_EQ(response_body_framing(resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"), "GET").kind,
            ResponseFraming::Chunked);
  EXPECT_EQ(response_body_framing(resp("HTTP/1.1 200 OK\r\n\r\n"), "GET").kind, ResponseFraming::UntilClose);
  EXPECT_EQ(response_body_framing(resp("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"), "GET").kind,
            ResponseFraming::UntilClose);
}

TEST(InterceptedHttp, ForwardedHeadDropsHopByHopAndCloses) {
  using namespace exg::egress::detail;
  auto h = *parse_request_head(
      "GET /user HTTP/1.1\r\nHost: api.github.com\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\n"
      "Authorization: Bearer v\r\nProxy-Authorization: Basic x\r\nUpgrade: h2c\r\n\r\n");
  std::string f = forwarded_request_head(h);
  EXPECT_EQ(f, "GET /user HTTP/1.1\r\nHost: api.github.com\r\nAuthorization: Bearer v\r\nConnection: close\r\n\r\n");
}

}  // namespace
