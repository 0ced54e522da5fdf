// supervise() and LaunchOptions::meanwhile: a layer that hands back a running
// sandbox without having run the supervisor's setup (the egress rules, the
// workspace's snapshot) is refused, and its sandbox killed and reaped, on
// the real kernel (a forked child stands for the sandbox's first process).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <string>
#include <vector>

#include "layer/layer.hpp"
#include "util/syscalls.hpp"
#include "sandbox/supervisor.hpp"

namespace exg {
namespace {

class SkipsMeanwhileLayer final : public layer::Layer {
 public:
  pid_t child = -1;
  bool had_meanwhile = false;
  layer::Kind kind() const override { return layer::Kind::Process; }
  std::vector<std::string> describe(const plan::Plan&) const override { return {"layer: process"}; }
  layer::Enforcement enforces(const plan::Plan&) const override { return {}; }
  Result<layer::Sandbox> launch(const plan::Plan&, const layer::LaunchOptions& opt) override {
    had_meanwhile = static_cast<bool>(opt.meanwhile);
    layer::Sandbox sb;
    sb.pid = ::fork();
    if (sb.pid == 0) {
      ::pause();
      ::_exit(0);
    }
    child = sb.pid;
    sb.pidfd.reset(sys::pidfd_open(sb.pid));
    return sb;
  }
};

class QuietIo final : public sandbox::SupervisorIo {
 public:
  void say(const std::string&) override {}
};

TEST(SuperviseMeanwhile, ALayerThatSkipsItIsRefusedAndItsSandboxKilled) {
  SkipsMeanwhileLayer l;
  QuietIo io;
  plan::Plan p;
  p.argv = {"/bin/true"};
  auto r = sandbox::supervise(l, p, io, {});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().str(), "layer process: started without the supervisor's setup");
  EXPECT_TRUE(l.had_meanwhile);  // it was offered
  ASSERT_GT(l.child, 0);
  EXPECT_EQ(::waitpid(l.child, nullptr, WNOHANG), -1);  // killed and reaped already
  EXPECT_EQ(errno, ECHILD);
}

}  // namespace
}  // namespace exg
