// What a session asks of the request rules and srt's switches before it lets
// bytes through: whether a tunnel it cannot see into may exist at all, and
// which response headers never reach the sandbox.
#include <algorithm>
#include <cctype>

#include "egress/proxy.hpp"

namespace exg::egress::detail {

std::optional<Decision> Session::tunnel_refusal(bool terminated) const {
  if (terminated) {
    size_t cap = st_->cfg.max_terminated;
    if (cap && st_->stats.terminated_now >= cap)
      return Decision{false, std::string(kTooManyTunnels) + " " + std::to_string(cap), "too many tunnels"};
    return std::nullopt;
  }
  if (st_->cfg.refuse_opaque_tunnels)
    return Decision{false, "refuseOpaqueTunnels", "a tunnel the proxy cannot see into is refused"};
  if (!st_->cfg.requests) return std::nullopt;
  auto host = normalise_host(out_.host);
  if (!host) return std::nullopt;
  if (auto rule = st_->cfg.requests->governing(*host))
    return Decision{false, *rule,
                    "the requests to this host are judged by a rule, and the proxy would not see them through this "
                    "tunnel (it has no CA to terminate TLS with: the standalone proxy has one with --ca-cert-out)"};
  return std::nullopt;
}

bool Session::terminates(const std::string& host, uint16_t port) const {
  if (!secrets_for(host, port).empty()) return true;
  if (!st_->cfg.requests || !st_->secret_index || !st_->secret_index->now()->config().ca) return false;
  auto h = normalise_host(host);
  return h && st_->cfg.requests->governing(*h).has_value();
}

void strip_response_headers(HttpHead& resp, const std::vector<std::string>& folded) {
  if (folded.empty()) return;
  std::erase_if(resp.headers, [&](const auto& h) {
    std::string f = h.first;
    for (char& c : f) c = (c == '_' || c == '.') ? '-' : (char)std::tolower((unsigned char)c);
    return std::find(folded.begin(), folded.end(), f) != folded.end();
  });
}

}  // namespace exg::egress::detail
