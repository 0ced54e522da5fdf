// Reading and writing cgroup files, and parsing the values they hold: what
// the sandbox's cgroup (cgroup.cpp), its layout, freezer and usage share.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace exg::cgroup {

// The whole file, or nullopt when it cannot be opened.
std::optional<std::string> read_text(const std::string& path);
// One write of value: 0 or errno.
int write_text(const std::string& path, std::string_view value);
// The same for `name` in the directory open at dirfd (openat: no walk of the
// directory's path again; a sandbox's cgroup holds its directory open).
std::optional<std::string> read_text_at(int dirfd, const char* name);
int write_text_at(int dirfd, const char* name, std::string_view value);

// Blank-separated words (cgroup.controllers, cgroup.subtree_control, cgroup.procs).
std::vector<std::string> words(std::string_view s);
bool contains(const std::vector<std::string>& v, std::string_view x);
// The directory above p ("/" at the top).
std::string parent_dir(const std::string& p);

// Parsing helpers (pure; unit tested).
// "key value\n" lines (memory.events, pids.events, memory.oom_control, cpu.stat, memory.stat).
std::optional<uint64_t> parse_keyed(std::string_view text, std::string_view key);
// A single number or "max" (returns UINT64_MAX for "max").
std::optional<uint64_t> parse_number(std::string_view text);

}  // namespace exg::cgroup
