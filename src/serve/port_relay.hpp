// The relay serve starts inside a sandbox to reach one of its ports
// (port_proxy.cpp): a process of the sandbox, started by its agent, that
// connects to 127.0.0.1:PORT (then [::1]:PORT) in the sandbox's network
// namespace and copies its stdin to the connection and the connection to its
// stdout until the connection ends. It is python3 (the code interpreter's
// sandboxes have it; a root filesystem without it gets a 502 saying so), so
// that the agent needs no op of its own for it.
#pragma once
#include <string>
#include <vector>

namespace exg::serve {

// The argv of a relay to `port`; `wait_s`: how long a refused connection is
// tried again (a server that is starting), 0 for not at all.
std::vector<std::string> port_relay_argv(const std::string& port, int wait_s);

}  // namespace exg::serve
