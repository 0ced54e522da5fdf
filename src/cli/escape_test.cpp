#include "cli/escape_test.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <climits>
#include <cstring>
#include <fstream>
#include <sstream>

#include <sys/utsname.h>
#include <unistd.h>

#include "evidence/compare.hpp"
#include "evidence/foreign_sandbox.hpp"
#include "evidence/suite.hpp"

namespace exg::cli {

namespace {

bool names_settings(const std::vector<std::string>& prefix) {
  return std::any_of(prefix.begin(), prefix.end(), [](const std::string& a) { return a.find("{settings}") != std::string::npos; });
}

// --sandbox-settings FILE, absolute (each probe's cwd is its own workspace); false with err
// set when it cannot be read.
bool settings_file(const std::string& given, std::string& out, std::string& err) {
  out.clear();
  if (given.empty()) return true;
  char real[PATH_MAX];
  if (!::realpath(given.c_str(), real) || ::access(real, R_OK) != 0) {
    err = "--sandbox-settings " + given + ": " + std::strerror(errno);
    return false;
  }
  out = real;
  return true;
}

// --sandbox: the foreign sandbox's prefix and the probe program into s; -1 to run the
// suite, else the exit status (125: a bad --sandbox; 0: --dry-run printed it).
int foreign_options(const EscapeTestOptions& o, evidence::SuiteOptions& s) {
  if (o.layer != "process" || !o.policy_file.empty() || !o.run_args.empty()) {
    std::fprintf(stderr, "exguardian: escape-test: --sandbox tests another sandbox: --layer, --policy and --run-arg "
                         "are exguardian run's and do not apply\n");
    return 125;
  }
  evidence::ForeignSandbox fs;
  std::string err;
  if (!evidence::parse_foreign_sandbox(o.sandbox, o.sandbox_image, fs, err)) {
    std::fprintf(stderr, "exguardian: escape-test: %s\n", err.c_str());
    return 125;
  }
  if (!o.sandbox_settings.empty() && !names_settings(fs.prefix)) {
    std::fprintf(stderr, "exguardian: escape-test: --sandbox-settings: --sandbox %s reads no settings file (no {settings})\n",
                 o.sandbox.c_str());
    return 125;
  }
  if (!settings_file(o.sandbox_settings, s.sandbox_settings, err)) {
    std::fprintf(stderr, "exguardian: escape-test: %s\n", err.c_str());
    return 125;
  }
  s.sandbox_default_settings = fs.default_settings;
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  std::string why, probe = evidence::probe_program_beside(n > 0 ? std::string(buf, static_cast<size_t>(n)) : "", why);
  if (o.dry_run) {
    std::printf("sandbox: %s (%s)\n", fs.name.c_str(), fs.about.c_str());
    if (fs.prefix.empty())
      std::printf("every probe safe without a sandbox runs as: sh -c COMMAND (no sandbox; the others are not run)\n");
    else std::printf("every probe runs as: %s sh -c COMMAND\n", evidence::shown_command(fs.prefix).c_str());
    std::printf("  {workspace}: the throwaway workspace (the probe's cwd); {home}: the fake HOME with the canaries\n");
    std::printf("  {probe}: %s\n", probe.empty() ? ("MISSING: " + why).c_str() : probe.c_str());
    if (names_settings(fs.prefix)) {
      if (!s.sandbox_settings.empty()) std::printf("  {settings}: %s\n", s.sandbox_settings.c_str());
      else std::printf("  {settings}: the preset's, written in the run's directory:\n%s", fs.default_settings.c_str());
    }
    std::printf("the kernel probes run: %s NAME\n", fs.probe_inside.c_str());
    return probe.empty() ? 125 : 0;
  }
  if (probe.empty()) {
    std::fprintf(stderr, "exguardian: escape-test: --sandbox: %s\n", why.c_str());
    return 125;
  }
  s.sandbox_name = fs.name;
  s.sandbox_prefix = fs.prefix;
  s.probe_program = probe;
  s.probe_inside = fs.probe_inside;
  return -1;
}

std::string self_exe() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

bool save_report(const std::string& path, const std::string& text, const char* what) {
  if (path.empty()) return true;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) {
    std::fprintf(stderr, "exguardian: escape-test: writing the %s report %s: %s\n", what, path.c_str(), std::strerror(errno));
    return false;
  }
  std::printf("%s report: %s\n", what, path.c_str());
  return true;
}

// --compare A,B,...: each column's suite in turn (each its own world, workspace and canaries, so
// one peer's damage is never judged against the next), then one report.
int compare_main(const EscapeTestOptions& o, const evidence::SuiteOptions& base) {
  if (!o.sandbox.empty() || o.dry_run || o.layer == "all") {
    std::fprintf(stderr, "exguardian: escape-test: --compare names every sandbox itself: not with --sandbox, --dry-run "
                         "or --layer all\n");
    return 125;
  }
  std::vector<std::string> names;
  {
    std::istringstream is(o.compare);
    for (std::string n; std::getline(is, n, ',');) {
      n = evidence::preset_name(n);
      std::string known = evidence::kExguardianColumn;
      for (const auto& p : evidence::foreign_presets()) known += ", " + p.name;
      bool preset = std::any_of(evidence::foreign_presets().begin(), evidence::foreign_presets().end(),
                                [&](const auto& p) { return p.name == n; });
      if (n != evidence::kExguardianColumn && !preset) {
        std::fprintf(stderr, "exguardian: escape-test: --compare '%s': '%s' is not a sandbox to compare (%s)\n",
                     o.compare.c_str(), n.c_str(), known.c_str());
        return 125;
      }
      if (std::find(names.begin(), names.end(), n) != names.end()) {
        std::fprintf(stderr, "exguardian: escape-test: --compare '%s': %s is named twice\n", o.compare.c_str(), n.c_str());
        return 125;
      }
      names.push_back(n);
    }
  }
  std::string why, probe = evidence::probe_program_beside(self_exe(), why);
  if (probe.empty()) {
    std::fprintf(stderr, "exguardian: escape-test: --compare: %s\n", why.c_str());
    return 125;
  }
  std::string settings;
  if (!settings_file(o.sandbox_settings, settings, why)) {
    std::fprintf(stderr, "exguardian: escape-test: %s\n", why.c_str());
    return 125;
  }
  if (!settings.empty() && std::none_of(names.begin(), names.end(), [](const std::string& n) {
        return std::any_of(evidence::foreign_presets().begin(), evidence::foreign_presets().end(),
                           [&](const auto& p) { return p.name == n && names_settings(p.prefix); });
      })) {
    std::fprintf(stderr, "exguardian: escape-test: --sandbox-settings: no sandbox of --compare '%s' reads a settings file\n",
                 o.compare.c_str());
    return 125;
  }
  evidence::CompareReport cr;
  cr.all.started.clear();
  cr.all.layer = "compare " + o.compare;
  for (const auto& name : names) {
    evidence::CompareColumn col;
    col.name = name;
    evidence::SuiteOptions s = base;
    if (name == evidence::kExguardianColumn) {
      col.about = "ExGuardian's own " + o.layer + " layer (exguardian run" + (o.layer == "process" ? "" : " --layer " + o.layer) +
                  ", the default policy" + (o.policy_file.empty() ? "" : " or --policy") + ")";
      col.command = "exguardian run --quiet --audit-log FILE [--allow-domain NAME]... -- sh -c COMMAND";
      col.version = evidence::program_version({self_exe(), "--version"});
    } else {
      s.policy_file.clear();
      s.run_args.clear();
      evidence::ForeignSandbox fs;
      std::string err;
      if (!evidence::parse_foreign_sandbox(name, o.sandbox_image, fs, err)) {
        // A peer that is not installed here (or has no image) is said so in its column.
        col.not_run = err;
        cr.columns.push_back(col);
        continue;
      }
      col.about = fs.about;
      col.command = fs.prefix.empty() ? "sh -c COMMAND (no sandbox)" : evidence::shown_command(fs.prefix) + " sh -c COMMAND";
      if (fs.prefix.empty()) {
        struct utsname u{};
        ::uname(&u);
        col.version = std::string("no sandbox; kernel ") + u.release;
      } else {
        col.version = evidence::program_version({fs.prefix.front(), "--version"});
        // (srt prints its version alone)
        if (!col.version.empty() && std::isdigit(static_cast<unsigned char>(col.version.front())))
          col.version = fs.prefix.front() + " " + col.version;
        if (std::find(fs.prefix.begin(), fs.prefix.end(), "runsc") != fs.prefix.end())
          col.version += "; " + evidence::program_version({"runsc", "--version"});
      }
      s.sandbox_name = fs.name;
      s.sandbox_prefix = fs.prefix;
      s.probe_program = probe;
      s.probe_inside = fs.probe_inside;
      if (names_settings(fs.prefix)) {
        s.sandbox_settings = settings;
        s.sandbox_default_settings = fs.default_settings;
        col.about += settings.empty() ? "" : "; settings: " + settings;
      }
    }
    evidence::SuiteReport rep;
    col.status = evidence::run_suite(s, rep);
    col.seconds = rep.seconds;
    if (col.status == 125) {
      cr.tool_failed = true;
      col.not_run = "its suite could not be set up (125)";
    }
    if (cr.all.started.empty()) cr.all.started = rep.started;
    cr.all.exguardian = rep.exguardian;
    cr.all.policy_file = rep.policy_file;
    cr.all.run_args = base.run_args;
    cr.all.world_up = cr.columns.empty() ? rep.world_up : cr.all.world_up && rep.world_up;
    if (!rep.world_up) cr.all.world_why = rep.world_why;
    cr.all.host = rep.host;
    cr.all.seconds += rep.seconds;
    for (const auto& w : rep.warnings) cr.all.warnings.push_back(name + ": " + w);
    for (auto p : rep.probes) {
      if (p.id == "coordinator" && p.verdict == evidence::Verdict::failed) cr.tool_failed = true;
      p.layer = name;
      cr.all.probes.push_back(std::move(p));
    }
    cr.columns.push_back(col);
  }
  evidence::write_compare_text(stdout, cr);
  bool ok = save_report(o.json_file, evidence::compare_json(cr).dump(2) + "\n", "JSON");
  ok = save_report(o.html_file, evidence::render_compare_html(cr), "HTML") && ok;
  int rc = evidence::compare_status(cr);
  return !ok && rc == 0 ? 1 : rc;
}

}  // namespace

