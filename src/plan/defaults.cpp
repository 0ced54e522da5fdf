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

// Code that runs later (the protected names): protected_names.cpp, one list.

// Environment names passed through from the host (LC_* too). Everything else is
// dropped unless --env or the policy's env.allow names it.
const std::vector<std::string> kEnvAllowlist = {
    "PATH", "HOME", "LANG", "LANGUAGE", "TERM", "COLORTERM", "TZ", "USER", "LOGNAME", "SHELL",
    "COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "CLICOLOR", "PAGER", "EDITOR", "VISUAL",
};

}  // namespace exg::plan
