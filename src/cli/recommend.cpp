#include <iostream>

#include "cli/subcommands.hpp"
#include "sandbox/advice.hpp"

namespace exg::cli {

int recommend_main(const std::string& situation, bool situation_given, bool json) {
  int rc = situation_given ? sandbox::write_recommendation(std::cout, std::cerr, situation, json)
                           : sandbox::write_situations(std::cout, json);
  std::cout.flush();
  return rc;
}

}  // namespace exg::cli
