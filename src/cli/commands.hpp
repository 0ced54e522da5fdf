// Subcommands: each parses its own flags and returns the process exit status.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "cli/layer_options.hpp"
#include "cli/plan_options.hpp"

namespace exg::cli {

struct RunOptions : PlanOptions, LayerFlags {
  std::string audit_log;
  bool dry_run = false, verbose = false, quiet = false;
  CheckedSubcommand* sub = nullptr;

  // The subcommand, by name and description: what `exguardian --help` shows of
  // it; then its options, added only when the command line names it (main.cpp).
  void add_to(CLI::App& app);
  void add_options();
  int execute();
};

}  // namespace exg::cli
