// Why a sandbox did not start, and whose fault that is. serve answers a
// create from the kind (400 for the request's, 500 for the server's), never
// from the message's text: the kind is set where the failure is known.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace exg::serve {

struct StartError {
  enum class Kind {
    Request,  // what the request asked for is refused (its egress, its rules): the client's to change
    Server,   // the host, the template, the tenant's configuration or the supervisor: the server's
  };
  Kind kind = Kind::Server;
  std::string message;

  static StartError request(std::string m) { return {Kind::Request, std::move(m)}; }
  static StartError server(std::string m) { return {Kind::Server, std::move(m)}; }
};

// The egress a create gives the supervisor, as the registry builds its command line.
struct RequestEgress {
  std::vector<std::string> allowed;    // every --allow-domain: the template's, the tenant's secrets' hosts, allow_out
  std::vector<std::string> allow_out;  // the request's own (network.allowOut)
  std::vector<std::string> deny_out;   // network.denyOut
  std::vector<std::string> rule_hosts; // network.rules' hosts (each becomes a secret's host)
  std::string policy_name, policy_dir, policy_text;  // the request's policy file (denyOut, rules); empty: none
};

// What the supervisor would refuse of the request's own egress, found with
// the supervisor's own checks (the --allow-domain flag's, the policy parser,
// a secret's hosts against the allowed and denied ones) before it is started:
// a StartError of kind Request; nothing when it would take it.
std::optional<StartError> request_egress_refusal(const RequestEgress& e);

}  // namespace exg::serve
