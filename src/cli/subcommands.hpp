// Subcommands that take no more than a flag or two; main.cpp wires them into CLI11.
#pragma once
#include <string>

namespace exg::cli {

// exguardian doctor [--json]: what this host and user can enforce, layer by layer.
int doctor_main(bool json);

// exguardian recommend [--situation laptop|ci|multi-tenant|privileged-tools] [--json].
// Unknown situation: one error line, exit status 2; none given: the list of them.
int recommend_main(const std::string& situation, bool situation_given, bool json);

}  // namespace exg::cli
