// exguardian-init: `exguardian oci-init` as a small static binary, pid 1 in a
// container or gVisor sandbox. The same code (cli/oci_init.cpp); on its own it
// starts in a fraction of the time the full exguardian binary needs, which
// counts inside gVisor (every syscall of the dynamic loader is a trap there).
// Usage: exguardian-init -- COMMAND [ARGS...]
#include <cstdio>
#include <cstring>

#include "cli/oci_init.hpp"

int main(int argc, char** argv) {
  if (argc < 3 || std::strcmp(argv[1], "--") != 0) {
    std::fprintf(stderr, "usage: exguardian-init -- COMMAND [ARGS...]\n");
    return 125;
  }
  return exg::cli::oci_init_main(argc - 2, argv + 2);
}
