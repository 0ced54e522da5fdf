#include "evidence/documented_limits.hpp"

#include <vector>

namespace exg::evidence {

namespace {

struct Rule {
  const char* sandbox;   // a preset's name; a trailing '*' matches every name it starts
  const char* probe;     // a probe id, or "" for every probe of `category`
  const char* category;  // "" with a probe id
  DocumentedLimit said;
};

bool matches(const std::string& pattern, const std::string& name) {
  if (!pattern.empty() && pattern.back() == '*') return name.starts_with(pattern.substr(0, pattern.size() - 1));
  return pattern == name;
}

// Each limit as the sandbox's own documentation states it (the man page of the version
// Debian ships, the npm package's README at the pinned version), for the probes whose
// escape it explains. First match wins: a probe's own rule before its category's.
const std::vector<Rule>& rules() {
  static const std::vector<Rule> r = {
      {"none", "", "", {"no sandbox: the control, against which the probes must see escapes", "--sandbox none"}},

      {"bwrap*", "seed-env-secrets", "",
       {"bubblewrap passes the caller's environment into the sandbox unless it is cleared",
        "bwrap(1): --clearenv, --unsetenv VAR"}},
      {"bwrap*", "seed-read-credentials", "",
       {"--ro-bind / / (as agents use it) makes the whole host tree readable inside, the home directory included",
        "bwrap(1): --ro-bind SRC DEST \"Bind mount the host path SRC readonly on DEST\""}},
      {"bwrap*", "sibling-tmp-read", "",
       {"--ro-bind / / (as agents use it) makes the whole host tree readable inside, the host's /var/tmp included: "
        "--tmpfs /tmp replaces /tmp alone",
        "bwrap(1): --ro-bind SRC DEST \"Bind mount the host path SRC readonly on DEST\"; --tmpfs DEST"}},
      {"bwrap*", "cleanup-canaries", "",
       {"a --bind is the host's directory: a hook changed there is changed on the host",
        "bwrap(1): --bind SRC DEST \"Bind mount the host path SRC on DEST\""}},
      {"bwrap*", "", "persistence",
       {"a --bind is the host's directory: what the sandbox writes there stays on the host for whatever reads it next",
        "bwrap(1): --bind SRC DEST \"Bind mount the host path SRC on DEST\""}},
      {"bwrap*", "", "kernel",
       {"bubblewrap installs no seccomp filter of its own; the caller passes one", "bwrap(1): --seccomp FD"}},
      {"bwrap-net", "", "network",
       {"--share-net keeps the caller's network: nothing filters egress", "bwrap(1): --share-net"}},

      {"srt", "seed-read-credentials", "",
       {"reads are allowed everywhere by default; only the paths in filesystem.denyRead are not (here ~/.ssh)",
        "sandbox-runtime README, Dual Isolation Model: \"By default, read access is allowed everywhere\""}},
      {"srt", "sibling-tmp-read", "",
       {"reads are allowed everywhere by default, another sandbox's files in the host's /tmp included; only the paths "
        "in filesystem.denyRead are not",
        "sandbox-runtime README, Dual Isolation Model: \"By default, read access is allowed everywhere\""}},
      {"srt", "sandbox-status", "",
       {"a root caller's command still holds a full capability set inside srt's nested user namespace",
        "sandbox-runtime README, Platform-Specific Dependencies, Running as root"}},
      {"srt", "cleanup-canaries", "",
       {"the mandatory denies are found by a search 3 levels deep by default: a nested repository's hooks below "
        "that (vendor/lib/.git/hooks) are writable",
        "sandbox-runtime README, Linux search depth (mandatoryDenySearchDepth)"}},
      {"srt", "", "kernel",
       {"srt's seccomp filter refuses Unix sockets, io_uring and the namespace and mount calls; other system calls "
        "are the kernel's to allow",
        "sandbox-runtime README, Unix Socket Restrictions (Linux); \"The command stays in the namespaces made for it\""}},
      {"srt", "", "persistence",
       {"allowWrite paths are the host's; srt's mandatory denies cover shell rc files, .git/hooks, .git/config and "
        "editor and agent configuration, other planted files stay",
        "sandbox-runtime README, Mandatory Deny Paths (Auto-Protected Files); Security Limitations, Filesystem "
        "Permission Escalation"}},

      {"podman*", "", "persistence",
       {"a -v bind mount is the host's directory: what the container writes there stays on the host",
        "podman-run(1): --volume \"Create a bind mount\""}},
      {"podman*", "cleanup-canaries", "",
       {"a -v bind mount is the host's directory: a hook changed there is changed on the host",
        "podman-run(1): --volume \"Create a bind mount\""}},
      {"podman-runsc", "", "kernel",
       {"gVisor answers the container's system calls with its own kernel (the Sentry): a call it implements is "
        "allowed there without reaching the host's",
        "gVisor documentation, Security Model"}},
      {"podman", "", "kernel",
       {"the default profile keeps podman's default capability set and seccomp profile; what they allow is allowed",
        "podman-run(1): --cap-add, --cap-drop, --security-opt seccomp=profile; containers.conf(5): default_capabilities"}},
      {"podman-hardened", "", "kernel",
       {"--cap-drop=ALL and no-new-privileges take capabilities and set-id gains away; the system calls podman's "
        "seccomp profile allows a process without capabilities are allowed",
        "podman-run(1): --cap-drop, --security-opt no-new-privileges, --security-opt seccomp=profile; "
        "containers.conf(5): seccomp_profile"}},
      {"podman", "sandbox-status", "",
       {"the default profile keeps podman's default capability set", "containers.conf(5): default_capabilities"}},
  };
  return r;
}

}  // namespace

const DocumentedLimit* documented_limit(const std::string& sandbox, const std::string& id, const std::string& category) {
  for (const auto& r : rules())
    if (matches(r.sandbox, sandbox) && (*r.probe ? id == r.probe : (!*r.category || category == r.category))) return &r.said;
  return nullptr;
}

}  // namespace exg::evidence
