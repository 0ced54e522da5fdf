// Landlock applied alone (no mounts, no namespaces): it refuses writes that
// the DAC permissions, and so a read-write bind mount, would allow.
#include <fcntl.h>
#include <gtest/gtest.h>

#include "temp_dir.hpp"
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "walls/landlock.hpp"

using exg::walls::apply_landlock;
using exg::walls::landlock_abi;
using exg::walls::landlock_features;
using exg::walls::LandlockRules;

namespace {

// What the child checks, one exit-code bit each (0 = all held).
enum : int {
  kApplyFailed = 1 << 0,
  kAllowedDirRefused = 1 << 1,   // writing/creating/renaming in dirA failed
  kWriteNotRefused = 1 << 2,     // writing an existing file in dirB was not EACCES
  kCreateNotRefused = 1 << 3,    // creating a file or dir in dirB was not EACCES
  kRemoveNotRefused = 1 << 4,    // unlink or rename in dirB was not EACCES
  kReadOrDevFailed = 1 << 5,     // reading /etc/hostname or writing /dev/null failed
  kSignalNotScoped = 1 << 6,     // kill(getppid(), 0) was not EPERM (ABI >= 6)
  kAbstractNotScoped = 1 << 7,   // connect to the parent's abstract socket was not EPERM (ABI >= 6)
};

std::string describe(int bits) {
  static const char* names[] = {"apply_landlock failed",
                                "writing in the read-write dir failed",
                                "writing an existing file in the other dir was not refused",
                                "creating in the other dir was not refused",
                                "unlink/rename in the other dir was not refused",
                                "reading /etc/hostname or writing /dev/null failed",
                                "a signal to the parent was not refused",
                                "connecting to the parent's abstract socket was not refused"};
  std::string s;
  for (int i = 0; i < 8; ++i)
    if (bits & (1 << i)) s += std::string(s.empty() ? "" : "; ") + names[i];
  return s;
}

using exg::test_support::TempDir;

bool write_file(const std::string& path, int flags) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | flags, 0644);
  if (fd < 0) return false;
  bool ok = ::write(fd, "x", 1) == 1;
  ::close(fd);
  return ok;
}

// Named after the test process (the parent), so the child finds the parent's socket.
sockaddr_un abstract_addr(pid_t owner, socklen_t* len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::string name = "exg-landlock-test-" + std::to_string(owner);
  std::memcpy(a.sun_path + 1, name.data(), name.size());
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return a;
}

// A forked child's exit status (as waitpid gives it; -1: no child) and the
// report it put in the string its body was given.
struct ChildRun {
  int status = -1;
  std::string report;
};
template <class Body>
ChildRun run_in_child(Body body) {
  ChildRun r;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return r;
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    std::string report;
    int rc = body(&report);
    (void)!::write(fds[1], report.data(), report.size());
    ::_exit(rc);
  }
  ::close(fds[1]);
  char buf[1024];
  for (ssize_t n; pid > 0 && (n = ::read(fds[0], buf, sizeof buf)) > 0;) r.report.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  if (pid < 0 || ::waitpid(pid, &r.status, 0) != pid) r.status = -1;
  return r;
}

int child_checks(const std::string& a, const std::string& b, bool scoped) {
  int bits = 0;
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return kApplyFailed;
  LandlockRules rules;
  rules.read_only = {"/"};
  rules.read_write = {a};
  rules.write_files = {"/dev"};
  rules.required = true;
  std::string report;
  if (apply_landlock(rules, &report) != 0) return kApplyFailed;

  if (!write_file(a + "/new", O_CREAT | O_TRUNC) || ::mkdir((a + "/d").c_str(), 0755) != 0 ||
      ::rename((a + "/new").c_str(), (a + "/renamed").c_str()) != 0 || ::unlink((a + "/renamed").c_str()) != 0)
    bits |= kAllowedDirRefused;

  errno = 0;
  if (write_file(b + "/existing", 0) || errno != EACCES) bits |= kWriteNotRefused;
  errno = 0;
  if (write_file(b + "/created", O_CREAT) || errno != EACCES) bits |= kCreateNotRefused;
  errno = 0;
  if (::mkdir((b + "/d").c_str(), 0755) == 0 || errno != EACCES) bits |= kCreateNotRefused;
  errno = 0;
  if (::unlink((b + "/existing").c_str()) == 0 || errno != EACCES) bits |= kRemoveNotRefused;
  errno = 0;
  if (::rename((b + "/existing").c_str(), (b + "/moved").c_str()) == 0 || errno != EACCES)
    bits |= kRemoveNotRefused;
  // Moving a file out of the protected dir into the writable one is a removal there.
  errno = 0;
  if (::rename((b + "/existing").c_str(), (a + "/stolen").c_str()) == 0 || (errno != EACCES && errno != EXDEV))
    bits |= kRemoveNotRefused;

  char buf[256];
  int fd = ::open("/etc/hostname", O_RDONLY | O_CLOEXEC);
  if (fd < 0 || ::read(fd, buf, sizeof buf) < 0) bits |= kReadOrDevFailed;
  if (fd >= 0) ::close(fd);
  if (!write_file("/dev/null", O_TRUNC)) bits |= kReadOrDevFailed;

  if (scoped) {
    errno = 0;
    if (::kill(::getppid(), 0) == 0 || errno != EPERM) bits |= kSignalNotScoped;
    socklen_t len;
    sockaddr_un addr = abstract_addr(::getppid(), &len);
    int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    errno = 0;
    if (::connect(s, reinterpret_cast<sockaddr*>(&addr), len) == 0 || errno != EPERM)
      bits |= kAbstractNotScoped;
    ::close(s);
  }
  return bits;
}

}  // namespace

