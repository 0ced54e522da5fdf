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
  CLI::App* sub = nullptr;

  void add_to(CLI::App& app);
  int execute();
};

}  // namespace exg::cli
