#include <iostream>

#include "cli/subcommands.hpp"
#include "doctor/advice.hpp"

namespace exg::cli {

int recommend_main(const std::string& situation, bool situation_given, bool json) {
  int rc = situation_given ? doctor::write_recommendation(std::cout, std::cerr, situation, json)
                           : doctor::write_situations(std::cout, json);
  std::cout.flush();
  return rc;
}

}  // namespace exg::cli
