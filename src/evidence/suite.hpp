// `exguardian escape-test`: the sandbox attacks itself, checks from the other
// side, and keeps the evidence. Data types shared by the suite, the probe
// catalogue and the reports.
#pragma once
#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

namespace exg::evidence {

// held: the attack was refused (or ordinary work worked) and the other side agrees;
// escaped: an attack got through; failed: the expected outcome was not observed
// but nothing got out (ordinary work broken, a refusal missing from the audit log);
// skipped: not run, with why.
enum class Verdict { held, escaped, failed, skipped };
const char* verdict_name(Verdict v);

struct SuiteOptions {
  std::string layer = "process";      // process | container | gvisor | all (every layer present)
  std::string policy_file;            // passed to every `exguardian run` as --policy
  std::vector<std::string> run_args;  // passed to every `exguardian run` (to weaken it in tests)
  std::string json_file, html_file;
  bool keep = false;                  // keep the workspace, fake HOME and logs
  bool verbose = false;               // one line per probe while running
  int probe_timeout_s = 20;
  // Run only these probes (and sandbox-in-place, which the destructive ones
  // need); empty: all. An id the catalogue does not have is an error.
  std::vector<std::string> only;
  // --sandbox: every probe runs as SANDBOX_PREFIX sh -c COMMAND instead of in exguardian run
  // (evidence/foreign_sandbox.hpp); empty: ExGuardian's own layers.
  std::string sandbox_name;
  std::vector<std::string> sandbox_prefix;  // with {workspace}, {home}, {probe} placeholders
  std::string probe_program, probe_inside;  // exguardian-probe on the host; its path inside (placeholders)
  // {settings}: the foreign sandbox's settings file (--sandbox-settings, absolute), or ""
  // for the preset's default_settings, written in the run's directory.
  std::string sandbox_settings, sandbox_default_settings;
};

struct ProbeResult {
  std::string layer = "process";  // the layer the probe ran against
  std::string id, category, command, expectation;
  bool required = true;
  Verdict verdict = Verdict::skipped;
  std::string evidence;             // one line
  int exit_status = -1;             // -1: not run
  bool timed_out = false;
  std::vector<std::string> output;  // first lines of stdout+stderr
  std::vector<std::string> run_args;  // the probe's own extra `exguardian run` args
  double seconds = 0;               // a batched probe: its batch's time over its size
  int shared_with = 0;              // batched: how many other probes ran in its sandbox
};

struct SuiteReport {
  std::string started, exguardian, layer, policy_file;
  std::vector<std::string> run_args;
  std::vector<std::string> warnings;  // loud: weakened sandbox, world not built, ...
  bool world_up = false;
  std::string world_why;
  std::string workspace, home;        // (removed unless --keep)
  std::vector<ProbeResult> probes;
  nlohmann::json host;                // host identity, user, capabilities (doctor)
  double seconds = 0;

  int count(Verdict v) const;
  bool passed() const;  // nothing escaped or failed, no required probe skipped
  std::string summary_line() const;
  std::vector<std::string> layers() const;  // the layers of the probes, in run order
  // The same line for one layer's probes only.
  std::string summary_line(const std::string& layer) const;
};

// The layers escape-test runs for `--layer all`: process, then container when
// crun or runc is installed, then gvisor when runsc is; the others with why not.
struct LayerPresence {
  std::string name;
  bool present = false;  // run by --layer all
  bool installed = false;  // here and usable by name (microvm: installed, yet left out of all)
  std::string why;  // when not present
};
std::vector<LayerPresence> layers_present();

nlohmann::json to_json(const ProbeResult& r);
ProbeResult probe_result_from_json(const nlohmann::json& j);
nlohmann::json to_json(const SuiteReport& r);

// Text for an HTML page: & < > " as entities, control characters but newline and tab as '?'.
std::string html_escape(const std::string& s);

void write_text(std::FILE* out, const SuiteReport& r);
// What a caller may put around the report's page (--compare): its own banner, and a section
// of its own after the warnings. Null: the suite's own banner.
struct HtmlFrame {
  bool ok = true;
  std::string big, line;  // the banner's two lines
  std::string section;    // HTML, inserted after the warnings
};
std::string render_html(const SuiteReport& r, const HtmlFrame* frame = nullptr);

// Runs the whole suite; fills `report`. Returns the exit status (0 only when
// nothing escaped and no required probe was skipped or failed).
int run_suite(const SuiteOptions& opts, SuiteReport& report);

}  // namespace exg::evidence
