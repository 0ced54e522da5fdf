// `exguardian probe NAME`: one attack (or one piece of ordinary work) tried
// from inside a sandbox, so escape tests need no compiler on the target.
#include <cstdio>
#include <string>

#include "cli/subcommands.hpp"
#include "sandbox/probes.hpp"

namespace exg::cli {

int probe_main(const std::string& name, bool list) {
  if (list || name.empty()) {
    for (const auto& n : sandbox::probe_names())
      std::printf("%s%s\n", n.c_str(), sandbox::probe_expects_success(n) ? "  (must succeed)" : "");
    return list ? 0 : 2;
  }
  std::string out;
  int r = sandbox::run_probe(name, out);
  if (r == 2) {
    std::fprintf(stderr, "exguardian: probe %s: unknown probe (see exguardian probe --list)\n", name.c_str());
    return 2;
  }
  std::printf("%s: %s: %s\n", name.c_str(), r == 0 ? "as expected" : "NOT AS EXPECTED", out.c_str());
  return r;
}

}  // namespace exg::cli
