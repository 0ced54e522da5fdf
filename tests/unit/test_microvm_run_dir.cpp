// The microVM's socket directories in /tmp: a launcher killed before qemu
// connected leaves one, and the next launch removes it (run_dir.hpp). Real
// processes and a real directory: a dead launcher's directory goes, a live
// one's stays, and nothing that is not a socket directory is touched.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "microvm/run_dir.hpp"

namespace exg::microvm {
namespace {

namespace fs = std::filesystem;

void make_socket(const fs::path& p) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", p.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0) << p;
  ::close(fd);
}

std::string name_for(int pid, unsigned long long start, const char* tail = "AbC123") {
  return "exguardian-microvm-" + std::to_string(pid) + "-" + std::to_string(start) + "-" + tail;
}

TEST(MicrovmRunDir, StartTicksOfThisProcessAndOfNone) {
  EXPECT_GT(process_start_ticks(::getpid()), 0u);
  EXPECT_EQ(process_start_ticks(0), 0u);
}

TEST(MicrovmRunDir, ADeadLaunchersDirectoryGoesALiveOnesStays) {
  char tmpl[] = "/tmp/exg-rundir-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path tmp = tmpl;
  // A launcher that has ended: a real child, its start time read while it ran.
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  pid_t child = ::fork();
  if (child == 0) {
    ::close(go[1]);
    char c;
    (void)!::read(go[0], &c, 1);
    ::_exit(0);
  }
  unsigned long long child_start = process_start_ticks(child);
  ASSERT_GT(child_start, 0u);
  ::close(go[1]);
  ::close(go[0]);
  ::waitpid(child, nullptr, 0);

  const fs::path dead = tmp / name_for(child, child_start);
  const fs::path reused = tmp / name_for(::getpid(), process_start_ticks(::getpid()) + 1, "ReUsed");
  const fs::path live = tmp / name_for(::getpid(), process_start_ticks(::getpid()), "LiVe00");
  const fs::path with_file = tmp / name_for(child, child_start, "FiLe00");
  const fs::path other = tmp / "exguardian-microvm-XYZ123";  // an older version's name: left alone
  for (const auto& d : {dead, reused, live, with_file, other}) {
    fs::create_directory(d);
    make_socket(d / "agent.sock");
  }
  std::ofstream(with_file / "notes") << "not a socket\n";
  // A link with a stale name: removed as a name at most, never followed.
  const fs::path target = tmp / "target";
  fs::create_directory(target);
  make_socket(target / "agent.sock");
  fs::create_directory_symlink(target, tmp / name_for(child, child_start, "LiNk00"));

  EXPECT_EQ(reap_stale_run_dirs(tmp.string()), 2);  // dead and reused
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_FALSE(fs::exists(reused));
  EXPECT_TRUE(fs::exists(live / "agent.sock"));
  EXPECT_TRUE(fs::exists(with_file / "notes"));
  EXPECT_TRUE(fs::exists(other / "agent.sock"));
  EXPECT_TRUE(fs::exists(target / "agent.sock"));
  fs::remove_all(tmp);
}

TEST(MicrovmRunDir, MakeRunDirNamesThisProcessAndRemoveLeavesNothing) {
  RunDir run;
  ASSERT_TRUE(make_run_dir(run));
  const std::string expect = "/tmp/exguardian-microvm-" + std::to_string(::getpid()) + "-" +
                             std::to_string(process_start_ticks(::getpid())) + "-";
  EXPECT_EQ(run.dir.rfind(expect, 0), 0u) << run.dir;
  const std::string dir = run.dir;
  reap_stale_run_dirs();  // (others' stale ones may go) this launcher runs: its own stays
  EXPECT_TRUE(fs::is_directory(dir));
  run.remove();
  EXPECT_FALSE(fs::exists(dir));
}

}  // namespace
}  // namespace exg::microvm
