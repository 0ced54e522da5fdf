#include <iostream>

#include "cli/subcommands.hpp"
#include "sandbox/advice.hpp"

namespace exg::cli {

int recommend_main(const std::string& situation, bool json) {
  int rc = sandbox::write_recommendation(std::cout, std::cerr, situation, json);
  std::cout.flush();
  return rc;
}

}  // namespace exg::cli
