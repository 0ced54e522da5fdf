// The Plan: everything a layer needs, decided before any clone(). Printable
// (`exguardian run --dry-run`) and unit-testable without touching the kernel.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "policy/policy.hpp"
#include "walls/landlock_rules.hpp"
#include "plan/limits.hpp"
#include "plan/secret.hpp"
#include "util/error.hpp"

namespace exg::plan {

enum class StepKind {
  BindRo,      // recursive bind of a host path, every submount read-only
  BindRw,      // recursive bind of a host path, writable (nosuid, nodev)
  Overlay,     // host dir as read-only lower layer, writes go to a throwaway tmpfs
  Tmpfs,       // an empty private tmpfs (mode in `mode`)
  MaskDir,     // empty read-only tmpfs over a denied directory
  MaskFile,    // empty unreadable read-only file over a denied file
  ProtectRo,   // bind an in-sandbox path onto itself read-only (protected names, denyWrite)
  Pin,         // bind an in-sandbox path onto itself writable: it can no longer be renamed or removed
  Proc,        // fresh procfs of the sandbox's pid namespace
  Sysfs,       // fresh read-only sysfs of the sandbox's net namespace
  Devpts,      // private devpts instance (own ptys)
  DevNode,     // bind of one host device node (/dev/null, ...)
  Symlink,     // create a symlink `target` -> `source`
  ReadOnly,    // make an already-built tmpfs read-only once its contents are in place
  ResolvConf,  // read-only generated resolv.conf ("nameserver 127.0.0.53") over the host's (network.resolver)
  File,        // a read-only regular file at `target` holding `content` (masked credential copies, the CA bundle)
};

const char* to_string(StepKind k);

// What a ResolvConf step puts over /etc/resolv.conf (the in-sandbox resolver).
inline constexpr char kResolverConf[] = "nameserver 127.0.0.53\noptions edns0 trust-ad\n";

struct Step {
  StepKind kind;
  std::string source;  // host path (binds, overlay lower), link text (Symlink)
  std::string target;  // absolute path inside the sandbox
  std::string why;     // shown by --dry-run
  unsigned mode = 0755;
  bool is_dir = true;          // target kind (masks, ProtectRo, binds)
  bool idmap = false;          // root only: through an idmapped mount (owner -> sandbox uid)
  std::string upper_dir, work_dir;  // Overlay on a host directory (workspace overlay mode); empty: tmpfs
  uid_t idmap_from_uid = 0;    // on-disk owner that the sandbox uid writes as
  gid_t idmap_from_gid = 0;
  // File: the bytes the sandbox reads (placeholders only, never a secret's value).
  std::string content;
  // File: a trust bundle: `content` (the host's bundle, `source`, filled in by
  // the supervisor) followed by this sandbox's CA certificate, which the layer
  // gets at launch (process layer: LaunchOptions::trust_anchor, made after the
  // clone so the CA's key is never in the sandbox's copy of the supervisor).
  bool trust_bundle = false;
  // File: writable inside (secretFiles "writable"): writes land in the copy, never in the host file.
  bool writable = false;
  // File, writable, inside a writable tree (an agent's config directory): the
  // tree is a credential_tree overlay and the copy a plain file in its upper
  // layer, not a mount point, so that an agent replacing it by a rename can
  // (a rename onto a mount point fails with EBUSY). Not mounted by the layers.
  bool in_upper = false;
  // Overlay (upper_dir on the host) of a writable tree that holds in_upper
  // copies, in place of its live bind: the supervisor puts the copies in the
  // upper layer before the start and applies the rest of the run's changes to
  // the tree at exit (the copies never: the proxy keeps the real file).
  bool credential_tree = false;
  // MaskFile over a host socket: the socket may be gone by the time the layer
  // mounts (unlinked by its server): then there is nothing to mask, not an error.
  bool if_present = false;
  // ProtectRo of a policy's denyWrite entry (not a protected name): a layer that cannot make
  // it read-only (landlock: no mounts, and Landlock cannot take rights away below a writable
  // tree) refuses the run rather than leave it writable.
  bool deny_write = false;
};

// Who the command runs as.
struct Identity {
  uid_t host_uid = 0;   // the sandbox's uid as the host sees it
  gid_t host_gid = 0;
  uid_t inside_uid = 0; // what `id -u` says inside
  gid_t inside_gid = 0;
  bool invoked_as_root = false;
  bool synthetic = false;  // a high unused uid chosen because the workspace owner is root
  std::string why;
};

// The egress proxy as the sandbox sees it: listeners on its own loopback.
struct ProxyPlan {
  bool enabled = true;
  uint16_t http_port = 3128;
  uint16_t socks_port = 1080;
  bool resolver = false;  // network.resolver / --dns: UDP 127.0.0.53:53 inside, served by the supervisor
  // network.transparent (default on): the resolver hands out addresses of its
  // own and every TCP connection out is redirected to the proxy's transparent
  // listener (127.0.0.1:transparent_port); the resolver is on with it.
  bool transparent = false;
  uint16_t transparent_port = 15001;
  // Transparent egress: the exact names network.allowedDomains allows, in the
  // order their handed-out addresses are given (the first 198.18.0.1, ...).
  // The sandbox's /etc/hosts maps them, so a client's lookup of an allowed
  // name is a file read, not a round trip to the resolver; the proxy pins the
  // same addresses before its first answer. Wildcards and names allowed
  // later (serve's network changes) still go through the resolver.
  std::vector<std::string> pinned_names;
  std::string text() const;  // the "egress:" line of --dry-run
};

// How workspace writes reach the host (DESIGN.md, issue 8).
enum class WorkspaceMode {
  Live,     // bound read-write; protected names created during the run are swept at exit
  Overlay,  // an overlay whose upper layer lives outside; applied at exit, protected names quarantined
  Discard,  // an overlay whose changes are dropped at exit
};
const char* to_string(WorkspaceMode m);

struct Plan {
  std::string sandbox_id;
  std::vector<std::string> argv;
  std::string workspace;  // canonical host path, mounted at the same path (or at Context::workspace_at)
  std::string cwd;        // inside
  std::string home;       // HOME inside (same path as on the host)
  std::string hostname = "exguardian";
  Identity identity;
  std::vector<std::string> namespaces{"user", "mount", "pid", "net", "ipc", "uts", "cgroup"};
  std::vector<Step> steps;
  std::vector<std::string> env;  // NAME=VALUE, the whole environment inside
  std::optional<std::chrono::milliseconds> timeout;
  Limits limits;          // defaults, overridden by the policy (explicit_* set)
  walls::LandlockRules landlock; // the second wall: mirrors the writable mounts
  ProxyPlan proxy;
  bool seccomp = true;               // false only with --unsafe-no-seccomp
  WorkspaceMode workspace_mode = WorkspaceMode::Live;
  std::string layer_dir;             // overlay/discard: DIR/{upper,work}; kept with --keep
  bool keep_layer = false;
  bool allow_planted = false;        // planted files are still quarantined, the run just does not fail
  std::string quarantine_dir;        // where planted files go
  bool quarantine_fresh = false;     // made at start with mkdir (EEXIST is an error): see compile()
  std::vector<std::string> protect_extra;   // filesystem.protect (+ .env when direnv loads it)
  bool allow_git_config = false;
  // Writable trees bound live (the workspace in live mode, allowWrite
  // directories): snapshot at start, swept at exit.
  std::vector<std::string> swept_trees;
  // What git directories in writable trees point at (core.hooksPath, include
  // paths, symlinked hooks' targets): protected like the names.
  std::vector<std::string> protect_pointers;
  std::vector<std::string> weakened; // explicit weaker modes, reported loudly on every run
  policy::Network network;         // egress rules, applied by the supervisor's proxy
  // Credential injection (DESIGN.md §6). The values live here, in the
  // supervisor, and go to the proxy only: to_text() never prints them, no
  // step or environment entry holds them.
  std::vector<Secret> secrets;
  std::string trust_bundle_path;   // inside: where the CA variables point (secrets or extra CAs only)
  std::string extra_ca_pem;        // tlsTerminate.extraCaCertPaths' certificates, added to the bundle inside
  // network.rules / readOnly: TLS to the hosts under them ends at the proxy too
  // (so that their requests can be judged): a CA and its trust bundle even
  // without secrets.
  bool terminate_for_rules = false;
  bool terminates_tls() const { return !secrets.empty() || terminate_for_rules; }
  std::string host_trust_bundle;   // the host's bundle: upstream verification and the bundle's base; empty: none found
  std::vector<std::string> notes;  // decisions worth showing (-v, --dry-run)
  // network.allowUnixSockets named a host socket the view shows, or
  // allowAllUnixSockets is set: a layer that cannot carry a host socket to
  // the command (Layer::carries_host_unix_sockets) refuses the plan rather
  // than drop it.
  bool host_unix_sockets_allowed = false;
  // What the supervisor lets the command connect() to besides the Unix sockets
  // bound inside the sandbox (sandbox/socket_address_gate.hpp): the host
  // paths network.allowUnixSockets names (the sandbox sees them at the same
  // paths), or every one (allowAllUnixSockets).
  std::vector<std::string> unix_sockets_allowed;
  bool unix_sockets_all_allowed = false;

