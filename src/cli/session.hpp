// `exguardian session`: a sandbox that lives across commands, its pid 1 the
// agent, driven through a control socket; `exguardian session-client`: the
// command-line client of that socket (docs/agent-protocol.md).
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "cli/layer_options.hpp"
#include "cli/plan_options.hpp"

namespace exg::cli {

struct SessionOptions : PlanOptions, LayerFlags {
  std::string control, audit_log;
  std::vector<std::string> audit_tags;  // NAME=VALUE
  bool dry_run = false, verbose = false;
  bool audit_hold = false;  // --audit-hold: a warm pool's sandbox, its tenant told later (audit_tags)
  CheckedSubcommand* sub = nullptr;

  void add_to(CLI::App& app);  // (as RunOptions's)
  void add_options();
  int execute();
};

// argv after "session-client": [--control unix:PATH] VERB ...; returns the exit status.
int session_client_main(int argc, char** argv);

}  // namespace exg::cli
