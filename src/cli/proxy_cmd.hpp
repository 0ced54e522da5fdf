// exguardian proxy: the egress proxy on its own (for containers and other sandboxes).
#pragma once
#include <string>

namespace exg::cli {

// exguardian proxy --listen ADDR:PORT [--socks ADDR:PORT] --policy FILE [--audit-log FILE]
// ADDR:PORT is "127.0.0.1:3128" or "[::1]:3128". Loads the policy, binds the
// listeners, serves until SIGINT/SIGTERM, prints the stats summary to stderr.
// Exit status: 0 after a signal; 2 for a bad argument or policy; 1 when a
// listener cannot be bound.
int proxy_main(const std::string& listen, const std::string& socks, const std::string& policy_file,
               const std::string& audit_log);

}  // namespace exg::cli
