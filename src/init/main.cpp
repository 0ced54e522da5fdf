// exguardian-init: `exguardian oci-init` as a small static binary, pid 1 in a
// container or gVisor sandbox. The same code (init/oci_init.cpp); on its own it
// starts in a fraction of the time the full exguardian binary needs, which
// counts inside gVisor (every syscall of the dynamic loader is a trap there).
// Usage: exguardian-init [--seccomp] [--fresh-signals] -- COMMAND [ARGS...]
//        exguardian-init [--seccomp] [--fresh-signals] --agent FD   (pid 1 of a session: agent/agent.hpp)
//        exguardian-init --walls JSON -- COMMAND [ARGS...]  (exguardian runtime: init/walls_exec.hpp)
// --seccomp: install the sandbox's filter first (init/sandbox_seccomp.hpp).
// --fresh-signals: every disposition is already the default (init/oci_init.hpp).
#include <cstdio>
#include <cstring>

#include "init/oci_init.hpp"
#include "init/sandbox_seccomp.hpp"
#include "init/walls_exec.hpp"

int main(int argc, char** argv) {
  if (argc > 4 && std::strcmp(argv[1], "--walls") == 0 && std::strcmp(argv[3], "--") == 0)
    return exg::init::exec_with_walls(argv[2], argv + 4);
  // Leading options, each at most once, in this order.
  int k = 1;
  if (k < argc && std::strcmp(argv[k], "--seccomp") == 0) {
    if (auto err = exg::init::install_sandbox_seccomp(); !err.empty()) {
      std::fprintf(stderr, "exguardian-init: --seccomp: %s (nothing ran)\n", err.c_str());
      return 125;
    }
    ++k;
  }
  bool fresh_signals = k < argc && std::strcmp(argv[k], "--fresh-signals") == 0;
  if (fresh_signals) ++k;
  if (argc - k == 2 && std::strcmp(argv[k], "--agent") == 0)
    return exg::init::oci_init_main(2, argv + k, fresh_signals);
  if (argc - k < 2 || std::strcmp(argv[k], "--") != 0) {
    std::fprintf(stderr,
                 "usage: exguardian-init [--seccomp] [--fresh-signals] -- COMMAND [ARGS...] | "
                 "exguardian-init [--seccomp] [--fresh-signals] --agent FD | "
                 "exguardian-init --walls JSON -- COMMAND [ARGS...]\n");
    return 125;
  }
  return exg::init::oci_init_main(argc - k - 1, argv + k + 1, fresh_signals);
}
