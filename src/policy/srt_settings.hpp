// srt's settings files read with srt's meaning (issue 40). srt resolves a
// relative path against the working directory (process.cwd()); ExGuardian's
// own files resolve theirs against the file's directory. Which rule a file
// gets: ~/.srt-settings.json and --settings are srt's; a --policy file is srt's
// when every key in it is srt's (is_srt_settings); ExGuardian's own places
// (~/.config/exguardian/policy.json, .exguardian.json) keep their rule.
#pragma once
#include <string>
#include <string_view>

#include "policy/policy.hpp"

namespace exg::policy {

enum class RelativeTo {
  File,              // the file's directory (ExGuardian's own files)
  WorkingDirectory,  // the working directory: srt's rule (~/.srt-settings.json, --settings)
  ByShape,           // srt's rule when every key is srt's (is_srt_settings), else the file's directory
};

// load_policy_file(path) with relative paths per `rule`; `cwd` is the
// (absolute) working directory for srt's rule. A file read with srt's rule
// gets a note saying so (--dry-run, -v).
PResult<Policy> load_policy_file(const std::string& path, RelativeTo rule, const std::string& cwd);

// True when `text` is a JSON object every key of which is a key of srt
// 0.0.83's settings schema (srt_shape.cpp): a file srt itself could be given.
bool is_srt_settings(std::string_view text);

}  // namespace exg::policy
