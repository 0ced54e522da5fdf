// The guest's own scratch directories: the Plan's private tmpfs mounts (/tmp,
// /var/tmp, /run) made by the guest's kernel instead of seen through the 9p
// view. A 9p file is not a local inode: a Unix socket bound there answers
// ENXIO to every connect, so a command's own local servers (a database in
// /tmp, an X or dbus socket in /run) did not work on this layer. What the plan
// mounts below such a directory (a workspace under /tmp, exguardian itself
// under /run) is carried from the view into the guest's tmpfs, so the guest
// sees the same tree as every other layer. The host decides the list from the
// Plan (microvm/view.hpp guest_scratch_dirs) and sends it in the boot frame's
// "scratch" (guest_abi.hpp kBootOp); the init mounts them (guest/init.cpp).
// Header-only, plain data and JSON: the host and the static init share it.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace exg::microvm::guest {

// Where a directory's files live, with a scratch disk (microvm/scratch_disk.hpp):
// a tmpfs (the guest's RAM), an empty directory of the disk, or the view's
// directory with an overlay whose writes go to the disk (/var/lib: what is
// there stays readable, /var/lib/containers and /var/lib/docker can be made).
inline constexpr char kOnTmpfs[] = "", kOnDiskDir[] = "dir", kOnDiskOverlay[] = "overlay";

struct ScratchDir {
  std::string path;                // absolute, normalised, not "/"
  uint32_t mode = 01777;           // of the tmpfs' root
  std::vector<std::string> carry;  // paths strictly below `path` taken from the view (dirs, files, symlinks)
  std::string disk = kOnTmpfs;     // kOnTmpfs, kOnDiskDir or kOnDiskOverlay
};

// Bounds of the boot frame's list (a plan has three; a policy cannot add more).
inline constexpr size_t kMaxScratchDirs = 32;
inline constexpr size_t kMaxCarried = 1024;

// Absolute, no empty, "." or ".." component, no trailing slash, no NUL, not "/".
inline bool scratch_path_ok(std::string_view p) {
  if (p.size() < 2 || p[0] != '/' || p.back() == '/' || p.find('\0') != std::string_view::npos) return false;
  size_t i = 1;
  while (i <= p.size()) {
    size_t j = p.find('/', i);
    if (j == std::string_view::npos) j = p.size();
    std::string_view c = p.substr(i, j - i);
    if (c.empty() || c == "." || c == "..") return false;
    i = j + 1;
  }
  return true;
}

inline bool strictly_below(std::string_view p, std::string_view dir) {
  return p.size() > dir.size() + 1 && p.substr(0, dir.size()) == dir && p[dir.size()] == '/';
}

inline nlohmann::json scratch_to_json(const std::vector<ScratchDir>& dirs) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& d : dirs) {
    nlohmann::json e = {{"path", d.path}, {"mode", d.mode}, {"carry", d.carry}};
    if (!d.disk.empty()) e["disk"] = d.disk;
    a.push_back(std::move(e));
  }
  return a;
}

// The list from the boot frame's "scratch"; nullopt and `why` (naming the
// entry and field) when anything is missing, unknown, of another type or out
// of bounds: the init then refuses to go on.
inline std::optional<std::vector<ScratchDir>> scratch_from_json(const nlohmann::json& j, std::string* why) {
  auto bad = [&](const std::string& where, const char* what) -> std::optional<std::vector<ScratchDir>> {
    if (why) *why = "scratch" + where + ": " + what;
    return std::nullopt;
  };
  if (!j.is_array()) return bad("", "not an array");
  if (j.size() > kMaxScratchDirs) return bad("", "more than 32 directories");
  std::vector<ScratchDir> out;
  size_t carried = 0;
  for (size_t i = 0; i < j.size(); ++i) {
    const auto& e = j[i];
    const std::string at = "[" + std::to_string(i) + "]";
    if (!e.is_object()) return bad(at, "not an object");
    for (const auto& [k, v] : e.items())
      if (k != "path" && k != "mode" && k != "carry" && k != "disk") return bad(at + "." + k, "unknown field");
    ScratchDir d;
    if (!e.contains("path") || !e["path"].is_string() || !scratch_path_ok(e["path"].get_ref<const std::string&>()))
      return bad(at + ".path", "missing or not a normalised absolute path other than /");
    d.path = e["path"].get<std::string>();
    if (!e.contains("mode") || !e["mode"].is_number_unsigned() || e["mode"].get<uint64_t>() > 07777)
      return bad(at + ".mode", "missing or not a mode from 0 to 07777");
    d.mode = e["mode"].get<uint32_t>();
    if (!e.contains("carry") || !e["carry"].is_array()) return bad(at + ".carry", "missing or not an array");
    for (const auto& c : e["carry"]) {
      if (!c.is_string() || !scratch_path_ok(c.get_ref<const std::string&>()) ||
          !strictly_below(c.get_ref<const std::string&>(), d.path))
        return bad(at + ".carry", "an entry that is not a normalised path below the directory");
      if (++carried > kMaxCarried) return bad(at + ".carry", "more than 1024 paths in all");
      d.carry.push_back(c.get<std::string>());
    }
    if (e.contains("disk")) {
      const auto& k = e["disk"];
      if (!k.is_string() || (k != kOnDiskDir && k != kOnDiskOverlay))
        return bad(at + ".disk", "not \"dir\" or \"overlay\"");
      d.disk = k.get<std::string>();
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace exg::microvm::guest
