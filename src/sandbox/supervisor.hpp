// The supervisor: one host process, one event loop. Launches the sandbox,
// relays its pty, forwards signals, enforces the wall-clock timeout and turns
// the outcome into ExGuardian's exit status (DESIGN.md §1).
#pragma once
#include "oci/layer.hpp"
#include "plan/plan.hpp"
#include "util/error.hpp"

namespace exg::sandbox {

struct SuperviseOptions {
  bool verbose = false;
  std::string audit_log;  // JSON lines; empty: no log
  const oci::LayerOptions* oci = nullptr;  // container/gvisor layer; null: the process layer
};

// The exit status to return: the command's own, 128+N, 124 on timeout. An
// error means nothing ran (the caller exits 125).
Result<int> supervise(const plan::Plan& plan, const SuperviseOptions& opt);

// "2s", "1m30s", "250ms": for messages.
std::string format_duration(std::chrono::milliseconds d);

}  // namespace exg::sandbox
