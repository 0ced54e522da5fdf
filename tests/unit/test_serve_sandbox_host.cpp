// The host names of a sandbox's ports (src/serve/sandbox_host.hpp): what the
// SDK's getHost(port) returns, `PORT-ID.DOMAIN`, and nothing else.
#include <gtest/gtest.h>

#include "serve/sandbox_host.hpp"

namespace exg::serve {
namespace {

TEST(ServeSandboxHost, GetHostNames) {
  auto h = parse_sandbox_host("3000-abc123.exg.test", "exg.test");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->port, "3000");
  EXPECT_EQ(h->id, "abc123");
  h = parse_sandbox_host("49999-ABC123.Exg.Test.:8080", "exg.test");  // case, an absolute name, the server's port
  ASSERT_TRUE(h);
  EXPECT_EQ(h->port, "49999");
  EXPECT_EQ(h->id, "abc123");
}

TEST(ServeSandboxHost, OtherNamesAreNotSandboxes) {
  for (const char* host : {"127.0.0.1:8080", "exg.test", "abc.exg.test", "3000-abc.other.test", "3000-abc.xexg.test",
                           "3000-.exg.test", "-abc.exg.test", "30x0-abc.exg.test", "300000-abc.exg.test", "3000-a.b.exg.test",
                           "3000-a/b.exg.test", ".exg.test", ""})
    EXPECT_FALSE(parse_sandbox_host(host, "exg.test")) << host;
  EXPECT_FALSE(parse_sandbox_host("3000-abc.exg.test", "")) << "no --domain: no host names";
}

TEST(ServeSandboxHost, DomainChecked) {
  EXPECT_EQ(domain_error("exg.test"), "");
  EXPECT_EQ(domain_error("localhost"), "");
  for (const char* d : {"", "exg..test", ".exg.test", "exg.test.", "-x.test", "ex g.test", "*.test"}) EXPECT_NE(domain_error(d), "") << d;
}

}  // namespace
}  // namespace exg::serve
