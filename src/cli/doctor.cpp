#include <iostream>

#include "cli/subcommands.hpp"
#include "sandbox/advice.hpp"
#include "sandbox/host_caps.hpp"

namespace exg::cli {

int doctor_main(bool json) {
  int rc = sandbox::write_doctor(std::cout, sandbox::probe_host(), json);
  std::cout.flush();
  return rc;
}

}  // namespace exg::cli
