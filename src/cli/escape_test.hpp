// `exguardian escape-test`: parsing lives in main.cpp (CLI11); this runs the
// suite and writes the reports.
#pragma once
#include <string>
#include <vector>

namespace exg::cli {

struct EscapeTestOptions {
  std::string layer = "process";      // process | container | gvisor | all
  std::string policy_file;            // --policy FILE
  std::string json_file, html_file;   // --json FILE, --html FILE
  std::vector<std::string> run_args;  // --run-arg ARG (repeatable): passed to every `exguardian run`
  bool keep = false;                  // --keep: keep the workspace, fake HOME and logs
  bool verbose = false;               // -v: one line per probe as it runs
  int probe_timeout_s = 20;           // --probe-timeout SECONDS
  std::vector<std::string> only;      // --only ID (repeatable): run just these probes
  std::string sandbox;                // --sandbox PRESET|PREFIX: a foreign sandbox (evidence/foreign_sandbox.hpp)
  std::string sandbox_image;          // --sandbox-image IMAGE
  std::string sandbox_settings;       // --sandbox-settings FILE: {settings} (srt's settings file)
  bool dry_run = false;               // --dry-run: print what each probe runs as, run nothing
  std::string compare;                // --compare A,B,...: exguardian and presets side by side (evidence/compare.hpp)
};

// 0 only when nothing escaped or failed and no required probe was skipped;
// 1 otherwise; 125 when the suite could not be set up. --compare: 0 unless ExGuardian's own
// column has an escape (or a failure) or the tool failed; a peer's escape is a finding.
int escape_test_main(const EscapeTestOptions& opts);

}  // namespace exg::cli
