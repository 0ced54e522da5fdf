// `exguardian escape-test --sandbox SPEC`: the same probes, in the same world, run
// inside a sandbox that is not ExGuardian's (bubblewrap, podman, or any command
// prefix), each as `PREFIX sh -c COMMAND`, and judged from the host side as today.
// What needs ExGuardian's own machinery (its audit lines, its proxy, its run
// options) says "not applicable" and why; it is never counted as held.
//
// SPEC is a preset name (foreign_presets()) or a command prefix, split like a
// shell line (single and double quotes, backslash). Placeholders, in the preset's
// or the user's arguments, are replaced for every probe:
//   {workspace}  the throwaway workspace (host path; the probe's cwd)
//   {home}       the fake HOME with its canaries (host path)
//   {probe}      exguardian-probe, the static probe program beside exguardian (host path)
//   {image}      --sandbox-image (presets that run an image)
//   {settings}   --sandbox-settings FILE, the sandbox's own settings file (srt's); without it the
//                preset's default_settings, written in the run's directory (outside the workspace)
#pragma once
#include <string>
#include <vector>

#include "evidence/catalog.hpp"

namespace exg::evidence {

struct ForeignSandbox {
  std::string name;                 // the preset's name, or "custom"
  std::vector<std::string> prefix;  // argv before `sh -c COMMAND`, with placeholders
  std::string probe_inside;         // where exguardian-probe is inside (may hold placeholders)
  std::string about;                // one line: what the preset models
  std::string default_settings;     // {settings} when --sandbox-settings is not given ("": none)
};

struct ForeignPreset {
  std::string name, about;
  std::vector<std::string> prefix;
  std::string probe_inside;
  bool needs_image = false;
  std::string default_settings;  // the settings file its users write, for the test world
};
const std::vector<ForeignPreset>& foreign_presets();

// A preset's name for what users call it: "runsc" is gVisor as its users run it, under an
// engine (podman-runsc); runsc alone runs an OCI bundle, not `runsc COMMAND`. Other names as given.
std::string preset_name(const std::string& name);

// SPEC -> the sandbox; false with err set (one line naming SPEC) when it is neither a
// preset nor a prefix whose program can be found, or when a preset needs an image and
// none was given. image: --sandbox-image ("" = the preset's default, when it has one).
bool parse_foreign_sandbox(const std::string& spec, const std::string& image, ForeignSandbox& out, std::string& err);

// Splits a command line as sh would split plain words and quotes (no expansions).
// false with err set on an unterminated quote.
bool split_command_line(const std::string& line, std::vector<std::string>& out, std::string& err);

struct ForeignPlaces {
  std::string workspace, home, probe, settings;
};
// Every placeholder replaced, in every argument.
std::string expand_placeholders(const std::string& s, const ForeignPlaces& at);
std::vector<std::string> expand_placeholders(const std::vector<std::string>& v, const ForeignPlaces& at);

// exguardian-probe beside the running exguardian; "" with why set when it is not there.
std::string probe_program_beside(const std::string& exe, std::string& why);

// The prefix as one line a user can read (each argument quoted where needed).
std::string shown_command(const std::vector<std::string>& argv);

// Every probe of the catalogue adapted to a foreign sandbox: the kernel probes run
// probe_inside (exguardian-probe), the judges that read ExGuardian's audit log or
// proxy judge what the host can see instead, and what only ExGuardian's machinery
// can answer is skipped as "not applicable: WHY" (not required). c must outlive v.
// no_sandbox (--sandbox none): what is not safe without a sandbox is not run (kUnsafeWithoutSandbox),
// and sandbox-in-place says there is none (not applicable) instead of gating the rest.
void adapt_for_foreign(std::vector<ProbeSpec>& v, const Context& c, const std::string& probe_inside,
                       bool no_sandbox = false);

// The members of each batch moved up to where its first member is, in their order (the others
// keep theirs): a foreign sandbox keeps no sweep and its judges compare the host's files from the
// previous probe's on, so a batch's probes are judged one after the other, right after its
// sandbox, before any probe outside it writes.
void group_batches(std::vector<ProbeSpec>& v);

// A kernel probe's answer that says the kernel took the call and failed it only on the probe's
// harmless arguments ("failed: E..." other than EPERM, EACCES or ENOSYS): no refusal of anything.
bool failed_only_on_arguments(const std::string& answer);

// The evidence of every not-applicable probe starts with this.
inline constexpr const char* kNotApplicable = "not applicable: ";
// --sandbox none (no sandbox at all): only the probes safe without one run
// (ProbeSpec::without_sandbox); the others' evidence starts with this.
inline constexpr const char* kNoSandbox = "none";
inline constexpr const char* kUnsafeWithoutSandbox = "not run: unsafe without a sandbox: ";

}  // namespace exg::evidence
