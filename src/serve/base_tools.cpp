// E2B's base template's `python` and `sudo` in each sandbox (base_tools.hpp).
#include "serve/base_tools.hpp"

#include <cstdint>
#include <vector>

#include "plan/private_tmp.hpp"
#include "serve/sandbox_registry.hpp"

namespace exg::serve {

namespace {

// sudo as uid 0 of the sandbox's own kernel: sudo's common options are taken
// (the user must be root), then the command runs; `sudo -i`/`-s` alone start a shell.
constexpr const char* kSudoAsRoot = R"SH(
shell=
while [ $# -gt 0 ]; do
  case "$1" in
    -u|--user) shift
      case "${1:-}" in root|0|'#0') ;; *) echo "sudo: this sandbox has one user, root: unknown user ${1:-}" >&2; exit 1 ;; esac ;;
    -u*) case "${1#-u}" in root|0|'#0') ;; *) echo "sudo: this sandbox has one user, root: unknown user ${1#-u}" >&2; exit 1 ;; esac ;;
    --user=*) case "${1#--user=}" in root|0|'#0') ;; *) echo "sudo: this sandbox has one user, root: unknown user ${1#--user=}" >&2; exit 1 ;; esac ;;
    -i|--login) shell=-l ;;
    -s|--shell) shell=-s ;;
    -E|-H|-n|-S|-k|-P|--preserve-env|--preserve-env=*|--non-interactive|--stdin|--set-home) ;;
    --) shift; break ;;
    -*) echo "sudo: $1: option not served in this sandbox" >&2; exit 1 ;;
    *) break ;;
  esac
  shift
done
if [ $# -eq 0 ]; then
  [ -n "$shell" ] || { echo "usage: sudo [-u root] [-i|-s] [command [arg ...]]" >&2; exit 1; }
  if [ "$shell" = -l ]; then cd "${HOME:-/}" 2>/dev/null; exec "${SHELL:-/bin/sh}" -l; fi
  exec "${SHELL:-/bin/sh}"
fi
exec "$@"
)SH";

struct ToolFile {
  std::string path;
  std::string text;
  uint32_t mode;
};

std::vector<ToolFile> tool_files(const Template& t, const std::string& dir) {
  std::string sudo = "#!/bin/sh\n# exguardian serve: E2B's sudo (in the sandbox's own temporary directory; see docs/serve.md)\n"
                     "if [ \"$(id -u)\" != 0 ]; then\n  cat >&2 <<'EOF'\nsudo: " +
                     root_refusal(t) + "\nEOF\n  exit 1\nfi" + kSudoAsRoot;
  std::string python =
      "#!/bin/sh\n# exguardian serve: E2B's base template has `python` beside `python3`\n"
      "command -v python3 >/dev/null 2>&1 || { echo \"python: no python3 in this sandbox\" >&2; exit 127; }\n"
      "exec python3 \"$@\"\n";
  // Idempotent: a bash a command starts reads it again.
  std::string bashenv = "case \":$PATH:\" in *:" + dir + "/first:*) ;; *) PATH=\"" + dir + "/first:$PATH:" + dir +
                        "/last\" ;; esac\n";
  return {{dir + "/first/sudo", sudo, 0555}, {dir + "/last/python", python, 0555}, {dir + "/bashenv", bashenv, 0444}};
}

// One agent request after the other; the first failure ends it.
void run_steps(const std::shared_ptr<Sandbox>& sb, std::shared_ptr<std::vector<std::pair<nlohmann::json, std::string>>> steps,
               size_t i, std::function<void(std::optional<std::string>)> done) {
  if (i == steps->size()) return done(std::nullopt);
  auto what = (*steps)[i].first.value("path", std::string());
  sb->agent->call((*steps)[i].first, (*steps)[i].second, [sb, steps, i, done, what](const agent::Frame& r) {
    if (!r.header.value("ok", false)) return done("base tools: " + what + ": " + reply_error_text(r));
    run_steps(sb, steps, i + 1, done);
  });
}

}  // namespace

std::string root_refusal(const Template& t) {
  if (t.layer == "gvisor" || t.layer == "microvm")
    return "user root: refused: the template " + t.name +
           " does not allow it; its only user is \"user\" (the sandbox's unprivileged uid). The " + t.layer +
           " layer runs the sandbox on a kernel of its own, where a template with \"allowRoot\": true runs commands as uid 0";
  return "user root: refused: the " + t.layer +
         " layer runs the sandbox's commands on the host's kernel, where a sandbox gets no root; its only user is "
         "\"user\" (the sandbox's unprivileged uid). A template of the gvisor or microvm layer (a kernel of its own) "
         "with \"allowRoot\": true serves root";
}

std::string base_tools_dir(const Sandbox& sb) {
  return sb.tmpl.layer == "landlock" ? plan::host_private_tmp(sb.plan_id) + "/.exg-e2b" : "/tmp/.exg-e2b";
}

std::string base_tools_bash_env(const Sandbox& sb) { return base_tools_dir(sb) + "/bashenv"; }

void install_base_tools(const std::shared_ptr<Sandbox>& sb, std::function<void(std::optional<std::string> error)> done) {
  if (!sb->agent) return done("the sandbox has no agent");
  const std::string dir = base_tools_dir(*sb);
  auto steps = std::make_shared<std::vector<std::pair<nlohmann::json, std::string>>>();
  steps->emplace_back(agent::request::mkdir(dir + "/first", true), "");
  steps->emplace_back(agent::request::mkdir(dir + "/last", true), "");
  for (auto& f : tool_files(sb->tmpl, dir)) {
    agent::request::Write w{.exclusive = true, .mode = f.mode};
    steps->emplace_back(agent::request::write(f.path, w), std::move(f.text));
  }
  run_steps(sb, steps, 0, std::move(done));
}

}  // namespace exg::serve
