// The landlock layer's warden at a run's end (process/landlock_warden.hpp):
// who removes the run's private directory (TMPDIR), in each order of events,
// made certain with real processes on the real kernel: a stand-in supervisor
// (a child this test kills when the order says) and a stand-in init (a child
// that starts the warden, then ends with or without its word when told). The
// directory goes once the sandbox is over and the supervisor is gone, never
// while the supervisor lives (it removes it itself: after_run).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "process/landlock_warden.hpp"

namespace {

int pidfd_of(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

bool exists(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0;
}

// Up to `ms` for `fd` (a pidfd) to be readable.
bool readable_within(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, ms) == 1;
}

bool gone_within(const std::string& p, int ms) {
  for (int t = 0; t < ms / 10; ++t) {
    if (!exists(p)) return true;
    ::usleep(10000);
  }
  return !exists(p);
}

class WardenEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    // The warden that sees the supervisor go first ends the sandbox (kill(-1) in
    // its domain), stand-in init included: telling init afterwards writes to a
    // pipe nobody reads, which must be EPIPE here, not this suite's death.
    old_sigpipe_ = ::signal(SIGPIPE, SIG_IGN);
    char tmpl[] = "/tmp/exg_warden_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    tmp_ = tmpl;
    ::mkdir((tmp_ + "/sub").c_str(), 0700);
    ::close(::open((tmp_ + "/sub/f").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
    supervisor_ = ::fork();
    ASSERT_GE(supervisor_, 0);
    if (supervisor_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      for (;;) ::pause();
    }
    sup_fd_ = pidfd_of(supervisor_);
    ASSERT_GE(sup_fd_, 0);
    int go[2], report[2];
    ASSERT_EQ(::pipe2(go, O_CLOEXEC), 0);
    ASSERT_EQ(::pipe2(report, O_CLOEXEC), 0);
    init_ = ::fork();
    ASSERT_GE(init_, 0);
    if (init_ == 0) {
      ::close(go[1]);
      ::close(report[0]);
      exg::process::Warden w;
      // A session's warden (a fork), the end this suite checks.
      int r = exg::process::start_warden(sup_fd_, tmp_.c_str(), /*share_memory=*/false, &w);
      int msg[2] = {r, w.pid};
      if (::write(report[1], msg, sizeof msg) != sizeof msg) ::_exit(2);
      if (r != 0) ::_exit(2);
      char how = 0;
      if (::read(go[0], &how, 1) != 1) ::_exit(3);
      if (how == 'e') exg::process::end_warden(&w);  // the normal end
      ::_exit(0);                                       // else: gone without a word
    }
    ::close(go[0]);
    ::close(report[1]);
    go_ = go[1];
    int msg[2] = {-1, -1};
    ASSERT_EQ(::read(report[0], msg, sizeof msg), static_cast<ssize_t>(sizeof msg));
    ::close(report[0]);
    if (msg[0] != 0) GTEST_SKIP() << "no warden here (a signal-scoped Landlock domain needs ABI 6): " << -msg[0];
    warden_fd_ = pidfd_of(msg[1]);
    ASSERT_GE(warden_fd_, 0);
  }
  void TearDown() override {
    if (supervisor_ > 0) kill_supervisor();
    if (init_ > 0) end_init('x');
    if (warden_fd_ >= 0) {
      ::syscall(SYS_pidfd_send_signal, warden_fd_, SIGKILL, nullptr, 0);
      ::close(warden_fd_);
    }
    if (sup_fd_ >= 0) ::close(sup_fd_);
    if (go_ >= 0) ::close(go_);
    std::string rm = "rm -rf '" + tmp_ + "'";
    if (!tmp_.empty()) (void)!std::system(rm.c_str());
    ::signal(SIGPIPE, old_sigpipe_);
  }
  void kill_supervisor() {
    ::kill(supervisor_, SIGKILL);
    ::waitpid(supervisor_, nullptr, 0);
    supervisor_ = -1;
  }
  // 'e': init's normal end (end_warden); anything else: init exits without a word.
  void end_init(char how) {
    (void)!::write(go_, &how, 1);
    ::waitpid(init_, nullptr, 0);
    init_ = -1;
  }

  std::string tmp_;
  sighandler_t old_sigpipe_ = SIG_DFL;
  pid_t supervisor_ = -1, init_ = -1;
  int sup_fd_ = -1, warden_fd_ = -1, go_ = -1;
};

// The supervisor killed: init ends without a word (its parent-death signal, or
// the agent seeing its channel close) before the supervisor's pidfd is readable.
TEST_F(WardenEnd, InitGoneFirstThenTheSupervisorExits_TheWardenRemovesTmpdir) {
  end_init('x');
  ::usleep(300000);
  EXPECT_TRUE(exists(tmp_)) << "removed while the supervisor lives (it removes it itself)";
  kill_supervisor();
  EXPECT_TRUE(gone_within(tmp_, 3000)) << tmp_ << " left: the warden did not wait for the supervisor's exit";
  EXPECT_TRUE(readable_within(warden_fd_, 3000)) << "the warden outlives its task";
}

// The supervisor killed the sandbox's init (a timeout) and removed TMPDIR itself: the warden leaves
// at once, not at the end of its bounded wait.
TEST_F(WardenEnd, InitKilledAndTheSupervisorRemovesTmpdir_TheWardenLeavesAtOnce) {
  end_init('x');
  ASSERT_FALSE(readable_within(warden_fd_, 200)) << "the warden left without waiting for the supervisor";
  ASSERT_EQ(std::system(("rm -rf '" + tmp_ + "'").c_str()), 0);
  EXPECT_TRUE(readable_within(warden_fd_, 2000)) << "the warden stays after the supervisor removed TMPDIR";
}

// Init's normal end, the supervisor already gone: the warden, told, still removes TMPDIR.
TEST_F(WardenEnd, NormalEndAfterTheSupervisorIsGone_TheWardenRemovesTmpdir) {
  kill_supervisor();
  end_init('e');  // (the warden may have seen the supervisor go first: then it ends the sandbox itself)
  EXPECT_TRUE(gone_within(tmp_, 3000)) << tmp_ << " left at a normal end with the supervisor gone";
}

// Init's normal end, the supervisor alive: TMPDIR is the supervisor's to remove.
TEST_F(WardenEnd, NormalEndWithTheSupervisorAlive_TmpdirStays) {
  end_init('e');
  EXPECT_TRUE(readable_within(warden_fd_, 1000));
  EXPECT_TRUE(exists(tmp_ + "/sub/f"));
}

}  // namespace
