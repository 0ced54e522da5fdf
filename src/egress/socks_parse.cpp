// SOCKS5 handshake parsing (RFC 1928): the greeting and the request.
#include <arpa/inet.h>

#include "egress/proxy.hpp"

namespace exg::egress::detail {

long parse_socks_greeting(std::string_view in, bool& no_auth_offered) {
  bool userpass = false;
  return parse_socks_greeting(in, no_auth_offered, userpass);
}

long parse_socks_greeting(std::string_view in, bool& no_auth_offered, bool& userpass_offered) {
  if (in.empty()) return 0;
  if ((uint8_t)in[0] != 5) return -1;
  if (in.size() < 2) return 0;
  size_t n = (uint8_t)in[1];
  if (in.size() < 2 + n) return 0;
  no_auth_offered = userpass_offered = false;
  for (size_t i = 0; i < n; ++i) {
    if ((uint8_t)in[2 + i] == 0) no_auth_offered = true;
    if ((uint8_t)in[2 + i] == 2) userpass_offered = true;
  }
  return (long)(2 + n);
}

long parse_socks_userpass(std::string_view in, std::string& user, std::string& pass) {
  if (in.empty()) return 0;
  if ((uint8_t)in[0] != 1) return -1;
  if (in.size() < 2) return 0;
  size_t ul = (uint8_t)in[1];
  if (in.size() < 2 + ul + 1) return 0;
  size_t pl = (uint8_t)in[2 + ul];
  if (in.size() < 3 + ul + pl) return 0;
  user.assign(in.substr(2, ul));
  pass.assign(in.substr(3 + ul, pl));
  return (long)(3 + ul + pl);
}

long parse_socks_request(std::string_view in, SocksRequest& req) {
  if (in.empty()) return 0;
  if ((uint8_t)in[0] != 5) return -1;
  if (in.size() < 5) return 0;
  req.cmd = (uint8_t)in[1];
  req.atyp = (uint8_t)in[3];
  size_t addr_len;
  size_t off = 4;
  switch (req.atyp) {
    case 1: addr_len = 4; break;
    case 4: addr_len = 16; break;
    case 3:
      addr_len = (uint8_t)in[4];
      off = 5;
      if (addr_len == 0) return -3;
      break;
    default: return -2;
  }
  if (in.size() < off + addr_len + 2) return 0;
  const char* a = in.data() + off;
  if (req.atyp == 3) {
    req.host.assign(a, addr_len);
  } else {
    char buf[INET6_ADDRSTRLEN];
    ::inet_ntop(req.atyp == 1 ? AF_INET : AF_INET6, a, buf, sizeof buf);
    req.host = buf;
  }
  req.port = (uint16_t)(((uint8_t)in[off + addr_len] << 8) | (uint8_t)in[off + addr_len + 1]);
  return (long)(off + addr_len + 2);
}

}  // namespace exg::egress::detail
