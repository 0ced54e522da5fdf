// Where `exguardian mcp --server URL` finds `exguardian serve`: a unix socket
// (unix:PATH) or plain HTTP on a loopback address. HTTP to any other host is
// refused: the API key and every sandbox's access token would cross the
// network in clear (this client speaks no TLS; an SSH tunnel to a loopback
// port, or the unix socket, keeps them on the machine).
#pragma once
#include <cstdint>
#include <string>

#include "util/error.hpp"

namespace exg::mcp {

struct ServeEndpoint {
  std::string unix_path;  // unix:PATH; empty for TCP
  std::string address;    // TCP: a loopback address literal (127.0.0.1, ::1)
  uint16_t port = 0;
  std::string url;        // as given, for messages
  // The Host header's value.
  std::string host_header() const;
};

// "unix:/run/exg.sock", "http://127.0.0.1:8080", "http://[::1]:8080/" or "http://localhost:8080".
Result<ServeEndpoint> parse_server_url(const std::string& url);

// RFC 3986 percent-encoding of a query value (all but unreserved characters).
std::string query_escape(const std::string& s);

}  // namespace exg::mcp
