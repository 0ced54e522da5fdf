// What a peer sandbox does not claim to stop, in its own documentation: the escape test
// reports a peer's escape that such a limit explains as a finding about the peer in the
// configuration its preset models, citing the limit, not as a failure of the peer to keep
// a promise (and never as a failure of the tool). An escape no documented limit explains
// is reported as seen, with no citation.
#pragma once
#include <string>

namespace exg::evidence {

struct DocumentedLimit {
  std::string limit;   // what the sandbox leaves open, plainly
  std::string source;  // where its own documentation says so
};

// The documented limit of the foreign preset `sandbox` (bwrap, bwrap-net, srt, podman,
// podman-hardened, podman-runsc, none) that explains an escape of probe `id` in `category`,
// or nullptr when its documentation names none.
const DocumentedLimit* documented_limit(const std::string& sandbox, const std::string& id, const std::string& category);

}  // namespace exg::evidence
