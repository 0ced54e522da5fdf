// ExGuardian's seccomp rules (walls/seccomp_rules.hpp) as OCI linux.seccomp.
//
// Architectures: only SCMP_ARCH_X86_64 is listed, so libseccomp (crun, runc,
// docker, podman) kills i386 (int $0x80) calls as a bad architecture, and
// filters that list x86_64 without x32 also treat x32 numbers
// (nr | 0x40000000) as a bad architecture. The profile cannot name that rule
// itself (a syscall number is not a rule target in OCI); the integration test
// checks the result on each runtime. runsc has no i386/x32 entry points.
#include <cerrno>
#include <map>

#include "oci/spec.hpp"
#include "walls/seccomp_rules.hpp"

namespace exg::oci {

namespace rules = walls::seccomp_rules;

nlohmann::json seccomp_profile(const std::string& listener_path, Runtime runtime) {
  using nlohmann::json;
  const bool notify = !listener_path.empty();
  json syscalls = json::array();
  std::map<std::string, size_t> entry_of;  // a rule without its names -> its entry
  for (const auto& r : rules::expanded_rules()) {
    if (runtime == Runtime::Runsc && std::string(r.syscall) == "clone3") continue;
    // Rules that differ only in the syscall share an entry. The key is what
    // the entry holds but its names (written out by hand: building and
    // dumping a JSON object per rule was most of this function's time, ~1 ms
    // of every container and gVisor start).
    const bool notified = notify && r.notify;
    std::string key = notified ? "N" : "E" + std::to_string(r.errno_value);
    for (const auto& c : r.cmps)
      key += "|" + std::to_string(c.arg) + "," + std::to_string(c.mask) + "," + std::to_string(c.value);
    auto [it, fresh] = entry_of.emplace(std::move(key), syscalls.size());
    if (!fresh) {
      syscalls[it->second]["names"].push_back(r.syscall);
      continue;
    }
    json rule;
    rule["names"] = json::array({r.syscall});
    if (notified) {
      rule["action"] = "SCMP_ACT_NOTIFY";  // the supervisor answers with refused_errno() and logs it
    } else {
      rule["action"] = "SCMP_ACT_ERRNO";
      rule["errnoRet"] = r.errno_value;
    }
    if (!r.cmps.empty()) {
      json args = json::array();
      // OCI's SCMP_CMP_MASKED_EQ: value is the mask, valueTwo the datum.
      for (const auto& c : r.cmps)
        args.push_back({{"index", c.arg}, {"value", c.mask}, {"valueTwo", c.value}, {"op", "SCMP_CMP_MASKED_EQ"}});
      rule["args"] = args;
    }
    // Rules that differ only in the syscall share one entry (keyed by the rest:
    // comparing json copies pairwise cost ~60 ms per run).
    syscalls.push_back(std::move(rule));
  }
  if (runtime == Runtime::Runsc) {
    // gVisor (20221219) does not shield a pid namespace's init from its own
    // processes' SIGKILL/SIGSTOP as Linux does: `kill -9 1` from inside would
    // end a session. Signals addressed to pid 1 (the agent, or exguardian-init)
    // from inside are refused here instead (EPERM, as Linux's "cannot kill
    // init" rule looks to a sender that is not privileged); the supervisor's
    // signals come through `runsc kill`, from outside the sandbox's kernel.
    // (kill(-1) never reaches init in gVisor either.)
    for (const char* name : {"kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"})
      syscalls.push_back({{"names", json::array({name})},
                          {"action", "SCMP_ACT_ERRNO"},
                          {"errnoRet", EPERM},
                          {"args", json::array({{{"index", 0}, {"value", 0xffffffffu}, {"valueTwo", 1}, {"op", "SCMP_CMP_MASKED_EQ"}}})}});
  }
  if (notify) {
    // Judged, not refused (rules::judged_syscalls(): connect, sendto with a
    // destination, and sendmsg/sendmmsg, whose destination lies behind a
    // pointer the filter cannot read): the supervisor performs them itself once it has judged
    // the address (sandbox/socket_address_gate.hpp).
    syscalls.push_back({{"names", json::array({"connect", "sendmsg", "sendmmsg"})}, {"action", "SCMP_ACT_NOTIFY"}});
    syscalls.push_back({{"names", json::array({"sendto"})},
                        {"action", "SCMP_ACT_NOTIFY"},
                        {"args", json::array({{{"index", 4}, {"value", 0}, {"op", "SCMP_CMP_NE"}}})}});
  }
  json p = {{"defaultAction", "SCMP_ACT_ALLOW"}, {"architectures", {"SCMP_ARCH_X86_64"}}, {"syscalls", syscalls}};
  if (notify) p["listenerPath"] = listener_path;
  return p;
}

}  // namespace exg::oci