TEST(Landlock, FeaturesFollowAbi) {
  auto f = landlock_features();
  EXPECT_EQ(f.abi, landlock_abi());
  EXPECT_EQ(f.fs, f.abi >= 1);
  EXPECT_EQ(f.truncate, f.abi >= 3);
  EXPECT_EQ(f.net, f.abi >= 4);
  EXPECT_EQ(f.ioctl_dev, f.abi >= 5);
  EXPECT_EQ(f.scope, f.abi >= 6);
  EXPECT_EQ(f.audit_flags, f.abi >= 7);
}

TEST(Landlock, RefusesWritesThatDacWouldAllow) {
  if (landlock_abi() == 0) GTEST_SKIP() << "Landlock is not available on this kernel";
  const bool scoped = landlock_features().scope;
  TempDir a, b;
  for (const auto* d : {&a, &b}) ::chmod(d->path().c_str(), 0777);  // writable at the DAC level for anyone
  // The control: without Landlock, dirB is writable.
  ASSERT_TRUE(write_file(b.path() + "/existing", O_CREAT));
  ::chmod((b.path() + "/existing").c_str(), 0666);

  socklen_t len;
  sockaddr_un addr = abstract_addr(::getpid(), &len);
  int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), len), 0) << std::strerror(errno);
  ASSERT_EQ(::listen(listener, 4), 0);

  std::fflush(nullptr);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) ::_exit(child_checks(a.path(), b.path(), scoped));
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ::close(listener);
  ASSERT_TRUE(WIFEXITED(status)) << "child died of signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << describe(WEXITSTATUS(status));
  // The parent is not restricted: dirB is untouched and still writable.
  EXPECT_TRUE(std::filesystem::exists(b.path() + "/existing"));
  EXPECT_FALSE(std::filesystem::exists(a.path() + "/stolen"));
  EXPECT_TRUE(write_file(b.path() + "/existing", 0));
}

TEST(Landlock, ReportsWhatWasAppliedAndSkipsMissingPaths) {
  if (landlock_abi() == 0) GTEST_SKIP() << "Landlock is not available on this kernel";
  auto [status, report] = run_in_child([](std::string* report) {
    ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    LandlockRules rules;
    rules.read_only = {"/"};
    rules.read_write = {"/nonexistent-exg-path"};
    return apply_landlock(rules, report) == 0 ? 0 : 1;
  });
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << report;
  EXPECT_NE(report.find("landlock: ABI " + std::to_string(landlock_abi())), std::string::npos) << report;
  EXPECT_NE(report.find("/nonexistent-exg-path"), std::string::npos) << report;
  if (landlock_features().net) {
    EXPECT_NE(report.find("TCP not handled"), std::string::npos) << report;
  }
}

// Paths beneath a directory the rules' credentials cannot search are skipped
// without an open each (one faccessat says so of the directory); a path that
// fails for another reason (a link into that directory) does not make its
// own directory's later paths skipped: their rules are still added.
TEST(Landlock, SkipsPathsBeneathAnUnsearchableDirectoryOnly) {
  if (landlock_abi() == 0) GTEST_SKIP() << "Landlock is not available on this kernel";
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (a directory another uid cannot search)";
  TempDir t;
  const std::string locked = t.path() + "/locked", open = t.path() + "/open";
  ASSERT_EQ(::chmod(t.path().c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(locked.c_str(), 0700), 0);  // root's: uid 65534 cannot search it
  ASSERT_EQ(::mkdir((locked + "/a").c_str(), 0777), 0);
  ASSERT_EQ(::mkdir((locked + "/b").c_str(), 0777), 0);
  ASSERT_EQ(::mkdir(open.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(open.c_str(), 0777), 0);
  ASSERT_EQ(::mkdir((open + "/c").c_str(), 0777), 0);
  ASSERT_EQ(::chmod((open + "/c").c_str(), 0777), 0);
  ASSERT_EQ(::symlink((locked + "/a").c_str(), (open + "/link").c_str()), 0);
  auto [status, report] = run_in_child([&](std::string* report) {
    if (::setresgid(65534, 65534, 65534) != 0 || ::setresuid(65534, 65534, 65534) != 0) return 2;
    ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    LandlockRules rules;
    rules.read_only = {"/"};
    rules.read_write = {locked + "/a", locked + "/b", open + "/link", open + "/c"};
    if (apply_landlock(rules, report, /*say_applied=*/true) != 0) return 1;
    if (!write_file(open + "/c/made", O_CREAT)) return 3;  // its rule was added
    errno = 0;
    if (write_file(open + "/made", O_CREAT) || errno != EACCES) return 4;  // Landlock is on
    return 0;
  });
  ASSERT_TRUE(WIFEXITED(status)) << report;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: apply failed, 2: ids, 3: the rule after the failed link was not added, "
                                       "4: a write without a rule was not refused; "
                                    << report;
  for (const auto& p : {locked + "/a", locked + "/b", open + "/link"})
    EXPECT_NE(report.find(p), std::string::npos) << p << " not listed as skipped: " << report;
  EXPECT_EQ(report.find(open + "/c"), std::string::npos) << report;
}
