#include "cli/escape_test.hpp"

#include <cstdio>
#include <cstring>
#include <fstream>

#include "evidence/suite.hpp"

namespace exg::cli {

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
