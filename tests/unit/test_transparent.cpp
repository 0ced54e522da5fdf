// Transparent egress's pure parts: the resolver's own addresses, the SNI of a
// TLS ClientHello (real hellos made by OpenSSL), the plan's switch.
#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include "egress/transparent.hpp"
#include "plan/plan.hpp"

namespace exg::egress {
namespace {

// The first flight an OpenSSL client sends for `sni` (none when empty).
std::string client_hello(const std::string& sni) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(ctx);
  BIO* rbio = BIO_new(BIO_s_mem());
  BIO* wbio = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, rbio, wbio);
  if (!sni.empty()) SSL_set_tlsext_host_name(ssl, sni.c_str());
  SSL_set_connect_state(ssl);
  SSL_do_handshake(ssl);
  char* data = nullptr;
  long n = BIO_get_mem_data(wbio, &data);
  std::string out(data, static_cast<size_t>(n));
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  return out;
}

TEST(TransparentAddresses, StableBothWaysAndInRange) {
  HandedOutAddresses h;
  auto a = h.address_for("allowed.test");
  auto b = h.address_for("other.test");
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->str(), "198.18.0.1");
  EXPECT_EQ(b->str(), "198.18.0.2");
  EXPECT_EQ(h.address_for("allowed.test")->str(), "198.18.0.1");  // the same for the sandbox's life
  ASSERT_NE(h.name_for(*b), nullptr);
  EXPECT_EQ(*h.name_for(*b), "other.test");
  EXPECT_EQ(h.name_for(*parse_ip("198.18.0.3")), nullptr);   // in the range, never handed out
  EXPECT_EQ(h.name_for(*parse_ip("203.0.113.10")), nullptr);
  EXPECT_TRUE(HandedOutAddresses::in_range(*parse_ip("198.19.255.255")));
  EXPECT_FALSE(HandedOutAddresses::in_range(*parse_ip("198.20.0.0")));
  EXPECT_FALSE(HandedOutAddresses::in_range(*parse_ip("198.17.255.255")));
}

TEST(TransparentSni, FromRealHellos) {
  auto h = client_hello("plain.test");
  auto r = detail::parse_client_hello_sni(h);
  EXPECT_EQ(r.kind, detail::ClientHelloSni::Sni);
  EXPECT_EQ(r.name, "plain.test");
  EXPECT_EQ(detail::parse_client_hello_sni(client_hello("")).kind, detail::ClientHelloSni::NoSni);
  // Every proper prefix needs more; nothing is decided on part of a record.
  for (size_t n = 0; n < h.size(); n += 7)
    EXPECT_EQ(detail::parse_client_hello_sni(h.substr(0, n)).kind, detail::ClientHelloSni::NeedMore) << n;
}

TEST(TransparentSni, NotTlsAndMalformed) {
  EXPECT_EQ(detail::parse_client_hello_sni("GET / HTTP/1.1\r\n").kind, detail::ClientHelloSni::NotTls);
  EXPECT_EQ(detail::parse_client_hello_sni("SSH-2.0-x\r\n").kind, detail::ClientHelloSni::NotTls);
  auto h = client_hello("plain.test");
  std::string bad = h;
  bad[5] = 2;  // a ServerHello type in the record
  EXPECT_EQ(detail::parse_client_hello_sni(bad).kind, detail::ClientHelloSni::Malformed);
  // The hello's length past the record's end.
  bad = h;
  bad[6] = '\x7f';
  EXPECT_EQ(detail::parse_client_hello_sni(bad).kind, detail::ClientHelloSni::Malformed);
  // Every single-byte corruption of the body: some answer, never a crash or a read past the end.
  for (size_t i = 5; i < h.size(); ++i) {
    std::string c = h;
    c[i] = static_cast<char>(c[i] ^ 0x5a);
    auto r = detail::parse_client_hello_sni(c);
    if (r.kind == detail::ClientHelloSni::Sni) EXPECT_LE(r.name.size(), h.size());
  }
}

TEST(TransparentPlan, EgressLine) {
  plan::ProxyPlan p;
  p.transparent = true;
  p.resolver = true;
  EXPECT_NE(p.text().find("transparent: TCP to any non-loopback IPv4 address redirected to the proxy"), std::string::npos);
  p.transparent = false;
  EXPECT_NE(p.text().find("transparent: off (network.transparent: false)"), std::string::npos);
}

}  // namespace
}  // namespace exg::egress
