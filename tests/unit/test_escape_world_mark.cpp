// The net-udp judge reads the world's log up to the judge's own mark datagram (world_mark),
// not as the log stands when the probe's process has ended. Shown on the real world (its
// namespaces, its UDP server) with the server held still (SIGSTOP) while a datagram is sent,
// as a loaded host delays it: read at once, the log is empty and the judge would say held
// (what it did before the mark); read up to the mark, the datagram is there and the judge
// says ESCAPED. Without a datagram, the mark's slice is empty and the judge says held: the
// judge tells the two apart.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "evidence/catalog.hpp"
#include "evidence/world.hpp"
#include "temp_dir.hpp"

namespace exg::evidence {
namespace {

bool send_udp(const std::string& payload) {
  int u = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (u < 0) return false;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(53);
  ::inet_pton(AF_INET, "203.0.113.10", &sa.sin_addr);
  bool ok = ::sendto(u, payload.data(), payload.size(), 0, reinterpret_cast<sockaddr*>(&sa), sizeof sa) ==
            static_cast<ssize_t>(payload.size());
  ::close(u);
  return ok;
}

// Whether every thread of `pid` is in the stopped state ('T' in its stat), waited for up to 5 s.
bool all_threads_stopped(pid_t pid) {
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  for (int i = 0; i < 500; ++i) {
    bool all = true, any = false;
    for (const auto& t : std::filesystem::directory_iterator(tasks)) {
      std::string stat = read_whole(t.path().string() + "/stat").value_or("");
      size_t close = stat.rfind(')');
      any = true;
      if (close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] != 'T') all = false;
    }
    if (any && all) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// The log from `from` up to the mark numbered n (what the judge gets), or "NO MARK".
std::string slice_to_mark(const std::string& log, size_t from, unsigned n) {
  size_t mark = world_mark(log, n);
  if (mark == std::string::npos) return "NO MARK";
  std::string w = read_whole(log).value_or("");
  return mark > from ? w.substr(from, mark - from) : "";
}

std::string verdict_name(const Judgement& j) {
  switch (j.verdict) {
    case Verdict::held: return "held";
    case Verdict::escaped: return "ESCAPED";
    case Verdict::failed: return "FAILED";
    default: return "skipped";
  }
}

// In a forked child (the world enters namespaces of its own): one line per step, written to fd.
[[noreturn]] void child(const std::string& dir, int fd) {
  auto say = [fd](const std::string& s) { (void)!::write(fd, (s + "\n").data(), s.size() + 1); };
  TestWorld world;
  std::string why;
  if (!world.build(dir, why)) {
    say("SKIP the world cannot be built here: " + why);
    ::_exit(0);
  }
  Context ctx;
  ctx.canary = "exg-canary-not-sent";
  ctx.world_up = true;
  auto catalog = build_catalog(ctx);
  const ProbeSpec* udp = find_probe(catalog, "net-udp");
  if (!udp) {
    say("ERROR no net-udp probe in the catalogue");
    ::_exit(1);
  }
  auto judge = [&](const std::string& world_log) {
    Outcome o;
    o.status = 0;
    o.world_log = world_log;
    return udp->judge(o);
  };
  const std::string& log = world.log_path();

  // 1. A datagram sent while the server is held still (a loaded host): it is in the server's
  //    socket queue, not yet in its log.
  ::kill(world.server_pid(), SIGSTOP);
  // kill() returns before the stop has reached every thread of the server: a datagram sent
  // in between may still be logged at once (seen under a loaded full unit run).
  if (!all_threads_stopped(world.server_pid())) {
    say("ERROR the world's server did not stop within 5 s");
    ::_exit(1);
  }
  bool sent = send_udp("exg\n");  // what net-udp's `echo exg > /dev/udp/...` sends
  std::string at_once = read_whole(log).value_or("?");
  say("SENT " + std::string(sent ? "yes" : "no"));
  say("AT_ONCE " + verdict_name(judge(at_once)) + " [" + at_once + "]");
  std::thread resume([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ::kill(world.server_pid(), SIGCONT);
  });
  std::string upto = slice_to_mark(log, 0, 1);
  resume.join();
  auto j = judge(upto);
  say("TO_MARK " + verdict_name(j) + " [" + j.evidence + "]");

  // 2. No datagram: the slice up to the next mark is empty, and the judge says held.
  size_t from = read_whole(log).value_or("").size();
  std::string none = slice_to_mark(log, from, 2);
  say("NONE " + verdict_name(judge(none)) + " [" + none + "]");
  ::_exit(0);
}

TEST(EscapeWorldMark, TheUdpJudgeSeesADatagramTheServerLogsLate) {
  test_support::TempDir dir("exg-world-mark");
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(p[0]);
    child(dir.path(), p[1]);
  }
  ::close(p[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(p[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  if (out.starts_with("SKIP ")) GTEST_SKIP() << out;
  ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << out;
  EXPECT_NE(out.find("SENT yes\n"), std::string::npos) << out;
  // The old way (the log as it stood when the probe ended): nothing yet, "held".
  EXPECT_NE(out.find("AT_ONCE held []\n"), std::string::npos) << out;
  // Up to the mark: the datagram, ESCAPED, with the server's line as evidence.
  EXPECT_NE(out.find("TO_MARK ESCAPED [the world's server received: 203.0.113.10 UDP 4 bytes]\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("NONE held []\n"), std::string::npos) << out;
}

}  // namespace
}  // namespace exg::evidence
