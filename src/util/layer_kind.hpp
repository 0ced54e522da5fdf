// The kinds of layer a sandbox can run on, and their names: the one table
// that --layer, the policy's "layer", escape-test, doctor and recommend read
// (no other place spells a layer's name). Plain data: no dependencies. In
// util/, below the policy (which checks its "layer" against it) and the
// layers; the namespace is still the concept's, layer::Kind.
#pragma once
#include <optional>
#include <string_view>
#include <vector>

namespace exg::layer {

enum class Kind { Process, Container, Gvisor, Microvm, Landlock };

// "process" | "container" | "gvisor" | "microvm" | "landlock".
std::string_view name(Kind k);
// The kind a name means; nothing for an unknown name (exact, lower case).
std::optional<Kind> parse_kind(std::string_view name);
// Every kind, in the order of the table (process first: the default).
const std::vector<Kind>& all_kinds();
// The names of all_kinds(), for CLI11 IsMember checks and messages.
std::vector<std::string_view> all_names();
// Every kind from the strongest wall to the weakest: microvm (a guest kernel of
// its own), gvisor (a user-space kernel), container (the host's kernel, a
// runtime's namespaces and our seccomp table), process (the host's kernel, our
// own namespaces), landlock (the host's kernel, no namespaces at all: Landlock,
// seccomp and the proxy only, for hosts that refuse namespaces). `--layer
// auto` takes the first of these that runs here.
const std::vector<Kind>& strongest_first();
// Whether `a`'s walls are at least as strong as `b`'s (in strongest_first()'s order).
bool at_least(Kind a, Kind b);
// "auto": --layer's and the policy's word for "the strongest that runs here".
inline constexpr std::string_view kAutoName = "auto";

// "process, container, gvisor or microvm": for error messages.
std::string names_text(const std::vector<Kind>& kinds, std::string_view last_joiner = " or ");

}  // namespace exg::layer
