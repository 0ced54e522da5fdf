// The sandbox's seccomp programs as compiled at build time (tools/seccomp_bpf_gen.cpp):
// the same instructions build_seccomp_program() makes (a unit test compares
// them), without running libseccomp on every start-up. No libseccomp here:
// the microVM guest's static init embeds the errno-only one.
#include "walls/seccomp.hpp"

namespace exg::walls {

namespace {

constexpr sock_filter kPrebuilt[] = {
#include "seccomp_bpf.inc"
};

constexpr sock_filter kPrebuiltErrno[] = {
#include "seccomp_bpf_errno.inc"
};

}  // namespace

const std::vector<sock_filter>& prebuilt_seccomp_program() {
  static const std::vector<sock_filter> prog(std::begin(kPrebuilt), std::end(kPrebuilt));
  return prog;
}

const std::vector<sock_filter>& prebuilt_seccomp_errno_program() {
  static const std::vector<sock_filter> prog(std::begin(kPrebuiltErrno), std::end(kPrebuiltErrno));
  return prog;
}

}  // namespace exg::walls
