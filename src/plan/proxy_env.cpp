#include "plan/proxy_env.hpp"

namespace exg::plan {

std::vector<std::pair<std::string, std::string>> proxy_env(uint16_t http_port, uint16_t socks_port,
                                                           const std::string& token) {
  std::vector<std::pair<std::string, std::string>> env;
  // The proxy's user name and token (egress/proxy.hpp ProxyConfig::token), in the URL's userinfo.
  const std::string cred = token.empty() ? "" : "exguardian:" + token + "@";
  std::string http = "http://" + cred + "127.0.0.1:" + std::to_string(http_port);
  std::string socks = "socks5h://" + cred + "127.0.0.1:" + std::to_string(socks_port);
  for (const char* n : {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "GRPC_PROXY", "grpc_proxy",
                        "DOCKER_HTTP_PROXY", "DOCKER_HTTPS_PROXY", "npm_config_proxy", "npm_config_https_proxy",
                        "YARN_HTTP_PROXY", "YARN_HTTPS_PROXY"})
    env.emplace_back(n, http);
  for (const char* n : {"ALL_PROXY", "all_proxy", "FTP_PROXY", "ftp_proxy", "RSYNC_PROXY"}) env.emplace_back(n, socks);
  env.emplace_back("NO_PROXY", "localhost,127.0.0.1,::1");
  env.emplace_back("no_proxy", "localhost,127.0.0.1,::1");
  env.emplace_back("GIT_SSH_COMMAND", "ssh -o ProxyCommand='nc -X 5 -x 127.0.0.1:" + std::to_string(socks_port) + " %h %p'");
  return env;
}

}  // namespace exg::plan
