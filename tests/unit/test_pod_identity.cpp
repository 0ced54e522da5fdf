// runtime::pod_identity: the pod's namespace, name and container from the
// annotations containerd's CRI plugin and CRI-O write (issue 46).
#include <gtest/gtest.h>

#include "runtime/pod_identity.hpp"

using nlohmann::json;

TEST(PodIdentity, ContainerdCriAnnotations) {
  json config = {{"annotations",
                  {{"io.kubernetes.cri.container-type", "container"},
                   {"io.kubernetes.cri.sandbox-namespace", "team-a"},
                   {"io.kubernetes.cri.sandbox-name", "agent-1"},
                   {"io.kubernetes.cri.container-name", "worker"}}}};
  EXPECT_EQ(exg::runtime::pod_identity(config), (json{{"pod_namespace", "team-a"}, {"pod", "agent-1"}, {"container", "worker"}}));
}

TEST(PodIdentity, CriOAnnotations) {
  json config = {{"annotations",
                  {{"io.kubernetes.pod.namespace", "team-b"},
                   {"io.kubernetes.pod.name", "agent-2"},
                   {"io.kubernetes.container.name", "main"}}}};
  EXPECT_EQ(exg::runtime::pod_identity(config), (json{{"pod_namespace", "team-b"}, {"pod", "agent-2"}, {"container", "main"}}));
}

TEST(PodIdentity, ContainerdFirstWhenBothAreThere) {
  json config = {{"annotations", {{"io.kubernetes.cri.sandbox-name", "from-cri"}, {"io.kubernetes.pod.name", "from-crio"}}}};
  EXPECT_EQ(exg::runtime::pod_identity(config), (json{{"pod", "from-cri"}}));
}

TEST(PodIdentity, NoCriNoTags) {
  EXPECT_EQ(exg::runtime::pod_identity(json::object()), json::object());
  EXPECT_EQ(exg::runtime::pod_identity(json{{"annotations", "not an object"}}), json::object());
  // Empty or non-string values are not tags.
  json config = {{"annotations", {{"io.kubernetes.cri.sandbox-name", ""}, {"io.kubernetes.pod.namespace", 3}}}};
  EXPECT_EQ(exg::runtime::pod_identity(config), json::object());
}
