#include "mcp/serve_endpoint.hpp"

#include <boost/asio/ip/address.hpp>

namespace exg::mcp {

std::string ServeEndpoint::host_header() const {
  if (!unix_path.empty()) return "localhost";
  return (address.find(':') != std::string::npos ? "[" + address + "]" : address) + ":" + std::to_string(port);
}

Result<ServeEndpoint> parse_server_url(const std::string& url) {
  auto bad = [&](const std::string& why) { return fail(Error::msg("--server " + url, why)); };
  ServeEndpoint ep;
  ep.url = url;
  if (url.starts_with("unix:")) {
    ep.unix_path = url.substr(5);
    if (ep.unix_path.empty() || ep.unix_path[0] != '/') return bad("expected unix:/absolute/path");
    if (ep.unix_path.size() > 107) return bad("the socket's path is longer than 107 bytes");
    return ep;
  }
  if (url.starts_with("https://")) return bad("https is not spoken here: give serve's unix:PATH, or http:// on a loopback address");
  if (!url.starts_with("http://")) return bad("expected http://127.0.0.1:PORT or unix:PATH");
  std::string rest = url.substr(7);
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (rest.find_first_of("/?#@") != std::string::npos) return bad("expected only a host and a port (serve's API is at its root)");
  std::string host, port;
  if (rest.starts_with("[")) {
    auto close = rest.find(']');
    if (close == std::string::npos || close + 1 >= rest.size() || rest[close + 1] != ':') return bad("expected http://[ADDRESS]:PORT");
    host = rest.substr(1, close - 1);
    port = rest.substr(close + 2);
  } else {
    auto colon = rest.rfind(':');
    if (colon == std::string::npos) return bad("the port is missing (http://127.0.0.1:PORT)");
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos || std::stoul(port) == 0 ||
      std::stoul(port) > 65535)
    return bad("port " + port + ": expected 1..65535");
  ep.port = static_cast<uint16_t>(std::stoul(port));
  if (host == "localhost") host = "127.0.0.1";
  boost::system::error_code ec;
  auto addr = boost::asio::ip::make_address(host, ec);
  if (ec) return bad("host " + host + ": expected a loopback address (127.0.0.1, [::1], localhost)");
  if (!addr.is_loopback())
    return bad("host " + host + ": not a loopback address: the API key would cross the network in clear (use serve's unix socket, "
               "or an SSH tunnel to a local port)");
  ep.address = addr.to_string();
  return ep;
}

std::string query_escape(const std::string& s) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') out += static_cast<char>(c);
    else out += '%', out += hex[c >> 4], out += hex[c & 15];
  }
  return out;
}

}  // namespace exg::mcp
