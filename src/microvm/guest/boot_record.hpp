// The hand-over between the host and the guest's init at the point where a
// guest is the same for every sandbox: the init has loaded its modules and
// opened the agent's port, and has mounted nothing of the sandbox yet. It
// says so with kParkedLine, then blocks until the host sends one boot record
// (a line): who the agent runs as, the hostname, the host's clock and fresh
// entropy. A template is saved while the guest waits there (snapshot.hpp),
// so every sandbox restored from it gets its own identity, clock and RNG
// seed, pushed in at restore; a cold boot takes the same record.
// Header-only, plain C++: the guest's init includes it without exg_core.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

namespace exg::microvm::guest {

inline constexpr char kParkedLine[] = "exg-parked 1\n";
inline constexpr size_t kSeedBytes = 32;

struct BootRecord {
  uint32_t uid = 65534, gid = 65534;
  std::string hostname = "exguardian";
  int64_t time_sec = 0;
  int64_t time_nsec = 0;
  std::string seed_hex;  // kSeedBytes, hex
};

// "exg-boot 1 uid=N gid=N host=NAME time=SEC.NSEC seed=HEX\n"
inline std::string format_boot_record(const BootRecord& r) {
  return "exg-boot 1 uid=" + std::to_string(r.uid) + " gid=" + std::to_string(r.gid) + " host=" + r.hostname +
         " time=" + std::to_string(r.time_sec) + "." + std::to_string(r.time_nsec) + " seed=" + r.seed_hex + "\n";
}

// The record from one line (without its newline); nullopt when any field is
// missing or malformed (the init then refuses to go on).
inline std::optional<BootRecord> parse_boot_record(const std::string& line) {
  const std::string head = "exg-boot 1 ";
  if (line.compare(0, head.size(), head) != 0) return std::nullopt;
  auto field = [&](const char* name) -> std::optional<std::string> {
    std::string key = std::string(" ") + name + "=";
    size_t at = line.find(key, head.size() - 1);
    if (at == std::string::npos) return std::nullopt;
    size_t b = at + key.size(), e = line.find(' ', b);
    return line.substr(b, e == std::string::npos ? std::string::npos : e - b);
  };
  auto number = [](const std::string& s, uint64_t max) -> std::optional<uint64_t> {
    if (s.empty() || s.size() > 19) return std::nullopt;
    for (char c : s)
      if (c < '0' || c > '9') return std::nullopt;
    uint64_t v = std::strtoull(s.c_str(), nullptr, 10);
    if (v > max) return std::nullopt;
    return v;
  };
  auto uid = field("uid"), gid = field("gid"), host = field("host"), time = field("time"), seed = field("seed");
  if (!uid || !gid || !host || !time || !seed) return std::nullopt;
  BootRecord r;
  auto u = number(*uid, 0xfffffffeu), g = number(*gid, 0xfffffffeu);
  size_t dot = time->find('.');
  if (!u || !g || dot == std::string::npos) return std::nullopt;
  auto ts = number(time->substr(0, dot), INT64_MAX), tn = number(time->substr(dot + 1), 999999999);
  if (!ts || !tn) return std::nullopt;
  if (host->empty() || host->size() > 64) return std::nullopt;
  for (char c : *host)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.'))
      return std::nullopt;
  if (seed->size() != 2 * kSeedBytes) return std::nullopt;
  for (char c : *seed)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return std::nullopt;
  r.uid = static_cast<uint32_t>(*u);
  r.gid = static_cast<uint32_t>(*g);
  r.hostname = *host;
  r.time_sec = static_cast<int64_t>(*ts);
  r.time_nsec = static_cast<int64_t>(*tn);
  r.seed_hex = *seed;
  return r;
}

}  // namespace exg::microvm::guest
