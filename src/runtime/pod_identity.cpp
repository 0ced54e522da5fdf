#include "runtime/pod_identity.hpp"

#include <array>
#include <utility>

namespace exg::runtime {

nlohmann::json pod_identity(const nlohmann::json& config) {
  nlohmann::json out = nlohmann::json::object();
  if (!config.is_object() || !config.contains("annotations") || !config["annotations"].is_object()) return out;
  const auto& a = config["annotations"];
  // Each tag: the first annotation that is there (containerd's, then CRI-O's).
  static const std::array<std::pair<const char*, std::array<const char*, 2>>, 3> kTags{{
      {"pod_namespace", {"io.kubernetes.cri.sandbox-namespace", "io.kubernetes.pod.namespace"}},
      {"pod", {"io.kubernetes.cri.sandbox-name", "io.kubernetes.pod.name"}},
      {"container", {"io.kubernetes.cri.container-name", "io.kubernetes.container.name"}},
  }};
  for (const auto& [tag, keys] : kTags) {
    for (const char* key : keys) {
      auto it = a.find(key);
      if (it != a.end() && it->is_string() && !it->get<std::string>().empty()) {
        out[tag] = *it;
        break;
      }
    }
  }
  return out;
}

}  // namespace exg::runtime
