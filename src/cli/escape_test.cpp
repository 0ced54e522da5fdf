#include "cli/escape_test.hpp"

#include <cstdio>
#include <cstring>
#include <fstream>

#include <unistd.h>

#include "evidence/foreign_sandbox.hpp"
#include "evidence/suite.hpp"

namespace exg::cli {

namespace {

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

}  // namespace

int escape_test_main(const EscapeTestOptions& o) {
  evidence::SuiteOptions s;
  s.layer = o.layer;
  s.policy_file = o.policy_file;
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
  if (!o.sandbox_image.empty() && o.sandbox.empty()) {
    std::fprintf(stderr, "exguardian: escape-test: --sandbox-image needs --sandbox\n");
    return 125;
  }
  if (!o.sandbox.empty()) {
    if (int rc = foreign_options(o, s); rc >= 0) return rc;
  }
  evidence::SuiteReport report;
  int rc = evidence::run_suite(s, report);
  if (rc == 125) return rc;
  evidence::write_text(stdout, report);
  auto save = [&](const std::string& path, const std::string& text, const char* what) {
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
  };
  bool ok = save(o.json_file, evidence::to_json(report).dump(2) + "\n", "JSON");
  ok = save(o.html_file, evidence::render_html(report), "HTML") && ok;
  if (!ok && rc == 0) rc = 1;
  return rc;
}

}  // namespace exg::cli