int escape_test_main(const EscapeTestOptions& o) {
  evidence::SuiteOptions s;
  s.layer = o.layer;
  s.policy_file = o.policy_file;
  if (!s.policy_file.empty()) {
    // Each probe runs in a throwaway workspace: a relative path would name a
    // file there (every probe failed with "cannot read").
    char real[PATH_MAX];
    if (!::realpath(s.policy_file.c_str(), real)) {
      std::fprintf(stderr, "exguardian: escape-test: --policy %s: %s\n", s.policy_file.c_str(), std::strerror(errno));
      return 125;
    }
    s.policy_file = real;
  }
  s.run_args = o.run_args;
  s.json_file = o.json_file;
  s.html_file = o.html_file;
  s.keep = o.keep;
  s.verbose = o.verbose;
  s.probe_timeout_s = o.probe_timeout_s > 0 ? o.probe_timeout_s : 20;
  s.only = o.only;
  if (o.dry_run && o.sandbox.empty()) {
    std::fprintf(stderr, "exguardian: escape-test: --dry-run needs --sandbox (it prints the foreign sandbox's command)\n");
    return 125;
  }
  if (!o.sandbox_settings.empty() && o.sandbox.empty() && o.compare.empty()) {
    std::fprintf(stderr, "exguardian: escape-test: --sandbox-settings needs --sandbox or --compare\n");
    return 125;
  }
  if (!o.sandbox_image.empty() && o.sandbox.empty() && o.compare.empty()) {
    std::fprintf(stderr, "exguardian: escape-test: --sandbox-image needs --sandbox\n");
    return 125;
  }
  if (!o.compare.empty()) return compare_main(o, s);
  if (!o.sandbox.empty()) {
    if (int rc = foreign_options(o, s); rc >= 0) return rc;
  }
  evidence::SuiteReport report;
  int rc = evidence::run_suite(s, report);
  if (rc == 125) return rc;
  evidence::write_text(stdout, report);
  bool ok = save_report(o.json_file, evidence::to_json(report).dump(2) + "\n", "JSON");
  ok = save_report(o.html_file, evidence::render_html(report), "HTML") && ok;
  if (!ok && rc == 0) rc = 1;
  return rc;
}

}  // namespace exg::cli
