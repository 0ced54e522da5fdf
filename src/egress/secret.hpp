// A declared secret (DESIGN.md §6): plain data, the egress proxy's own input,
// which the Plan carries (plan::Secret). The value lives in the supervisor
// only; the sandbox sees the placeholder; the egress proxy (egress/secrets.hpp)
// swaps one for the other on the way to the secret's hosts.
#pragma once
#include <string>
#include <vector>

namespace exg::egress {

struct Secret {
  std::string name;                // "GITHUB_TOKEN"
  std::string placeholder;         // "exg_ph_GITHUB_TOKEN_<random>": all the sandbox ever holds
  std::string value;               // the real value: lives in the supervisor only
  std::vector<std::string> hosts;  // patterns, matched as allowedDomains entries are
  // Lower-case request header names the placeholder is replaced in; empty: any
  // header. Outside them a limited secret's placeholder is refused as exfiltration.
  std::vector<std::string> headers;
  // Not empty: the proxy sets this request header (as written) to the value on
  // every intercepted request to the hosts, replacing the client's (E2B's
  // network.rules header transforms). Such a secret has no variable inside.
  std::string set_header;
  // OAuth (issue 45): not empty, the JSON field a response of the hosts carries
  // a refreshed value in ("access_token"); the proxy keeps that value as a
  // successor of this secret (egress/token_refresh.cpp).
  std::string refresh_field;
  // The host file the value was read from (canonical; empty: not a file): a
  // refreshed value is written there in place of this one, so the next run
  // starts with it.
  std::string source_file;
  // Of `hosts`, those whose request bodies get the value in place of the
  // placeholder (an OAuth refresh token travels in the token request's body);
  // elsewhere a body carries the placeholder as it is.
  std::vector<std::string> body_hosts;
};

}  // namespace exg::egress
