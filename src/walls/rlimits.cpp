#include "walls/rlimits.hpp"

#include <cerrno>

namespace exg::walls {

RlimitPlan default_rlimits(bool memory_limited) {
  RlimitPlan p;
  struct rlimit cur{};
  rlim_t hard = RLIM_INFINITY;
  if (::getrlimit(RLIMIT_NOFILE, &cur) == 0) hard = cur.rlim_max;
  p.nofile = (hard == RLIM_INFINITY || hard > 65536) ? 65536 : hard;
  p.note = memory_limited
               ? "no file size limit: /tmp is a tmpfs charged to the memory cgroup, which bounds it"
               : "no file size limit and no memory limit: /tmp is unbounded";
  return p;
}

int apply_rlimits(const RlimitPlan& p) {
  if (p.set_core) {
    struct rlimit r{p.core, p.core};
    if (::setrlimit(RLIMIT_CORE, &r) != 0) return -errno;
  }
  if (p.set_nofile) {
    struct rlimit r{p.nofile, p.nofile};
    if (::setrlimit(RLIMIT_NOFILE, &r) != 0) return -errno;
  }
  if (p.set_fsize) {
    struct rlimit r{p.fsize, p.fsize};
    if (::setrlimit(RLIMIT_FSIZE, &r) != 0) return -errno;
  }
  return 0;
}

}  // namespace exg::walls
