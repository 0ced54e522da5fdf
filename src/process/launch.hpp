// The supervisor's side of the launch: prepares what only the host can
// (idmapped mounts when invoked as root), clones the sandbox into its new
// namespaces, writes its id maps and waits until it is set up or has failed.
#pragma once
#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "layer/layer.hpp"
#include "plan/plan.hpp"
#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace exg::process {

// The layer interface's types (layer/layer.hpp), by their old names.
using LaunchOptions = layer::LaunchOptions;
using Launched = layer::Sandbox;

// Writes setgroups=deny and one-id uid/gid maps (inside -> host) for pid.
Result<void> write_id_maps(pid_t pid, const plan::Identity& id);

// Root only: a user namespace mapping on-disk owner from_* onto to_* (the
// sandbox's host ids), for MOUNT_ATTR_IDMAP; made by a short-lived child.
// The child is killed before this returns; with `reap_later` it goes there,
// to be reaped when the caller drops it (launch(): with the Sandbox, at the
// run's end, when it has long exited), else it is reaped here.
class IdmapHolder {
 public:
  IdmapHolder(UniqueFd pidfd, std::unique_ptr<char[]> stack) : pidfd_(std::move(pidfd)), stack_(std::move(stack)) {}
  IdmapHolder(IdmapHolder&&) = default;
  IdmapHolder& operator=(IdmapHolder&&) = delete;
  ~IdmapHolder();  // waits for its exit (by pidfd: no other process's pid), then frees its stack
  bool reap_if_exited();  // true when it has exited and is reaped (no wait): the destructor then returns at once

 private:
  UniqueFd pidfd_;
  std::unique_ptr<char[]> stack_;  // it shares this process's memory: kept until it is gone
};
Result<UniqueFd> idmap_userns(uid_t from_uid, gid_t from_gid, uid_t to_uid, gid_t to_gid,
                              std::vector<IdmapHolder>* reap_later = nullptr);
// A detached clone of s.source (recursive) idmapped through userns_fd.
Result<int> idmapped_tree(const plan::Step& s, int userns_fd);

// Signals the supervisor handles itself must be blocked before launch() (the
// child inherits the mask; its init keeps them blocked and waits for them):
// the front end does it once per process (cli/host_setup.hpp), and drops
// root's supplementary groups, which launch() checks. The spawn itself is
// process::spawn (process/spawn.hpp).
Result<Launched> launch(const plan::Plan& plan, const LaunchOptions& opt);

}  // namespace exg::process
