#include "doctor/layer_choice.hpp"

#include "doctor/advice.hpp"

namespace exg::doctor {
namespace {

bool ok(const std::vector<Capability>& caps, const char* name) {
  const Capability* c = find_capability(caps, name);
  return c && c->ok;
}

std::string name_of(layer::Kind k) { return std::string(layer::name(k)); }

}  // namespace

std::vector<LayerVerdict> judge_layers(const std::vector<Capability>& caps, const LayerNeeds& needs) {
  const auto status = layer_status(caps);
  std::vector<LayerVerdict> out;
  for (layer::Kind k : layer::strongest_first()) {
    LayerVerdict v{k, false, "not judged"};
    for (const auto& s : status)
      if (s.name == layer::name(k)) v.runs = s.available, v.why = s.why;
    // What this policy asks that the layer cannot give (its launch refuses such
    // a plan too: supervise() for the sockets, the Landlock step for "required").
    if (v.runs && needs.host_unix_sockets && (k == layer::Kind::Gvisor || k == layer::Kind::Microvm)) {
      v.runs = false;
      v.why = std::string("this policy lets a host Unix socket in (network.allowUnixSockets / allowAllUnixSockets), "
                          "which ") + (k == layer::Kind::Gvisor ? "gVisor's gofer" : "the guest's 9p view") +
              " cannot carry";
    }
    if (v.runs && needs.landlock_required && (k == layer::Kind::Process || k == layer::Kind::Container) &&
        !ok(caps, "landlock")) {
      v.runs = false;
      const Capability* l = find_capability(caps, "landlock");
      v.why = "this policy requires Landlock (\"landlock\": \"required\") and this kernel has none" +
              (l ? " (" + l->detail + ")" : std::string());
    }
    if (v.runs && needs.root_owned_workspace_as_root && k == layer::Kind::Landlock) {
      v.runs = false;
      v.why = "invoked as root with a workspace root owns, which only idmapped mounts (a user namespace) let the "
              "sandbox's uid write";
    }
    out.push_back(std::move(v));
  }
  return out;
}

AutoChoice choose_auto(std::vector<LayerVerdict> verdicts, std::optional<layer::Kind> minimum) {
  AutoChoice c;
  c.minimum = minimum;
  c.verdicts = std::move(verdicts);
  for (const auto& v : c.verdicts) {
    if (minimum && !layer::at_least(v.kind, *minimum)) break;
    if (v.runs) {
      c.chosen = v.kind;
      break;
    }
  }
  return c;
}

std::string AutoChoice::line() const {
  std::string head = "layer auto" + (minimum ? " (at least " + name_of(*minimum) + ")" : std::string()) + ": ";
  if (!chosen) {
    std::string s = head + "refused: no layer" + (minimum ? " at or above " + name_of(*minimum) : std::string()) +
                    " can run here for this policy";
    return s;
  }
  std::string s;
  for (const auto& v : verdicts) {
    if (v.kind == *chosen) {
      s = head + "chose " + name_of(v.kind) + " (" + v.why + ")" + s;
      break;
    }
    s += "; not " + name_of(v.kind) + ": " + v.why;
  }
  return s;
}

std::vector<std::string> AutoChoice::refusal() const {
  std::vector<std::string> out;
  if (chosen) return out;
  out.push_back(line());
  std::vector<std::string> below;
  for (const auto& v : verdicts) {
    if (minimum && !layer::at_least(v.kind, *minimum)) {
      if (v.runs) below.push_back(name_of(v.kind));
      continue;
    }
    out.push_back("layer auto: " + name_of(v.kind) + " cannot run: " + v.why);
  }
  if (!below.empty()) {
    std::string list;
    for (size_t i = 0; i < below.size(); ++i) list += (i ? (i + 1 == below.size() ? " and " : ", ") : "") + below[i];
    out.push_back("layer auto: " + list + (below.size() == 1 ? " would run, but is" : " would run, but are") +
                  " below the minimum " + name_of(*minimum) + " (--min-layer / \"minLayer\")");
  }
  return out;
}

nlohmann::json AutoChoice::audit_event() const {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& v : verdicts) layers.push_back({{"layer", name_of(v.kind)}, {"runs", v.runs}, {"why", v.why}});
  return {{"event", "layer_auto"},
          {"chosen", chosen ? nlohmann::json(name_of(*chosen)) : nlohmann::json(nullptr)},
          {"minimum", minimum ? nlohmann::json(name_of(*minimum)) : nlohmann::json(nullptr)},
          {"layers", layers},
          {"line", line()}};
}

}  // namespace exg::doctor
