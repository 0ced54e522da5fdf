// SOCKS5 (src/egress/socks_parse.cpp): the greeting, RFC 1929 credentials and
// the request a client in the sandbox sends, in that order. Each parser either
// wants more bytes (0), consumes a message, or refuses; a message that parses
// whole never looks malformed or complete when cut short.
#include <cstdint>
#include <string>

#include "check.hpp"
#include "egress/proxy.hpp"

using namespace exg::egress::detail;

namespace {

template <typename Parse>
long consistent(std::string_view in, Parse parse) {
  long whole = parse(in);
  FUZZ_CHECK(whole <= (long)in.size(), "consumes at most what it was given");
  if (whole > 0)
    for (size_t k = 0; k < (size_t)whole; ++k) FUZZ_CHECK(parse(in.substr(0, k)) == 0, "a cut message wants more");
  return whole;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  long g = consistent(in, [](std::string_view s) {
    bool no_auth = false, userpass = false;
    return parse_socks_greeting(s, no_auth, userpass);
  });
  if (g <= 0) return 0;
  in.remove_prefix(g);
  long u = consistent(in, [](std::string_view s) {
    std::string user, pass;
    long r = parse_socks_userpass(s, user, pass);
    if (r > 0) FUZZ_CHECK(user.size() <= 255 && pass.size() <= 255, "RFC 1929 fields are short");
    return r;
  });
  if (u > 0) in.remove_prefix(u);
  consistent(in, [](std::string_view s) {
    SocksRequest req;
    long r = parse_socks_request(s, req);
    if (r > 0) {
      FUZZ_CHECK(!req.host.empty(), "a request names a host");
      if (req.atyp == 1) FUZZ_CHECK(exg::egress::parse_ip(req.host).has_value(), "an IPv4 literal reads back");
      (void)exg::egress::normalise_host(req.host);
    }
    return r;
  });
  return 0;
}
