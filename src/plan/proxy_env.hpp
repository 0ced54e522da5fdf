// The variables that point common clients at the egress proxy inside a
// sandbox (srt sets the same names): the Plan's environment and the
// containers of `exguardian runtime` get the same set.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace exg::plan {

// `token`: the proxy asks its clients for it (listeners on the host's
// loopback, the landlock layer): the URLs carry exguardian:TOKEN@ (HTTP
// Basic, SOCKS5 user/password). Empty: none.
std::vector<std::pair<std::string, std::string>> proxy_env(uint16_t http_port, uint16_t socks_port,
                                                           const std::string& token = "");

}  // namespace exg::plan
