#include "oci/kill_coalescer.hpp"

namespace exg::oci {

bool KillCoalescer::want(int sig) {
  if (!running_.contains(sig)) return true;
  again_.insert(sig);
  return false;
}

void KillCoalescer::started(int sig, pid_t kill_process) { running_[sig] = kill_process; }

int KillCoalescer::ended(pid_t kill_process) {
  for (auto it = running_.begin(); it != running_.end(); ++it) {
    if (it->second != kill_process) continue;
    int sig = it->first;
    running_.erase(it);
    return again_.erase(sig) ? sig : 0;
  }
  return 0;
}

std::vector<pid_t> KillCoalescer::running() const {
  std::vector<pid_t> out;
  for (const auto& [sig, pid] : running_) out.push_back(pid);
  return out;
}

}  // namespace exg::oci
