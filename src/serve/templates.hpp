// Templates (the --templates file): what a sandbox of a given templateID is.
// A name maps to a layer, a root filesystem, an ExGuardian policy file and
// resources; `base` exists without a file and is `exguardian run`'s default
// (process layer, the host's root read-only, no network, default limits).
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "util/error.hpp"

namespace exg::serve {

// The code interpreter's template as E2B names it (the SDK's default).
inline constexpr char kCodeInterpreterTemplate[] = "code-interpreter-v1";

struct Template {
  std::string name;
  std::string layer = "process";    // process | container | gvisor
  std::string rootfs;               // container/gvisor; empty: the host's, read-only
  std::string policy;               // an ExGuardian policy file; empty: the defaults
  std::vector<std::string> allow_domains;
  uint64_t memory_mb = 512;
  double cpus = 1;
  int pids = 256;
  // gvisor only: the sandbox's one user is uid 0 of gVisor's own kernel (no
  // capabilities; --gvisor-root), so E2B's `root` is served (and `user` runs as it too).
  bool allow_root = false;
  // E2B's code interpreter (@e2b/code-interpreter): an interpreter server is
  // started inside each sandbox of it, on port 49999 of the sandbox's own
  // network namespace (serve/code_interpreter.hpp).
  bool code_interpreter = false;
};

class Templates {
 public:
  Templates();  // only `base` and `code-interpreter-v1` (base with the code interpreter)
  // {"templates": {"name": {"layer": "process", "rootfs": DIR, "policy": FILE, "allowDomains": [...],
  //                          "memoryMB": 512, "cpus": 1, "pids": 256, "allowRoot": false,
  //                          "codeInterpreter": false}}}
  // load() also reads each template's policy file: one that does not load, or
  // that lets host Unix sockets through on a layer that cannot carry one
  // (gVisor, the microVM), stops the server at its start, naming the template,
  // instead of failing every create of it.
  static Result<Templates> load(const std::string& file);
  static Result<Templates> parse(const std::string& text, const std::string& where);
  const Template* find(const std::string& name) const;
  const std::map<std::string, Template>& all() const { return by_name_; }

 private:
  std::map<std::string, Template> by_name_;
};

}  // namespace exg::serve
