// layer::LaunchOptions::pass_fds on the real process layer: the command gets
// the passed descriptors as 3, 4, ... and nothing else of its launcher (the
// microVM layer gives qemu its channels so: no socket path anywhere).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "plan/plan.hpp"
#include "policy/policy.hpp"
#include "process/launch.hpp"

namespace exg {
namespace {

namespace fs = std::filesystem;

std::string read_to_end(int fd) {
  std::string out;
  char buf[256];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

TEST(ProcessPassFds, TheCommandGetsThemAsThreeFourAndNothingElse) {
  if (::geteuid() != 0) GTEST_SKIP() << "the process layer as root here (CI runs the unit tests as root)";
  char tmpl[] = "/tmp/exg-passfds-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path ws = tmpl;
  int in[2], out[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in), 0);
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, out), 0);
  int stray[2];  // open in the launcher without close-on-exec: must not reach the command
  ASSERT_EQ(::pipe(stray), 0);

  plan::Context ctx = plan::Context::from_process(
      {"/bin/sh", "-c",
       "read l <&3; echo \"got:$l\" >&4; "
       // (the shell's own redirections: a listing of /proc/self/fd would show the lister's descriptors)
       "n=5; while [ $n -le 9 ]; do if true 2>/dev/null >&$n; then echo \"open:$n\" >&4; fi; n=$((n+1)); done"});
  ctx.cwd = ws.string();
  ctx.workspace = ws.string();
  auto plan = plan::compile(policy::Policy{}, ctx);
  ASSERT_TRUE(plan) << plan.error().str();
  process::LaunchOptions opt;
  opt.pass_fds = {in[1], out[1]};
  auto l = process::launch(*plan, opt);
  ::close(in[1]);
  ::close(out[1]);
  ASSERT_TRUE(l) << l.error().str();
  ASSERT_EQ(::write(in[0], "hello\n", 6), 6);
  std::string said = read_to_end(out[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(l->pid, &status, 0), l->pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status << ": " << said;
  EXPECT_EQ(said, "got:hello\n");  // 3 and 4 as passed, nothing open from 5 to 9 (dash names no higher fd)

  // More than the command can be given is refused before anything starts.
  opt.pass_fds = {stray[0], stray[0], stray[0], stray[0], stray[0]};
  auto refused = process::launch(*plan, opt);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().str().find("more than 4 descriptors"), std::string::npos) << refused.error().str();
  for (int fd : {in[0], out[0], stray[0], stray[1]}) ::close(fd);
  std::error_code ec;
  fs::remove_all(ws, ec);
}

}  // namespace
}  // namespace exg
