// E2B's snapshots (POST /sandboxes/{id}/snapshots, GET /snapshots, DELETE
// /templates/{id}, a create whose templateID names one) and fork, kept as
// files: --state-dir/snapshots/<id>/ holds meta.json, home/ (a copy of the
// sandbox's /home/user) and quarantine/ (what the sweep took out of the copy).
//
// Filesystem only: what a snapshot keeps is the sandbox's home (its one
// writable tree that outlives a command: /tmp and the rest are its own tmpfs
// or the host's read-only root); not memory, not processes. A sandbox made
// from one starts fresh, with that home.
//
// The seed's warning: a snapshot carries a planted file into every sandbox
// made from it. So the copy is swept as the end of a run sweeps the home
// (sandbox/sweep.hpp, the one list of protected names): every protected name
// in it (a git hook, .bashrc, .envrc, a non-trivial .git/config, ...) is moved
// to the snapshot's quarantine before the snapshot exists, and the answer
// lists them; a copy that cannot be swept whole is no snapshot (refused,
// saying why).
//
// The copies run in a child process of the server (Registry::run_helper):
// a big home never stalls the event loop, and the walk (by fd from the
// sandbox's home, never following a symlink, no deeper than kMaxDepth) is
// the only thing that reads the sandbox's tree.
#pragma once
#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/error.hpp"

namespace exg::serve {

struct SnapshotRecord {
  std::string id;        // snapshotID: also a templateID for a create
  std::string tenant;
  std::string sandbox;   // the sandbox it was taken from
  std::string template_name;
  std::string layer;     // its template's layer (what the answer says is kept); empty in an older record
  std::vector<std::string> names;
  std::chrono::system_clock::time_point created;
  bool internal = false;  // a fork's: not listed, removed once the forks have their copies
  std::vector<std::pair<std::string, std::string>> quarantined;  // relpath, why
  nlohmann::json to_json() const;  // meta.json
  static std::optional<SnapshotRecord> from_json(const nlohmann::json& j);
};

// What the answers say a snapshot of a sandbox of `layer` keeps (docs/serve.md).
// Memory on no layer: the microVM's guest state would be a qemu migration, and
// qemu refuses one while the guest has its 9p view (the home) mounted, which a
// guest with running processes always has ("Migration is disabled when VirtFS
// export path ... is mounted in the guest"; the template snapshot is saved
// before the view is attached: microvm/snapshot.hpp).
std::string snapshot_keeps(const std::string& layer);

class SnapshotStore {
 public:
  // --state-dir/snapshots; the snapshots of an earlier server are read back.
  Result<void> open(const std::string& dir);
  const std::string& dir() const { return dir_; }
  std::string dir_of(const std::string& id) const { return dir_ + "/" + id; }
  // Saves meta.json and keeps the record.
  Result<void> add(const SnapshotRecord& r);
  bool remove(const std::string& tenant, const std::string& id);  // false: not the tenant's, or none
  // The tenant's snapshot by id or name (a name taken twice: the newest).
  const SnapshotRecord* find(const std::string& tenant, const std::string& id_or_name) const;
  std::vector<const SnapshotRecord*> list(const std::string& tenant, const std::string& sandbox, const std::string& name) const;

 private:
  std::string dir_;
  std::map<std::string, SnapshotRecord> by_id_;
};

// Run in a child: copies `home` into `snap_dir`/home and sweeps the copy into
// `snap_dir`/quarantine; writes `snap_dir`/planted.json ([[relpath, why]]) or
// `snap_dir`/error.txt. The exit status: 0 done, 1 refused.
int take_snapshot_copy(const std::string& home, const std::string& snap_dir);
// Run in a child: copies a snapshot's home into `home` (made, 0755). 0 done, 1 failed (`home`/../seed-error.txt).
int seed_home_copy(const std::string& snapshot_home, const std::string& home);
// Gives the tree at `root` (ours: a seed copy no sandbox has seen yet) to uid:gid, never following a link.
Result<void> chown_tree(const std::string& root, uid_t uid, gid_t gid);

}  // namespace exg::serve
