// Whether KVM runs a guest here, proved by a real boot, not the device node:
// a nested host's /dev/kvm may open and answer its API version yet run no
// ordinary guest kernel (this project's CI: a PVM host; the guest never
// reaches user space). doctor boots the guest image under KVM with
// kBootProbeArg (the init prints a line and powers off) within a timeout;
// the answer is kept per host boot (beside the templates, snapshot.hpp), and
// `run` uses KVM only when such a proof says it boots. Otherwise TCG,
// software emulation, and every report says so.
#pragma once
#include <string>

#include "microvm/vmm.hpp"

namespace exg::microvm {

struct AccelProof {
  bool kvm_boots = false;
  std::string detail;  // what was seen: "a guest booted under KVM in 412 ms", "no console line within 5 s", ...
  bool from_cache = false;
};

// Boots (or reads this host boot's earlier answer) and keeps the answer.
AccelProof prove_kvm(int timeout_ms);
// The accelerator a sandbox gets: KVM when this host boot's proof says it
// boots, else TCG; `why` says which and from what.
Accel chosen_accel(std::string* why = nullptr);

}  // namespace exg::microvm
