// The egress of one container of `exguardian runtime` (issue 17): a process
// of its own that lives with the container (as conmon does for the engine)
// and holds ExGuardian's proxy for it.
//
// At `create`, before the runtime runs, the holder (forked, then detached:
// its own session, stdio on /dev/null):
//   - enters the container's network namespace: the engine's (a pod's, or
//     one podman/CNI set up) or, when the engine asked for a new one, a new
//     one it makes itself and keeps open (config.json then joins
//     /proc/HOLDER/fd/N);
//   - brings lo up and makes the proxy's listeners there (127.0.0.1:3128 and
//     :1080; other free ports when a neighbour in the pod holds those), the
//     same sockets the process layer makes (process/netns_setup.hpp);
//   - in an engine's namespace (which has routes out), adds an nftables
//     table that drops every packet leaving by anything but lo, except
//     replies to connections made from outside (services, probes): the
//     proxy is the only way out;
//   - goes back to its own namespace, from where the proxy connects out;
//   - takes a snapshot of the host directories the container may write
//     through the engine's binds (sandbox/sweep.hpp);
//   - says where (namespace path, ports), then waits for the container's
//     pid and runs the proxy (rules of the policy, refusals of metadata and
//     private addresses after DNS, audit lines tagged with the container id
//     and handler) until that pid is gone or it is told to stop (delete);
//   - then sweeps those directories: protected names (git hooks and config,
//     rc files, .envrc, .vscode, ...) created or changed while the container
//     ran are moved to a quarantine beside the audit log
//     (DIR/quarantine/ID/N/...), one audit line each ("event": "planted").
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "policy/policy.hpp"
#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace exg::runtime {

struct EgressHolder {
  pid_t pid = -1;
  std::string netns_path;  // what config.json's network namespace joins
  uint16_t http_port = 0, socks_port = 0;
  UniqueFd control;        // send_container_pid() through it, then close
};

struct EgressHolderOptions {
  std::string container_id;
  std::string handler;
  std::string engine_netns;  // "" : a new namespace
  std::string audit_log;     // file the audit lines are appended to
  std::vector<std::string> swept_trees;  // host directories swept for planted files at the end
  nlohmann::json audit_tags = nlohmann::json::object();  // added to every audit line (pod_identity)
};

// Where the planted files of container `id` go: beside the audit log.
std::string quarantine_dir(const std::string& audit_log, const std::string& container_id);

// Starts the holder; an error (and no holder left) when any step failed.
Result<EgressHolder> start_egress_holder(const policy::Policy& pol, const EgressHolderOptions& opt);

// After the runtime created the container: its init's pid (the holder ends
// when it ends). Closing `control` without it ends the holder.
void send_container_pid(EgressHolder& h, pid_t container_pid);

// "PID STARTTIME" of a live process (to recognise it later), "" when gone.
std::string process_identity(pid_t pid);

// SIGTERM to the holder if `identity` (process_identity) is still the same
// process; waits (bounded) for it to go.
void stop_egress_holder(const std::string& identity);

}  // namespace exg::runtime
