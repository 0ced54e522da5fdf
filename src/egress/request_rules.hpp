// Request rules (issue 18): what may be asked of a host whose requests the
// proxy sees (plain HTTP, and TLS it terminates), by method and path prefix:
// network.rules and network.readOnly. A connection the proxy cannot see into
// (a tunnel it does not terminate) to a host under a rule is refused: the rule
// could not be applied to what goes through it.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "egress/rules.hpp"
#include "policy/policy.hpp"
#include "util/error.hpp"

namespace exg::egress {

class RequestRules {
 public:
  // Host patterns were validated by the policy loader; errors here name the rule.
  static Result<RequestRules> from_policy(const policy::Network& net);
  bool empty() const { return rules_.empty() && !read_only_; }

  // The rule that puts requests to `host` under judgement (its name), or
  // nothing when they go unjudged.
  std::optional<std::string> governing(const Host& host) const;

  // One request: method as sent, target in origin form ("/a/b?q", or "*").
  // Refused with the deciding rule's name; a path that reads differently once
  // normalized (dot segments, "%2e", "\", "//") is refused as ambiguous unless
  // ambiguousRequestTarget is "normalize": then `normalized_target` is what to
  // forward instead (and what was judged).
  struct Verdict {
    Decision decision;
    bool ambiguous = false;                       // refuse with 400, not 403
    std::optional<std::string> normalized_target; // forward this target instead
  };
  Verdict check(const Host& host, std::string_view method, std::string_view target) const;

 private:
  struct Rule {
    std::string name;
    std::string pattern;  // normalised host, "*.x.org" kept with the "*."
    bool deny = false;
    std::vector<std::string> methods, paths;
  };
  std::vector<Rule> rules_;
  bool read_only_ = false, normalize_ = false;
};

namespace detail {
// The path of an origin-form target, normalized as an upstream would read it:
// "%2e" as ".", "\" as "/", runs of "/" as one, dot segments resolved (never
// above the root). Also says whether the target was ambiguous: whether it
// differed, or holds a dot segment once "%2f" and "%5c" are decoded too.
struct NormalizedPath {
  std::string path;    // without the query
  std::string query;   // "?..." or empty
  bool ambiguous = false;
};
NormalizedPath normalize_target(std::string_view target);
}  // namespace detail

}  // namespace exg::egress
