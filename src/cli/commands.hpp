// Subcommands: each parses its own flags and returns the process exit status.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace exg::cli {

struct RunOptions {
  std::string policy_file, workspace, timeout, memory, pids, cpus, audit_log, workspace_mode = "live", keep;
  std::vector<std::string> allow_write, deny_write, deny_read, allow_read, allow_domain, env, command;
  bool dry_run = false, verbose = false, no_policy_files = false, explicit_command = false;
  bool unsafe_no_seccomp = false, allow_planted = false, dns = false;
  CLI::App* sub = nullptr;

  void add_to(CLI::App& app);
  int execute();
};

}  // namespace exg::cli
