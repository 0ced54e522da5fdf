// The variables that point common clients at the egress proxy inside a
// sandbox (srt sets the same names): the Plan's environment and the
// containers of `exguardian runtime` get the same set.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace exg::plan {

std::vector<std::pair<std::string, std::string>> proxy_env(uint16_t http_port, uint16_t socks_port);

}  // namespace exg::plan
