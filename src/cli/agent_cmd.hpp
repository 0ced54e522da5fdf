// `exguardian agent NAME [RUN OPTIONS] [-- ARGS]`: an agent CLI run whole in a
// sandbox under its shipped profile (issue 45). The profiles are ordinary
// policy files (profiles/agents/NAME.json in the source, installed in
// share/exguardian/agents/): the agent's own key a secret for its vendor's API
// hosts only, its config directory writable with its settings and hooks
// protected, the vendor's hosts allowed. The front door only finds the profile
// and the agent's program and hands `exguardian run` the rest: every run
// option works, and a user's own --policy files merge over the profile.
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace exg::cli {

// The command line of `exguardian run` for argv (argv[1] == "agent") in
// `run_argv`; or the exit status when nothing is to run (--list, --show,
// --help, an error: said on stdout/stderr).
std::optional<int> agent_command_line(int argc, char** argv, std::vector<std::string>& run_argv);

}  // namespace exg::cli
