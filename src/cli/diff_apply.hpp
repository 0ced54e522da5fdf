// exguardian diff DIR / exguardian apply DIR: review and apply an overlay upper
// layer kept by `exguardian run --workspace-mode overlay --keep DIR`.
// DIR holds upper/, work/ and workspace (a text file: the workspace path); an
// optional DIR/protect lists extra protected names, one a line (the policy's
// filesystem.protect at run time). apply quarantines into DIR/quarantine.
#pragma once
#include <string>

namespace exg::cli {

// Prints what apply would do, one line each; exit 0, 125 for bad input.
int diff_main(const std::string& dir);
// Applies DIR/upper to the workspace named in DIR/workspace and prints the same
// lines; exit 0, 1 when protected names were quarantined instead of applied,
// 125 for bad input or a failed apply.
int apply_main(const std::string& dir, const std::string& workspace = {});

}  // namespace exg::cli
