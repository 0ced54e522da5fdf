// The built-in, secure defaults (DESIGN.md §1).
#include "plan/plan.hpp"

namespace exg::plan {

// Credential locations under HOME: masked (unreadable, empty) by default.
const std::vector<std::string> kCredentialPaths = {
    ".ssh", ".aws", ".azure", ".kube", ".gnupg", ".config/gcloud", ".config/gh",
    ".config/hub", ".config/op", ".config/doctl", ".config/exguardian/secrets",
    ".docker/config.json", ".netrc", ".git-credentials", ".npmrc", ".yarnrc.yml", ".pypirc",
    ".config/pip/pip.conf", ".pgpass", ".my.cnf", ".vault-token", ".terraform.d/credentials.tfrc.json",
    ".cargo/credentials", ".cargo/credentials.toml", ".gem/credentials", ".m2/settings.xml",
    ".gradle/gradle.properties", ".password-store", ".local/share/keyrings", ".config/rclone",
    ".s3cfg", ".boto", ".oci", ".config/heroku", ".fly", ".config/anthropic", ".config/openai",
    ".bash_history", ".zsh_history", ".python_history", ".psql_history", ".mysql_history",
    ".node_repl_history", ".lesshst", ".viminfo",
};

// Code that runs later: never writable in a writable tree, at any depth.
// Names with a slash are "<dir>/<entry>"; .git/... entries are handled by the
// git-directory logic (hooks, config, submodules).
const std::vector<std::string> kProtectedNames = {
    ".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc", ".zshenv",
    ".zprofile", ".zlogin", ".zlogout", ".cshrc", ".tcshrc", ".kshrc", ".inputrc",
    ".gitconfig", ".gitmodules", ".ripgreprc", ".mcp.json", ".envrc", ".exguardian.json",
    ".srt-settings.json", ".vscode", ".idea", ".husky", ".devcontainer", ".pre-commit-config.yaml",
    ".claude/commands", ".claude/agents", ".claude/settings.json", ".claude/settings.local.json",
    ".claude/hooks", ".cursor/mcp.json", ".cursor/rules",
    ".git/hooks", ".git/config",
};

// Environment names passed through from the host (LC_* too). Everything else is
// dropped unless --env or the policy's env.allow names it.
const std::vector<std::string> kEnvAllowlist = {
    "PATH", "HOME", "LANG", "LANGUAGE", "TERM", "COLORTERM", "TZ", "USER", "LOGNAME", "SHELL",
    "COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "CLICOLOR", "PAGER", "EDITOR", "VISUAL",
};

}  // namespace exg::plan
