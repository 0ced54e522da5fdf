// exguardian proxy: the egress proxy on its own (for containers and other sandboxes).
#pragma once
#include <cstddef>
#include <string>

namespace exg::cli {

// exguardian proxy --listen ADDR:PORT|unix:/path [--socks ADDR:PORT|unix:/path] --policy FILE
//                  [--audit-log FILE] [--token-file FILE]
// ADDR:PORT is "127.0.0.1:3128" or "[::1]:3128"; unix:/path makes an AF_UNIX
// listener (mode 0600, no token asked). A TCP listener requires a token
// (--token-file, else the environment variable EXGUARDIAN_PROXY_TOKEN): HTTP
// clients send Proxy-Authorization (Basic exguardian:TOKEN or Bearer TOKEN),
// SOCKS5 clients use username/password auth (exguardian / TOKEN). Loads the
// policy, binds the listeners, serves until SIGINT/SIGTERM, prints the stats
// summary to stderr. Exit status: 0 after a signal; 2 for a bad argument or
// policy; 125 for a TCP listener without a token; 1 when a listener cannot be bound.
//
// The policy's secrets are read at start (values from this process's
// environment or files) and injected into requests to their hosts, with a CA
// made in memory; --ca-cert-out FILE writes its certificate (the clients must
// trust it), --placeholders-out FILE the NAME=placeholder lines (mode 0600) the
// clients use instead of the values. Upstreams are verified against OpenSSL's
// default trust store of this host.
// Bounds on what clients may hold (0: the proxy's defaults, egress/proxy.hpp).
struct ProxyBounds {
  size_t max_connections = 0;  // --max-connections N: beyond, 503 / SOCKS reply 1 and an audit line
  double header_timeout_s = 0;  // --header-timeout S: a request head (or SOCKS greeting) must be complete by then
};
int proxy_main(const std::string& listen, const std::string& socks, const std::string& policy_file,
               const std::string& audit_log, const std::string& token_file = "", const std::string& ca_cert_out = "",
               const std::string& placeholders_out = "", const ProxyBounds& bounds = {});

}  // namespace exg::cli
