// `exguardian escape-test --compare A,B,...`: the same probes against several sandboxes in one
// run (ExGuardian's own process layer and foreign presets, evidence/foreign_sandbox.hpp), read
// as one matrix: a row per probe, a column per sandbox, each cell a state with its evidence.
// A peer's escape is a finding about the peer; only ExGuardian's own column (or the tool
// failing) makes the run fail.
#pragma once
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "evidence/suite.hpp"

namespace exg::evidence {

// The name of ExGuardian's own column (its default layer, process) in --compare.
inline constexpr const char* kExguardianColumn = "exguardian";

struct CompareColumn {
  std::string name;     // exguardian, or a preset's name
  std::string about;    // what it is, one line
  std::string command;  // what every probe ran as
  std::string version;  // the sandbox's own --version (first line), or the kernel for none
  std::string not_run;  // set: the column was not run (its program missing, ...), why
  int status = 0;       // its suite's exit status
  double seconds = 0;   // its suite's wall time (where a comparison's time goes)
};

struct CompareReport {
  SuiteReport all;  // every column's probes, each ProbeResult::layer the column's name
  std::vector<CompareColumn> columns;
  bool tool_failed = false;  // a column's suite could not run (125) or its coordinator died
};

// A cell's state: "held", "ESCAPED", "FAILED", "not applicable" (evidence "not applicable: ...")
// or "not run" (any other skip: unsafe without a sandbox, a tool missing on the host, ...).
std::string cell_state(const ProbeResult& p);

// 0: ExGuardian's column (when there is one) held and the tool ran; 1: an escape, failure or
// required skip in ExGuardian's column, or the tool failed; peers' escapes do not count.
int compare_status(const CompareReport& r);

nlohmann::json compare_json(const CompareReport& r);
void write_compare_text(std::FILE* out, const CompareReport& r);
std::string render_compare_html(const CompareReport& r);

// The first line of `argv --version` (its stdout and stderr), "" when it does not run.
std::string program_version(const std::vector<std::string>& argv);

}  // namespace exg::evidence
