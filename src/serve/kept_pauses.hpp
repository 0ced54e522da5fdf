// A pause that outlives the server: when a sandbox is paused, what it takes to
// start it again after a restart of serve is written to
// --state-dir/paused/<id>.json (one flat file: a directory made and removed at
// every pause and resume cost ext4 milliseconds; the file ~0.2 ms) (its id, tenant, tokens, template, metadata,
// envs, egress lists). The sandbox's home stays in its own directory while the
// server runs; a server that stops (or a next one that finds the leftover)
// moves it to --state-dir/paused/<id>.home instead of removing it.
//
// The next server lists such a sandbox as paused with no supervisor; a connect
// or resume starts it again under the same id and tokens from that home, swept
// first as a snapshot's copy is (snapshots.hpp: planted files quarantined).
// Filesystem only: its processes ended with the old server (docs/serve.md).
//
// Not kept: a sandbox with network.rules (their values are the supervisor's
// only, never on disk), one on a host workspace (mcp), a pool's.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/error.hpp"

namespace exg::serve {

struct KeptPause {
  std::string id, tenant, template_name;
  std::string access_token, traffic_token;  // empty: created with secure false
  std::string mask_request_host;
  nlohmann::json metadata = nlohmann::json::object();
  std::map<std::string, std::string> env_vars;
  std::vector<std::string> allow_out, deny_out;
  std::chrono::system_clock::time_point started_at;
  std::chrono::system_clock::time_point paused_at;  // it is kept --pause-ttl-hours from here
  std::chrono::seconds timeout{300};                // the create's (a resume's), and its lifecycle
  bool auto_pause = false, auto_resume = false;
  bool auto_pause_memory = true;  // false: its timeout pauses it filesystem only
  nlohmann::json to_json() const;
  static std::optional<KeptPause> from_json(const nlohmann::json& j);
};

// What the answers say a pause kept across a restart keeps.
inline constexpr char kKeptPauseKeeps[] =
    "filesystem only: the sandbox's /home/user, swept; its processes ended with the server that paused it";

// The disk a tree takes (its files' blocks, symlinks not followed), counted up
// to just past `stop_after` (a pause over its quota needs no exact figure).
uint64_t disk_bytes(const std::string& dir, uint64_t stop_after);

class KeptPauses {
 public:
  explicit KeptPauses(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }
  std::string record_of(const std::string& id) const { return dir_ + "/" + id + ".json"; }
  std::string home_of(const std::string& id) const { return dir_ + "/" + id + ".home"; }
  std::string seed_of(const std::string& id) const { return dir_ + "/" + id + ".seed"; }  // its swept copy
  bool has(const std::string& id) const;
  // The record written whole (a temporary renamed over it).
  Result<void> write(const KeptPause& k) const;
  // A resume: the record only (a running sandbox's home is not kept apart).
  void drop_record(const std::string& id) const;
  // Forgets it: the record, the kept home and its copy, if any.
  void remove(const std::string& id) const;
  // Records with their home in place; a record without one is removed.
  std::vector<KeptPause> load() const;

 private:
  std::string dir_;
};

}  // namespace exg::serve
