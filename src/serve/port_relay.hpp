// The relay serve starts inside a sandbox to reach one of its ports
// (port_proxy.cpp): a process of the sandbox, started by its agent, that
// connects to 127.0.0.1:PORT (then [::1]:PORT) in the sandbox's network
// namespace and copies its stdin to the connection and the connection to its
// stdout until the connection ends. It is python3 (the code interpreter's
// sandboxes have it; a root filesystem without it gets a 502 saying so), so
// that the agent needs no op of its own for it.
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace exg::serve {

struct Sandbox;

// The argv of a relay to `port`; `wait_s`: how long a refused connection is
// tried again (a server that is starting), 0 for not at all.
std::vector<std::string> port_relay_argv(const std::string& port, int wait_s);
// A relay started ahead of any request (a code interpreter's sandbox keeps
// one: python3's start, tens of ms inside a sandbox, is then not in a
// runCode's time): it waits for "PORT WAIT_S\n" on stdin, then is the relay
// port_relay_argv would start, the request after that line.
std::vector<std::string> spare_relay_argv();
std::string spare_relay_head(const std::string& port, int wait_s);
// Starts a spare relay in the sandbox (Sandbox::spare_relay once it runs; 0
// again when it ends before a request took it).
void keep_spare_relay(const std::shared_ptr<Sandbox>& sb);

}  // namespace exg::serve
