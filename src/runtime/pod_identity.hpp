// Which Kubernetes pod and container an OCI config belongs to, as the CRI
// implementations write it into the config's annotations: an audit line of the
// runtime then names the pod's namespace, the pod and the container (what an
// operator searches for), not only the engine's container id (issue 46).
#pragma once
#include <nlohmann/json.hpp>

namespace exg::runtime {

// {"pod_namespace": ..., "pod": ..., "container": ...} from the annotations of
// containerd's CRI plugin (io.kubernetes.cri.sandbox-namespace, -sandbox-name,
// .container-name) or CRI-O's (io.kubernetes.pod.namespace, .pod.name,
// .container.name); only the keys found, each a non-empty string; an empty
// object for a container no CRI made.
nlohmann::json pod_identity(const nlohmann::json& config);

}  // namespace exg::runtime
