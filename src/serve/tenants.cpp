#include "serve/tenants.hpp"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <fstream>
#include <iterator>
#include <set>

#include <nlohmann/json.hpp>

#include "policy/policy.hpp"
#include "util/json_parse.hpp"

namespace exg::serve {

namespace {

std::array<unsigned char, 32> sha256(const std::string& s) {
  std::array<unsigned char, 32> out{};
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), out.data());
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string key_entry(const std::string& key) {
  static const char* hex = "0123456789abcdef";
  std::string s = "sha256:";
  for (unsigned char b : sha256(key)) s += hex[b >> 4], s += hex[b & 15];
  return s;
}

Result<Tenants> Tenants::load(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return fail(Error::sys("--tenants " + file));
  std::string text(std::istreambuf_iterator<char>(in), {});
  return parse(text, file);
}

Result<Tenants> Tenants::parse(const std::string& text, const std::string& where) {
  auto j = parse_json(text);
  auto bad = [&](const std::string& path, const std::string& why) { return fail(Error::msg(where + ": " + path, why)); };
  if (j.is_discarded()) return bad("", "not valid JSON");
  if (!j.is_object()) return bad("", "expected an object {\"tenants\": [...]}");
  for (auto& [k, v] : j.items())
    if (k != "tenants") return bad(k, "unknown key (expected \"tenants\")");
  if (!j.contains("tenants") || !j["tenants"].is_array()) return bad("tenants", "expected an array");
  Tenants t;
  std::set<std::string> ids;
  std::set<std::array<unsigned char, 32>> hashes;
  size_t i = 0;
  for (auto& e : j["tenants"]) {
    std::string at = "tenants[" + std::to_string(i++) + "]";
    if (!e.is_object()) return bad(at, "expected an object");
    Tenant tn;
    for (auto& [k, v] : e.items()) {
      if (k == "id") {
        if (!v.is_string() || v.get<std::string>().empty() || v.get<std::string>().size() > 64)
          return bad(at + ".id", "expected a string of 1..64 characters");
        tn.id = v.get<std::string>();
        for (char c : tn.id)
          if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.')
            return bad(at + ".id", "only letters, digits, '-', '_' and '.'");
      } else if (k == "keys") {
        if (!v.is_array() || v.empty()) return bad(at + ".keys", "expected a non-empty array of \"sha256:<hex>\"");
        for (auto& h : v) {
          std::string s = h.is_string() ? h.get<std::string>() : "";
          if (!s.starts_with("sha256:") || s.size() != 7 + 64)
            return bad(at + ".keys", "expected \"sha256:<64 hex digits>\" (exguardian serve --hash-key KEY prints one)");
          std::array<unsigned char, 32> a{};
          for (size_t b = 0; b < 32; ++b) {
            int hi = hex_value(s[7 + 2 * b]), lo = hex_value(s[8 + 2 * b]);
            if (hi < 0 || lo < 0) return bad(at + ".keys", "not a hex digit in " + s);
            a[b] = static_cast<unsigned char>(hi * 16 + lo);
          }
          if (!hashes.insert(a).second) return bad(at + ".keys", "a key listed twice (in this or another tenant)");
          tn.key_hashes.push_back(a);
        }
      } else if (k == "quota") {
        if (!v.is_object()) return bad(at + ".quota", "expected an object");
        for (auto& [qk, qv] : v.items()) {
          std::string qat = at + ".quota." + qk;
          if (!qv.is_number() || qv.get<double>() < 0) return bad(qat, "expected a number >= 0");
          if (qk == "sandboxes") {
            // Read as unsigned (negatives are refused above): as int64, 2^64-1 would pass as -1.
            if (!qv.is_number_integer() || qv.get<uint64_t>() > 100000) return bad(qat, "expected an integer 0..100000");
            tn.quota.max_sandboxes = qv.get<size_t>();
          } else if (qk == "memoryMB") {
            if (!qv.is_number_integer()) return bad(qat, "expected an integer");
            tn.quota.max_memory_mb = qv.get<uint64_t>();
          } else if (qk == "cpus") {
            tn.quota.max_cpus = qv.get<double>();
          } else if (qk == "maxTimeoutSeconds") {
            if (!qv.is_number_integer() || qv.get<uint64_t>() < 1 || qv.get<uint64_t>() > static_cast<uint64_t>(kMaxTimeoutQuota))
              return bad(qat, "expected an integer 1.." + std::to_string(kMaxTimeoutQuota) + " (ten years)");
            tn.quota.max_timeout_s = qv.get<int64_t>();
          } else if (qk == "snapshots") {
            if (!qv.is_number_integer() || qv.get<uint64_t>() > 100000) return bad(qat, "expected an integer 0..100000");
            tn.quota.max_snapshots = qv.get<size_t>();
          } else if (qk == "pausedDiskMB") {
            if (!qv.is_number_integer()) return bad(qat, "expected an integer");
            tn.quota.max_paused_disk_mb = qv.get<uint64_t>();
          } else {
            return bad(qat, "unknown key (sandboxes, memoryMB, cpus, maxTimeoutSeconds, snapshots, pausedDiskMB)");
          }
        }
      } else if (k == "secrets") {
        // Checked by the policy loader itself, as the supervisor will read them.
        if (!v.is_array()) return bad(at + ".secrets", "expected an array of the policy's \"secrets\" entries");
        auto p = policy::parse_policy(nlohmann::json{{"secrets", v}}.dump(), at, "/");
        if (!p) return bad(at + ".secrets", p.error().message);
        for (const auto& s : p->secrets) {
          if (s.source == policy::SecretEntry::Source::File && !s.from.starts_with('/'))
            return bad(at + ".secrets", s.name + ": \"from\": \"file:" + s.from +
                                            "\" must be an absolute path on the server's host");
          for (const auto& h : s.hosts) tn.secret_hosts.push_back(h.pattern);
        }
        tn.secrets = v;
      } else {
        return bad(at + "." + k, "unknown key (id, keys, quota, secrets)");
      }
    }
    if (tn.id.empty()) return bad(at + ".id", "missing");
    if (tn.key_hashes.empty()) return bad(at + ".keys", "missing");
    if (!ids.insert(tn.id).second) return bad(at + ".id", "duplicate tenant id " + tn.id);
    t.tenants_.push_back(std::move(tn));
  }
  return t;
}

const Tenant* Tenants::find(const std::string& id) const {
  for (const auto& t : tenants_)
    if (t.id == id) return &t;
  return nullptr;
}

const Tenant* Tenants::authenticate(const std::string& key) const {
  if (key.empty()) return nullptr;
  auto h = sha256(key);
  const Tenant* found = nullptr;
  // Every hash is compared, whatever matched before.
  for (const auto& t : tenants_)
    for (const auto& k : t.key_hashes)
      if (CRYPTO_memcmp(k.data(), h.data(), h.size()) == 0) found = &t;
  return found;
}

}  // namespace exg::serve
