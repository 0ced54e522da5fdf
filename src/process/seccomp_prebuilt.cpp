// The sandbox's seccomp program as compiled at build time (tools/seccomp_bpf_gen.cpp):
// the same instructions build_seccomp_program() makes (a unit test compares
// them), without running libseccomp on every start-up.
#include "process/seccomp.hpp"

namespace exg::process {

namespace {

constexpr sock_filter kPrebuilt[] = {
#include "seccomp_bpf.inc"
};

}  // namespace

const std::vector<sock_filter>& prebuilt_seccomp_program() {
  static const std::vector<sock_filter> prog(std::begin(kPrebuilt), std::end(kPrebuilt));
  return prog;
}

}  // namespace exg::process
