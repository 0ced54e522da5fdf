#include "init/walls_exec.hpp"

#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "microvm/guest/walls_apply.hpp"

namespace exg::init {

namespace {
int refuse(const std::string& what) {
  std::fprintf(stderr, "exguardian-init: %s\n", what.c_str());
  return 125;
}
}  // namespace

int exec_with_walls(const char* walls_json, char** argv) {
  auto j = nlohmann::json::parse(walls_json, nullptr, false);
  if (j.is_discarded()) return refuse("--walls: not JSON");
  std::string why;
  auto walls = microvm::guest::walls_from_json(j, &why);
  if (!walls) return refuse("--walls: " + why);
  // Landlock and an unprivileged seccomp filter both need it; the runtime
  // sets it too (noNewPrivileges), this holds without that.
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return refuse(std::string("no_new_privs: ") + std::strerror(errno));
  microvm::guest::WallReport report;
  if (auto err = microvm::guest::apply_walls(*walls, report); !err.empty()) return refuse(err);
  ::execvp(argv[0], argv);
  int err = errno;
  std::fprintf(stderr, "exguardian-init: exec %s: %s\n", argv[0], std::strerror(err));
  return err == ENOENT ? 127 : 126;
}

}  // namespace exg::init
