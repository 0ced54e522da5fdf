#include <unistd.h>

#include <iostream>

#include "cli/host_setup.hpp"
#include "cli/subcommands.hpp"
#include "sandbox/advice.hpp"
#include "sandbox/host_caps.hpp"
#include "sandbox/userns_diagnosis.hpp"

namespace exg::cli {

int doctor_main(bool json) {
  auto caps = sandbox::probe_host();
  // As root, a run first drops its supplementary groups: "setgroups" is the
  // call it would trip on where they cannot be dropped.
  auto refusal = sandbox::explain_userns_refusal(sandbox::read_userns_facts(installed_container_runtime()), sandbox::try_user_namespace(),
                                                 ::geteuid() == 0 ? "setgroups" : "");
  int rc = sandbox::write_doctor(std::cout, caps, json, refusal);
  std::cout.flush();
  return rc;
}

}  // namespace exg::cli
