// The walls the guest's init puts around the agent and everything it starts,
// the process layer's where they fit in a guest: its seccomp rules (answered
// by the filter itself: no supervisor listens in the guest), the Plan's
// Landlock rules, the pids limit (a cgroup of the guest's own kernel), no core
// dumps. The host decides them from the Plan (microvm/launch.cpp) and sends
// them in the boot frame's "walls" (guest_abi.hpp kBootOp); the init applies
// them (guest/walls_apply.hpp) and the agent's ready event says what was
// applied. Header-only, plain data and JSON: the host and the static init
// share it.
#pragma once
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "walls/landlock_rules.hpp"

namespace exg::microvm::guest {

struct Walls {
  bool seccomp = false;                         // walls/seccomp.hpp, Refusal::Errno
  std::optional<walls::LandlockRules> landlock;  // none: not applied (root inside the guest)
  uint32_t pids = 0;                            // pids.max of the agent's cgroup in the guest; 0: no limit
};

// The most a pids limit can be (the CLI's --pids bound).
inline constexpr uint32_t kMaxPids = 4194304;

inline nlohmann::json walls_to_json(const Walls& w) {
  nlohmann::json j = {{"seccomp", w.seccomp}, {"pids", w.pids}, {"landlock", nullptr}};
  if (w.landlock) {
    const auto& l = *w.landlock;
    j["landlock"] = {{"read_only", l.read_only},
                     {"read_write", l.read_write},
                     {"write_files", l.write_files},
                     {"scope_signals", l.scope_signals},
                     {"scope_abstract_unix", l.scope_abstract_unix},
                     {"required", l.required},
                     {"handle_reads", l.handle_reads},
                     {"handle_net", l.handle_net},
                     {"bind_tcp", l.bind_tcp},
                     {"connect_tcp", l.connect_tcp},
                     {"log_after_exec", l.log_after_exec}};
  }
  return j;
}

// The walls from the boot frame's "walls"; nullopt and `why` (naming the
// field) when anything is missing, of another type or out of range: the init
// then refuses to go on.
inline std::optional<Walls> walls_from_json(const nlohmann::json& j, std::string* why) {
  auto bad = [&](const std::string& field, const char* what) -> std::optional<Walls> {
    if (why) *why = "walls" + (field.empty() ? "" : "." + field) + ": " + what;
    return std::nullopt;
  };
  if (!j.is_object()) return bad("", "not an object");
  for (const auto& [k, v] : j.items())
    if (k != "seccomp" && k != "pids" && k != "landlock") return bad(k, "unknown field");
  Walls w;
  if (!j.contains("seccomp") || !j["seccomp"].is_boolean()) return bad("seccomp", "missing or not a boolean");
  w.seccomp = j["seccomp"].get<bool>();
  if (!j.contains("pids") || !j["pids"].is_number_unsigned() || j["pids"].get<uint64_t>() > kMaxPids)
    return bad("pids", "missing or not a whole number from 0 to 4194304");
  w.pids = j["pids"].get<uint32_t>();
  if (!j.contains("landlock")) return bad("landlock", "missing (null when not applied)");
  const auto& l = j["landlock"];
  if (l.is_null()) return w;
  if (!l.is_object()) return bad("landlock", "not an object or null");
  walls::LandlockRules r;
  auto paths = [&](const char* f, std::vector<std::string>& out) {
    if (!l.contains(f) || !l[f].is_array()) return false;
    for (const auto& p : l[f]) {
      if (!p.is_string()) return false;
      const auto& s = p.get_ref<const std::string&>();
      if (s.empty() || s[0] != '/' || s.find('\0') != std::string::npos) return false;
      out.push_back(s);
    }
    return true;
  };
  auto flag = [&](const char* f, bool& out) {
    if (!l.contains(f) || !l[f].is_boolean()) return false;
    out = l[f].get<bool>();
    return true;
  };
  auto ports = [&](const char* f, std::vector<uint16_t>& out) {
    if (!l.contains(f) || !l[f].is_array()) return false;
    for (const auto& p : l[f]) {
      if (!p.is_number_unsigned() || p.get<uint64_t>() > 65535) return false;
      out.push_back(p.get<uint16_t>());
    }
    return true;
  };
  for (const auto& [k, v] : l.items()) {
    static const char* const kKnown[] = {"read_only", "read_write", "write_files", "scope_signals",
                                         "scope_abstract_unix", "required", "handle_reads", "handle_net",
                                         "bind_tcp", "connect_tcp", "log_after_exec"};
    if (std::find(std::begin(kKnown), std::end(kKnown), k) == std::end(kKnown)) return bad("landlock." + k, "unknown field");
  }
  if (!paths("read_only", r.read_only)) return bad("landlock.read_only", "not an array of absolute paths");
  if (!paths("read_write", r.read_write)) return bad("landlock.read_write", "not an array of absolute paths");
  if (!paths("write_files", r.write_files)) return bad("landlock.write_files", "not an array of absolute paths");
  for (auto [f, out] : {std::pair{"scope_signals", &r.scope_signals}, {"scope_abstract_unix", &r.scope_abstract_unix},
                        {"required", &r.required}, {"handle_reads", &r.handle_reads}, {"handle_net", &r.handle_net},
                        {"log_after_exec", &r.log_after_exec}})
    if (!flag(f, *out)) return bad(std::string("landlock.") + f, "missing or not a boolean");
  if (!ports("bind_tcp", r.bind_tcp)) return bad("landlock.bind_tcp", "not an array of ports");
  if (!ports("connect_tcp", r.connect_tcp)) return bad("landlock.connect_tcp", "not an array of ports");
  w.landlock = std::move(r);
  return w;
}

}  // namespace exg::microvm::guest
