// One process supervises two sandboxes at once (issue 13: supervise() touches
// no process-wide state, so a server can hold many). Two threads each run
// supervise() on the real process layer; each sandbox waits until the other
// has started (a file the test creates only then), so both provably run at
// the same time under one process. Each gets its own exit status, sees only
// its own workspace and processes, and the process's signal mask, fd limit,
// groups and working directory are as they were.
#include <gtest/gtest.h>
#include <grp.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "cli/make_layer.hpp"
#include "layer/layer.hpp"
#include "plan/plan.hpp"
#include "policy/policy.hpp"
#include "sandbox/supervisor.hpp"

namespace exg {
namespace {

namespace fs = std::filesystem;

class LinesIo final : public sandbox::SupervisorIo {
 public:
  std::vector<std::string> lines;
  void say(const std::string& line) override { lines.push_back(line); }
};

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool wait_for(const fs::path& p) {
  for (int i = 0; i < 600; ++i) {  // up to a minute on a loaded machine: a hang, not a speed check
    if (fs::exists(p)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// The workspace's command: says it started, waits for the test's go (given
// once the other sandbox has started too), reports what it sees, exits with `code`.
std::vector<std::string> command(const std::string& me, const std::string& other_ws, int code) {
  std::string sh = "echo " + me + " > started; "
                   "i=0; while [ ! -e go ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; "
                   "[ -e go ] || exit 99; "
                   "ls > seen-files; "
                   "ls /proc | grep -c '^[0-9]' > seen-pids; "
                   "if [ -e " + other_ws + "/started ]; then echo visible; else echo hidden; fi > seen-other; "
                   "exit " + std::to_string(code);
  return {"/bin/sh", "-c", sh};
}

struct Side {
  fs::path ws;
  Result<int> status = fail(Error::msg("test", "not run"));
  LinesIo io;
};

TEST(SuperviseTwo, OneProcessHoldsTwoSandboxesAtOnce) {
  if (::geteuid() != 0) GTEST_SKIP() << "the process layer as root here (CI runs the unit tests as root)";
  char tmpl[] = "/tmp/exg-two-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path base = tmpl;
  Side a, b;
  a.ws = base / "a";
  b.ws = base / "b";
  fs::create_directories(a.ws);
  fs::create_directories(b.ws);

  sigset_t mask_before, mask_after;
  ASSERT_EQ(::pthread_sigmask(SIG_SETMASK, nullptr, &mask_before), 0);
  rlimit nofile_before{}, nofile_after{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &nofile_before), 0);
  std::vector<gid_t> groups_before(::getgroups(0, nullptr)), groups_after;
  ::getgroups(static_cast<int>(groups_before.size()), groups_before.data());
  const fs::path cwd_before = fs::current_path();

  auto plan_for = [](const Side& s, const std::vector<std::string>& argv) {
    plan::Context ctx = plan::Context::from_process(argv);
    ctx.cwd = s.ws.string();
    ctx.workspace = s.ws.string();
    return plan::compile(policy::Policy{}, ctx);
  };
  auto pa = plan_for(a, command("a", b.ws.string(), 3));
  auto pb = plan_for(b, command("b", a.ws.string(), 5));
  ASSERT_TRUE(pa) << pa.error().str();
  ASSERT_TRUE(pb) << pb.error().str();
  ASSERT_NE(pa->sandbox_id, pb->sandbox_id);

  auto run = [](Side& s, const plan::Plan& p) {
    auto layer = cli::make_layer(layer::Kind::Process);
    if (!layer) {
      s.status = fail(layer.error());
      return;
    }
    s.status = sandbox::supervise(**layer, p, s.io, {});
  };
  std::thread ta(run, std::ref(a), std::cref(*pa));
  std::thread tb(run, std::ref(b), std::cref(*pb));
  // Both have started before either may go on: they run at the same time.
  bool both = wait_for(a.ws / "started") && wait_for(b.ws / "started");
  std::ofstream(a.ws / "go") << "go\n";
  std::ofstream(b.ws / "go") << "go\n";
  ta.join();
  tb.join();
  EXPECT_TRUE(both) << "the two sandboxes never ran at once";

  ASSERT_TRUE(a.status) << a.status.error().str();
  ASSERT_TRUE(b.status) << b.status.error().str();
  EXPECT_EQ(*a.status, 3);
  EXPECT_EQ(*b.status, 5);
  for (Side* s : {&a, &b}) {
    EXPECT_EQ(read_file(s->ws / "seen-other"), "hidden\n") << s->ws;  // the other's workspace is not in its view
    // Its own pid namespace: its pid 1 and the shell's few processes, none of the other's.
    int pids = std::stoi("0" + read_file(s->ws / "seen-pids"));
    EXPECT_GT(pids, 0);
    EXPECT_LT(pids, 8) << s->ws;
    std::string files = read_file(s->ws / "seen-files");
    EXPECT_EQ(files.find("seen-other"), std::string::npos);
    EXPECT_NE(files.find("started"), std::string::npos);
  }
  EXPECT_EQ(read_file(a.ws / "started"), "a\n");
  EXPECT_EQ(read_file(b.ws / "started"), "b\n");

  // Nothing process-wide changed.
  ASSERT_EQ(::pthread_sigmask(SIG_SETMASK, nullptr, &mask_after), 0);
  for (int sig = 1; sig < NSIG; ++sig)
    EXPECT_EQ(sigismember(&mask_before, sig), sigismember(&mask_after, sig)) << "signal " << sig;
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &nofile_after), 0);
  EXPECT_EQ(nofile_before.rlim_cur, nofile_after.rlim_cur);
  EXPECT_EQ(nofile_before.rlim_max, nofile_after.rlim_max);
  groups_after.resize(::getgroups(0, nullptr));
  ::getgroups(static_cast<int>(groups_after.size()), groups_after.data());
  EXPECT_EQ(groups_before, groups_after);
  EXPECT_EQ(fs::current_path(), cwd_before);
  std::error_code ec;
  fs::remove_all(base, ec);
}

}  // namespace
}  // namespace exg
