// `exguardian oci-spec` and `exguardian docker-args`: the Plan that `run`
// would enforce, exported as an OCI config.json or as hardened docker/podman
// run flags. Same options as run (PlanOptions).
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "cli/plan_options.hpp"

namespace exg::cli {

struct OciSpecOptions : PlanOptions {
  std::string runtime = "crun";  // crun | runc | runsc, or a path to one
  std::string rootfs;            // empty: the host's root, read-only
  std::string bundle;            // write DIR/config.json instead of printing it
  std::string netns;             // linux.namespaces network path
  std::string cgroups_path;
  bool terminal = false;
  CheckedSubcommand* sub = nullptr;

  void add_to(CLI::App& app);  // (as RunOptions's)
  void add_options();
  int execute();
};

struct DockerArgsOptions : PlanOptions {
  std::string engine = "docker", image, seccomp_out;
  bool lines = false;
  CheckedSubcommand* sub = nullptr;

  void add_to(CLI::App& app);  // (as RunOptions's)
  void add_options();
  int execute();
};

}  // namespace exg::cli
