// Path helpers for plan compilation: ~ and relative resolution, canonical
// paths, glob expansion (*, ?, [..], ** as a whole component).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "policy/policy.hpp"

namespace exg::plan {

// "~" and "~/x" -> home; relative -> base_dir/x; then lexically normalised.
std::string expand_path(const std::string& path, const std::string& home,
                        const std::string& base_dir);

// realpath(3), or nothing when the path does not exist.
std::optional<std::string> canonical(const std::string& path);

// True when `path` equals `dir` or lies below it (both canonical).
bool is_within(const std::string& path, const std::string& dir);

bool has_glob(const std::string& s);

// Every existing canonical path an entry names: one for a plain or literal
// path that exists, zero or more for a glob.
std::vector<std::string> resolve_entry(const policy::PathEntry& e, const std::string& home);

}  // namespace exg::plan
