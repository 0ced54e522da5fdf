#include "serve/start_error.hpp"

#include "plan/secrets.hpp"
#include "policy/policy.hpp"

namespace exg::serve {

std::optional<StartError> request_egress_refusal(const RequestEgress& e) {
  auto refused = [](std::string m) { return StartError::request(std::move(m)); };
  // What `exguardian session` checks of each --allow-domain (cli/plan_options.cpp) and of each deniedDomains entry.
  for (const auto& d : e.allow_out)
    if (auto bad = policy::check_domain_pattern(d, false)) return refused("network.allowOut: " + *bad);
  for (const auto& d : e.deny_out)
    if (auto bad = policy::check_domain_pattern(d, true)) return refused("network.denyOut: " + *bad);
  // The rest of the request's policy file is its rules, as secrets.
  if (!e.policy_text.empty())
    if (auto p = policy::parse_policy(e.policy_text, e.policy_name, e.policy_dir); !p)
      return refused("network.rules: " + p.error().message);
  // A rule's headers go only where the sandbox may connect (the supervisor's check of a secret's hosts).
  policy::Network net;
  for (const auto& d : e.allowed) net.allowed_domains.push_back({d, {"--allow-domain"}});
  for (const auto& d : e.deny_out) net.denied_domains.push_back({d, {"network.denyOut"}});
  for (const auto& h : e.rule_hosts)
    if (auto why = plan::secret_host_refusal(h, net)) return refused("network.rules." + h + ": " + *why);
  return std::nullopt;
}

}  // namespace exg::serve
