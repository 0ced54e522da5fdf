// exguardian-probe: `exguardian probe` on its own, linked statically, so that the
// escape test can run its kernel probes inside a foreign sandbox (bubblewrap,
// podman, ...) that has none of ExGuardian's libraries, or no libc at all.
//
//   exguardian-probe NAME [--tag T] [--scratch DIR]   one probe (exit 0 as expected, 1 not, 2 unknown);
//                                      DIR: where its scratch directory goes (default /tmp)
//   exguardian-probe --list            the probes' names
//
// The same code as `exguardian probe` (src/probe/probe_main.cpp, src/probe/probes.cpp).
#include <cstdio>
#include <cstring>
#include <string>

#include "probe/probe_main.hpp"
#include "probe/probes.hpp"

int main(int argc, char** argv) {
  std::string name, tag;
  bool list = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--list") == 0) {
      list = true;
    } else if (std::strcmp(argv[i], "--tag") == 0 && i + 1 < argc) {
      tag = argv[++i];
    } else if (std::strcmp(argv[i], "--scratch") == 0 && i + 1 < argc) {
      exg::probe::set_scratch_parent(argv[++i]);
    } else if (argv[i][0] != '-' && name.empty()) {
      name = argv[i];
    } else {
      std::fprintf(stderr, "exguardian-probe: %s: unexpected argument (usage: exguardian-probe NAME [--tag T] [--scratch DIR] | --list)\n", argv[i]);
      return 2;
    }
  }
  return exg::probe::probe_main(name, list, tag);
}
