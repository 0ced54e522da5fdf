// Tenants and their API keys (the --tenants file). Only SHA-256 hashes of
// keys are held; a presented key is hashed and compared with every stored
// hash in constant time (CRYPTO_memcmp), so neither timing nor an early exit
// tells which bytes matched. Quotas bound what one tenant may hold at once.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "util/error.hpp"

namespace exg::serve {

// The longest maxTimeoutSeconds a tenants file may give: ten years. Deadlines
// are now + timeout on a clock of 64-bit nanoseconds, which a larger one overflows.
inline constexpr int64_t kMaxTimeoutQuota = 10LL * 365 * 24 * 3600;

struct Quota {
  size_t max_sandboxes = 10;            // running or paused at once
  uint64_t max_memory_mb = 16 * 1024;   // sum of the templates' memory over its sandboxes
  double max_cpus = 16;                 // sum of the templates' cpus
  int64_t max_timeout_s = 24 * 3600;    // longest timeout a create/setTimeout may ask
  size_t max_snapshots = 100;           // snapshots kept at once (a fork's own are not counted)
  uint64_t max_paused_disk_mb = 10240;  // the homes of its paused sandboxes, summed as each was paused
};

struct Tenant {
  std::string id;
  std::vector<std::array<unsigned char, 32>> key_hashes;
  Quota quota;
  // The tenant's credentials, as a policy's "secrets" entries whose "from" is
  // on the server's host (env:NAME of the server's environment, or
  // file:/absolute/path): each of its sandboxes holds a placeholder, the
  // proxy puts the value into requests to the hosts declared, which the
  // tenant's sandboxes may therefore reach. Validated at load.
  nlohmann::json secrets = nlohmann::json::array();
  std::vector<std::string> secret_hosts;  // every secret's hosts, as written
};

class Tenants {
 public:
  // {"tenants": [{"id": "acme", "keys": ["sha256:<64 hex>"], "quota": {"sandboxes": 10, "memoryMB": 8192, "cpus": 8, "maxTimeoutSeconds": 3600,
  //                                                                   "snapshots": 100, "pausedDiskMB": 10240},
  //               "secrets": [{"name": "GITHUB_TOKEN", "from": "file:/etc/exguardian/acme/github", "hosts": ["api.github.com"]}]}]}
  // Unknown keys, duplicate ids or keys, malformed hashes: an error naming where.
  static Result<Tenants> load(const std::string& file);
  static Result<Tenants> parse(const std::string& text, const std::string& where);
  // The tenant whose key this is; nothing for an unknown key.
  const Tenant* authenticate(const std::string& key) const;
  const Tenant* find(const std::string& id) const;
  const std::vector<Tenant>& all() const { return tenants_; }

 private:
  std::vector<Tenant> tenants_;
};

// "sha256:<hex>" of a key: what --hash-key prints and the tenants file holds.
std::string key_entry(const std::string& key);

}  // namespace exg::serve
