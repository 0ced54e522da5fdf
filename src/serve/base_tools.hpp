// What E2B's base template gives a sandbox's commands that code relies on and
// the host's root (the process layer's view) or a template's rootfs may lack:
// `python` beside `python3`, and `sudo`. Written into each sandbox's own /tmp
// (base_tools_dir) by its agent when it starts (as the sandbox's user: nothing of the host is
// changed), and put on the PATH of the commands envd starts through BASH_ENV,
// which bash reads after /etc/profile (the SDK runs `/bin/bash -l -c CMD`, and
// /etc/profile sets PATH anew, so a PATH given in the environment is lost).
//   sudo:   first on PATH. Where the sandbox's user is uid 0 of a kernel of
//           its own (a gvisor or microvm template with "allowRoot") it runs
//           the command; elsewhere it refuses with the words serve answers
//           `user: root` with (root_refusal), exit 1. A host's own sudo would
//           only fail under no_new_privs, saying less.
//   python: last on PATH, so a `python` the sandbox has wins; it runs python3.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace exg::serve {

struct Sandbox;
struct Template;

// Where the tools are: the sandbox's own /tmp, or, on the landlock layer,
// where /tmp is the host's, its private TMPDIR (plan/private_tmp.hpp).
std::string base_tools_dir(const Sandbox& sb);
// The file BASH_ENV names in every command's environment (envd_process.cpp).
std::string base_tools_bash_env(const Sandbox& sb);

// Why root is not served by a sandbox of `t` (the answer to `user: root`, and sudo's words).
std::string root_refusal(const Template& t);

// Writes the tools into the sandbox (through its agent); `done` with nullopt
// once they are there, else why not.
void install_base_tools(const std::shared_ptr<Sandbox>& sb, std::function<void(std::optional<std::string> error)> done);

}  // namespace exg::serve
