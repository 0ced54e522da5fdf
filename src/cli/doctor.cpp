#include <unistd.h>

#include <iostream>

#include "cli/host_setup.hpp"
#include "cli/subcommands.hpp"
#include "doctor/advice.hpp"
#include "doctor/host_caps.hpp"
#include "doctor/userns_diagnosis.hpp"

namespace exg::cli {

int doctor_main(bool json) {
  auto caps = doctor::probe_host();
  // As root, a run first drops its supplementary groups: "setgroups" is the
  // call it would trip on where they cannot be dropped.
  auto refusal = doctor::explain_userns_refusal(doctor::read_userns_facts(installed_container_runtime()), doctor::try_user_namespace(),
                                                 ::geteuid() == 0 ? "setgroups" : "");
  int rc = doctor::write_doctor(std::cout, caps, json, refusal);
  std::cout.flush();
  return rc;
}

}  // namespace exg::cli
