// TLS to a parent proxy (srt's parentProxy with an https:// URL): its client
// context, and the step of Session::connect_via that puts TLS under the
// session's connection to the proxy (parent_tls.cpp says how).
#pragma once
#include <memory>
#include <string>

#include <utility>  // before asio/awaitable.hpp (it uses std::exchange)
#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "egress/parent_proxy.hpp"
#include "util/error.hpp"

namespace exg::egress {

// Peer verification against the system's trust store and `ca_file` (a PEM
// file, may be empty) besides it; TLS >= 1.2. Binds OpenSSL (a clean error
// when it is missing).
Result<std::shared_ptr<SSL_CTX>> make_parent_tls_ctx(const std::string& ca_file);

namespace detail {

// `upstream` is connected to the proxy `via` (via.tls set): the handshake
// (SNI and the certificate's name checked against via.host). On success
// `upstream` becomes the session's end of a relay through that TLS channel
// and "" is returned; else why not ("TLS: certificate not trusted: ...").
boost::asio::awaitable<std::string> tls_to_parent(boost::asio::ip::tcp::socket& upstream, const Via& via);

}  // namespace detail
}  // namespace exg::egress
