// The host names E2B gives a sandbox's ports: `PORT-ID.DOMAIN`, what the
// SDK's `sandbox.getHost(port)` returns (the domain is the create answer's
// `domain`, else E2B_DOMAIN). With `serve --domain DOMAIN`, a request whose
// Host is such a name is for that port of that sandbox, exactly as one sent
// with E2b-Sandbox-Id and E2b-Sandbox-Port (the same credentials checked:
// service.cpp). Pure functions of the strings.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace exg::serve {

struct SandboxHost {
  std::string port, id;  // the port as written (checked by the port route), the sandbox id lower-cased
};

// `host` (a Host header, any :port after it ignored) under `domain`: its port
// and sandbox id; nothing for any other name, or when `domain` is empty.
std::optional<SandboxHost> parse_sandbox_host(std::string_view host, std::string_view domain);

// --domain's value: "" when it is a host name (labels of letters, digits and
// '-' joined by '.'), else why not.
std::string domain_error(std::string_view domain);

}  // namespace exg::serve
