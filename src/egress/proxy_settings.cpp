// The policy's network section as egress's configuration: the rules, request
// rules, the user's proxies, and srt 0.0.83's proxy switches (docs/srt.md).
#include "egress/proxy.hpp"

namespace exg::egress {

Result<Config> config_from_policy(const policy::Network& net) {
  auto rules = Rules::from_policy(net);
  if (!rules) return fail(rules.error());
  ProxyConfig cfg;
  auto requests = RequestRules::from_policy(net);
  if (!requests) return fail(requests.error());
  cfg.requests = requests->empty() ? nullptr : std::make_shared<const RequestRules>(std::move(*requests));
  auto up = Upstreams::from_policy(net);
  if (!up) return fail(up.error());
  cfg.upstreams = up->empty() ? nullptr : std::make_shared<const Upstreams>(std::move(*up));
  cfg.refuse_opaque_tunnels = net.refuse_opaque_tunnels.value_or(false);
  cfg.require_host_match = net.require_host_match.value_or(false);
  cfg.strip_response_headers = net.strip_response_headers;
  cfg.max_terminated = net.max_tunnels.value_or(0);
  cfg.handshake_timeout = net.handshake_timeout;
  return Config{std::move(*rules), std::move(cfg)};
}

}  // namespace exg::egress