  // The Plan as --dry-run prints it; `layer_lines` (Layer::describe) follow
  // the sandbox line: the Plan itself does not know which layer runs it.
  std::string to_text(const std::vector<std::string>& layer_lines = {}) const;
};

// What compile() needs to know about the invocation; filled from the real
// process by Context::from_process(), or by hand in unit tests.
struct Context {
  uid_t uid = 0;
  gid_t gid = 0;
  std::string cwd;
  std::string home;
  std::vector<std::string> environ;  // NAME=VALUE of the invoking process
  std::optional<std::string> workspace;  // --workspace, else cwd
  std::vector<std::string> argv;
  std::string sandbox_id;  // empty: generate one
  WorkspaceMode workspace_mode = WorkspaceMode::Live;
  std::optional<std::string> keep_dir;  // --keep: where the overlay's upper layer stays
  bool allow_planted = false;
  // --workspace-at: where the workspace appears inside (HOME and the default
  // cwd there; its parent a fresh tmpfs, so the host's directory there is not
  // seen). Empty: at its host path. serve gives E2B's /home/user.
  std::string workspace_at;
  // --user-name: the sandbox's user's name in its own /etc/passwd and
  // /etc/group (first, so the name wins for its uid), USER and LOGNAME.
  std::string user_name;
  // false: the layer that runs the Plan makes no mounts and judges every
  // connect() to a host Unix socket itself (the landlock layer: the
  // supervisor's gate refuses what network.allowUnixSockets does not name), so
  // masking the host's sockets is not its wall and the scan of every network
  // namespace's socket table that finds them to mask is skipped (on every
  // start: one readlink per host process, a read per namespace).
  bool mask_host_sockets = true;

  static Context from_process(const std::vector<std::string>& argv);
};

Result<Plan> compile(const policy::Policy& policy, const Context& ctx);

// The built-in defaults (DESIGN.md §1); compile() applies them under the policy.
extern const std::vector<std::string> kCredentialPaths;  // relative to HOME
extern const std::vector<std::string> kEnvAllowlist;     // exact names; LC_* handled apart

}  // namespace exg::plan
