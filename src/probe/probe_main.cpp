// `exguardian probe NAME`: one attack (or one piece of ordinary work) tried
// from inside a sandbox, so escape tests need no compiler on the target.
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "probe/probe_main.hpp"
#include "probe/probes.hpp"

namespace exg::probe {

int probe_main(const std::string& name, bool list, const std::string& tag) {
  if (list || name.empty()) {
    for (const auto& n : probe_names())
      std::printf("%s%s\n", n.c_str(), probe_expects_success(n) ? "  (must succeed)" : "");
    return list ? 0 : 2;
  }
  if (!tag.empty()) {
    // escape-test runs many probes in one sandbox: the tag, as the process name
    // (comm), is what the supervisor's audit lines name, so each refusal is
    // credited to its probe; the alarm keeps one hung probe from holding the rest.
    if (tag.size() > 15 || ::prctl(PR_SET_NAME, tag.c_str()) != 0) {
      std::fprintf(stderr, "exguardian: probe --tag %s: not a process name (at most 15 characters)\n", tag.c_str());
      return 2;
    }
    ::alarm(10);
  }
  std::string out;
  int r = run_probe(name, out);
  if (r == 2) {
    std::fprintf(stderr, "exguardian: probe %s: unknown probe (see exguardian probe --list)\n", name.c_str());
    return 2;
  }
  std::printf("%s: %s: %s\n", name.c_str(), r == 0 ? "as expected" : "NOT AS EXPECTED", out.c_str());
  return r;
}

}  // namespace exg::probe
