// cgroups: parsing helpers everywhere; real cgroups (limits read back, a pids
// limit hit, an OOM kill, kill, removal, sweep) only as root on a host where
// detect_cgroups() says usable. Every destructive child runs only after the
// test has seen, in /proc/<child>/cgroup, that it is inside the test cgroup,
// and every child is bounded in time (alarm).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "temp_dir.hpp"
#include "cgroup/cgroup.hpp"
#include "cgroup/files.hpp"
#include "cgroup/freezer.hpp"
#include "cgroup/layout.hpp"
#include "cgroup/usage.hpp"
#include "walls/rlimits.hpp"

namespace exg::cgroup {
namespace {

namespace d = cgroup;
using plan::default_limits;
using plan::format_bytes;
using plan::Limits;
using walls::default_rlimits;
using walls::RlimitPlan;

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}
std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}
bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// ---- pure helpers ----

TEST(CgroupParse, Keyed) {
  EXPECT_EQ(d::parse_keyed("low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\n", "oom_kill"), 2u);
  EXPECT_EQ(d::parse_keyed("oom_kill_disable 0\nunder_oom 0\noom_kill 7\n", "oom_kill"), 7u);
  EXPECT_EQ(d::parse_keyed("max 5\n", "max"), 5u);
  EXPECT_FALSE(d::parse_keyed("max 5\n", "oom_kill"));
  EXPECT_EQ(d::parse_number("max\n"), UINT64_MAX);
  EXPECT_EQ(d::parse_number("67108864\n"), 67108864u);
  EXPECT_FALSE(d::parse_number("12x"));
  EXPECT_FALSE(d::parse_number(""));
}

TEST(CgroupParse, ProcSelfCgroup) {
  const char* hybrid = "9:name=systemd:/\n8:pids:/a\n4:memory:/process_api/x\n1:cpu,cpuacct:/c\n0::/u\n";
  EXPECT_EQ(d::own_cgroup_path(hybrid, "memory"), "/process_api/x");
  EXPECT_EQ(d::own_cgroup_path(hybrid, "cpuacct"), "/c");
  EXPECT_EQ(d::own_cgroup_path(hybrid, ""), "/u");
  EXPECT_FALSE(d::own_cgroup_path("4:memory:/m\n", ""));
  EXPECT_EQ(d::own_cgroup_path("0::/user.slice/user-1000.slice/session-2.scope\n", ""),
            "/user.slice/user-1000.slice/session-2.scope");
}

TEST(CgroupParse, MemTotalCpuNames) {
  EXPECT_EQ(plan::parse_memtotal("MemTotal:       24683652 kB\nMemFree: 1 kB\n"), 24683652ull * 1024);
  EXPECT_FALSE(plan::parse_memtotal("MemFree: 1 kB\n"));
  EXPECT_EQ(d::cpu_max_value(0.5), "50000 100000");
  EXPECT_EQ(d::cpu_max_value(2), "200000 100000");
  EXPECT_EQ(d::cpu_quota_us(0.001), 1000);
  EXPECT_EQ(d::cpu_quota_us(0.123456), 12346);  // rounded to the nearest microsecond
  EXPECT_EQ(d::cpu_quota_us(0.123454), 12345);
  EXPECT_EQ(d::cpu_quota_us(1e300), 1000000000000);  // capped, not undefined
  EXPECT_EQ(d::stale_pid_of("exg-123-abc"), 123);
  EXPECT_EQ(d::stale_pid_of("exg-999999999-x"), 999999999);
  EXPECT_FALSE(d::stale_pid_of("exg--x"));
  EXPECT_FALSE(d::stale_pid_of("exg-12"));
  EXPECT_FALSE(d::stale_pid_of("other-12-x"));
}

TEST(CgroupParse, FormatBytesAndDefaults) {
  EXPECT_EQ(format_bytes(512ull << 20), "512M");
  EXPECT_EQ(format_bytes(1ull << 30), "1G");
  EXPECT_EQ(format_bytes(1536ull << 20), "1536M");
  EXPECT_EQ(format_bytes(1000), "1000");
  Limits l = default_limits();
  ASSERT_TRUE(l.memory_bytes);
  EXPECT_LE(*l.memory_bytes, 8ull << 30);
  EXPECT_GT(*l.memory_bytes, 0u);
  EXPECT_EQ(l.pids, 4096u);
  EXPECT_FALSE(l.cpus);
  EXPECT_FALSE(l.explicit_memory || l.explicit_pids || l.explicit_cpus);
}

// serve's figures and pause read these files: v1's and v2's names, read from
// plain files laid out as each version lays them out.
void put(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

TEST(CgroupUsage, V1AndV2Files) {
  struct Version {
    const char* name;
    std::vector<std::pair<std::string, std::string>> files;
    uint64_t cpu_ns, memory_bytes, memory_cache;
  };
  const Version versions[] = {
      {"v1",
       {{"cpuacct.usage", "123456789\n"}, {"memory.usage_in_bytes", "4096\n"}, {"memory.stat", "cache 1\ntotal_cache 2048\n"}},
       123456789, 4096, 2048},
      {"v2", {{"cpu.stat", "usage_usec 5\nuser_usec 3\n"}, {"memory.current", "8192\n"}, {"memory.stat", "anon 1\nfile 512\n"}},
       5000, 8192, 512},
  };
  for (const auto& v : versions) {
    test_support::TempDir dir{std::string("exg-cg-") + v.name};
    for (const auto& [name, text] : v.files) put(dir.path() + "/" + name, text);
    auto u = read_usage({dir.path()});
    EXPECT_EQ(u.cpu_ns, v.cpu_ns) << v.name;
    EXPECT_EQ(u.memory_bytes, v.memory_bytes) << v.name;
    EXPECT_EQ(u.memory_cache, v.memory_cache) << v.name;
    EXPECT_FALSE(read_usage({dir.path() + "/none"}).cpu_ns) << v.name;
  }
}

TEST(CgroupFreezer, V1AndV2Knobs) {
  test_support::TempDir v1{"exg-cg-v1"}, v2{"exg-cg-v2"}, none{"exg-cg-none"};
  put(v1.path() + "/freezer.state", "THAWED\n");
  put(v2.path() + "/cgroup.freeze", "0\n");
  put(v2.path() + "/cgroup.events", "populated 1\nfrozen 0\n");
  auto f = freezers_of({v1.path(), none.path(), v2.path()});
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].file, v1.path() + "/freezer.state");
  EXPECT_FALSE(f[0].frozen());
  EXPECT_TRUE(f[0].freeze());
  EXPECT_TRUE(f[0].frozen());  // (a plain file reads what was written)
  EXPECT_EQ(f[1].check, v2.path() + "/cgroup.events");
  EXPECT_FALSE(f[1].frozen());
  EXPECT_EQ(f[1].state(), "populated 1\nfrozen 0");
  put(v2.path() + "/cgroup.events", "populated 1\nfrozen 1\n");
  EXPECT_TRUE(f[1].frozen());
  EXPECT_TRUE(f[1].thaw());
  EXPECT_EQ(trim(slurp(v2.path() + "/cgroup.freeze")), "0");
}

TEST(CgroupLayout, SandboxDirsAreTheExistingOnes) {
  test_support::TempDir a{"exg-cg-a"}, b{"exg-cg-b"};
  Layout L;
  L.bases.push_back({{}, a.path(), false});
  L.bases.push_back({{}, b.path(), false});
  EXPECT_EQ(sandbox_dir_name(42, "s1"), "exg-42-s1");
  ASSERT_EQ(::mkdir((b.path() + "/exg-42-s1").c_str(), 0755), 0);
  EXPECT_EQ(sandbox_dirs(L, 42, "s1"), std::vector<std::string>{b.path() + "/exg-42-s1"});
  EXPECT_TRUE(sandbox_dirs(L, 43, "s1").empty());
  EXPECT_EQ(stale_pid_of(sandbox_dir_name(42, "s1")), 42);
}

TEST(CgroupCreate, UnusableLayout) {
  d::Layout none;
  none.why = "simulated";
  Limits def = default_limits();
  auto cg = Cgroup::create_in(none, "t", def);
  ASSERT_TRUE(cg) << cg.error().str();
  EXPECT_FALSE(cg->active());
  EXPECT_EQ(cg->notes().size(), 1u);
  Limits ex = def;
  ex.explicit_pids = true;
  auto bad = Cgroup::create_in(none, "t", ex);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().str().find("simulated"), std::string::npos);
}

TEST(Rlimits, Defaults) {
  RlimitPlan p = default_rlimits(default_limits().memory_bytes.has_value());
  EXPECT_TRUE(p.set_core);
  EXPECT_EQ(p.core, 0u);
  EXPECT_LE(p.nofile, 65536u);
  EXPECT_FALSE(p.set_fsize);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (apply_rlimits(p) != 0) _exit(1);
    struct rlimit r;
    getrlimit(RLIMIT_CORE, &r);
    if (r.rlim_cur != 0 || r.rlim_max != 0) _exit(2);
    getrlimit(RLIMIT_NOFILE, &r);
    if (r.rlim_cur != p.nofile || r.rlim_max != p.nofile) _exit(3);
    _exit(0);
  }
  int st = 0;
  ASSERT_EQ(waitpid(pid, &st, 0), pid);
  EXPECT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
}

// ---- real cgroups ----

class CgroupReal : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root";
    auto s = detect_cgroups();
    if (!s.usable) GTEST_SKIP() << "cgroups unusable: " << s.why;
  }
};

// A child that waits for the go (a byte on a pipe), then runs fn and exits with its value.
struct Held {
  pid_t pid = -1;
  int go = -1;
};
template <typename F>
Held spawn_held(F fn) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    close(p[1]);
    char c;
    if (read(p[0], &c, 1) != 1) _exit(99);  // no go: never run fn
    close(p[0]);
    alarm(30);  // bounded whatever happens
    _exit(fn());
  }
  close(p[0]);
  return {pid, p[1]};
}
int wait_status(pid_t pid) {
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return st;
}
// Every hierarchy of the cgroup must appear in /proc/<pid>/cgroup.
bool inside(pid_t pid, const Cgroup& cg, const std::string& name) {
  std::string text = slurp("/proc/" + std::to_string(pid) + "/cgroup");
  size_t want = cg.dirs().size(), seen = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.size() > name.size() && line.ends_with("/" + name)) ++seen;
  return want > 0 && seen >= want;
}
std::string unique_id(const char* what) { return std::string(what) + std::to_string(::time(nullptr) % 100000); }
std::string cg_name(const std::string& id) { return "exg-" + std::to_string(getpid()) + "-" + id; }

// Attaches and releases a held child, or kills it when it is not inside.
void release_inside(Cgroup& cg, Held h, const std::string& id) {
  auto a = cg.attach(h.pid);
  if (!a || !inside(h.pid, cg, cg_name(id))) {
    kill(h.pid, SIGKILL);
    close(h.go);
    wait_status(h.pid);
    FAIL() << "child not inside the test cgroup: " << (a ? std::string("attach ok") : a.error().str()) << "\n"
           << slurp("/proc/" + std::to_string(h.pid) + "/cgroup");
  }
  ASSERT_EQ(write(h.go, "g", 1), 1);
  close(h.go);
}

// A held child inside cg running child() (which does not return on its own),
// its run ended by end(cg): it died of SIGKILL, nothing is left inside, and
// the cgroup's directories are gone once the Cgroup is.
template <typename Child, typename End>
void expect_end_kills_and_removes(Cgroup cg, const std::string& id, Child child, End end) {
  const std::vector<std::string> dirs = cg.dirs();
  pid_t pid;
  {
    Cgroup owned = std::move(cg);
    Held h = spawn_held(child);
    pid = h.pid;
    release_inside(owned, h, id);
    if (::testing::Test::HasFatalFailure()) return;
    end(owned);
    EXPECT_TRUE(owned.empty());
  }
  int st = wait_status(pid);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << st;
  for (const auto& dir : dirs) EXPECT_FALSE(is_dir(dir)) << dir;
}

// Children for expect_end_kills_and_removes.
template <int forks>
int pause_after_forks() {
  for (int i = 0; i < forks; ++i)
    if (fork() == 0) break;
  pause();
  return 0;
}
// Every process forks again and again (up to the pids limit), for ever.
int fork_for_ever() {
  for (;;)
    if (fork() < 0) usleep(100);
}

Limits test_limits() {
  Limits l;
  l.memory_bytes = 64ull << 20;
  l.pids = 16;
  l.cpus = 0.5;
  l.explicit_memory = l.explicit_pids = l.explicit_cpus = true;
  return l;
}

TEST_F(CgroupReal, LimitsReadBackAndRemoved) {
  std::string id = unique_id("lim");
  std::vector<std::string> dirs;
  {
    auto cg = Cgroup::create(id, test_limits());
    ASSERT_TRUE(cg) << cg.error().str();
    ASSERT_TRUE(cg->active());
    dirs = cg->dirs();
    bool mem = false, pids = false, cpu = false;
    for (const auto& dir : dirs) {
      EXPECT_TRUE(dir.ends_with("/exguardian/" + cg_name(id))) << dir;
      if (cg->v2()) {
        EXPECT_EQ(trim(slurp(dir + "/memory.max")), "67108864");
        EXPECT_EQ(trim(slurp(dir + "/pids.max")), "16");
        EXPECT_EQ(trim(slurp(dir + "/cpu.max")), "50000 100000");
        mem = pids = cpu = true;
        EXPECT_GE(cg->clone_into_fd(), 0);
      } else {
        EXPECT_EQ(cg->clone_into_fd(), -1);
        if (is_dir(dir) && std::ifstream(dir + "/memory.limit_in_bytes")) {
          EXPECT_EQ(trim(slurp(dir + "/memory.limit_in_bytes")), "67108864");
          if (std::ifstream(dir + "/memory.memsw.limit_in_bytes")) {
            EXPECT_EQ(trim(slurp(dir + "/memory.memsw.limit_in_bytes")), "67108864");
          }
          mem = true;
        }
        if (std::ifstream(dir + "/pids.max")) {
          EXPECT_EQ(trim(slurp(dir + "/pids.max")), "16");
          pids = true;
        }
        if (std::ifstream(dir + "/cpu.cfs_quota_us")) {
          EXPECT_EQ(trim(slurp(dir + "/cpu.cfs_quota_us")), "50000");
          EXPECT_EQ(trim(slurp(dir + "/cpu.cfs_period_us")), "100000");
          cpu = true;
        }
      }
    }
    EXPECT_TRUE(mem && pids && cpu);
    if (dirs.front().starts_with("/sys/fs/cgroup/memory/")) {
      EXPECT_EQ(dirs.front(), "/sys/fs/cgroup/memory/exguardian/" + cg_name(id));
    }
  }
  for (const auto& dir : dirs) EXPECT_FALSE(is_dir(dir)) << dir;
}

TEST_F(CgroupReal, ForkBombStopsAtPidsMax) {
  std::string id = unique_id("pids");
  auto cg = Cgroup::create(id, test_limits());
  ASSERT_TRUE(cg) << cg.error().str();
  Held h = spawn_held([] {
    int hold[2];
    if (pipe(hold) != 0) return 98;
    int failed = 0;
    for (int i = 0; i < 40; ++i) {
      pid_t p = fork();
      if (p == 0) {
        close(hold[1]);
        char c;
        (void)!read(hold[0], &c, 1);  // EOF when the parent exits
        _exit(0);
      }
      if (p < 0 && errno == EAGAIN) ++failed;
    }
    return failed > 200 ? 200 : failed;
  });
  ASSERT_GT(h.pid, 0);
  release_inside(*cg, h, id);
  if (HasFatalFailure()) return;
  int st = wait_status(h.pid);
  ASSERT_TRUE(WIFEXITED(st)) << st;
  EXPECT_GT(WEXITSTATUS(st), 0);
  EXPECT_LT(WEXITSTATUS(st), 98);
  EXPECT_GT(cg->outcome().pids_max_hits, 0u);
  cg->kill_all();
  EXPECT_TRUE(cg->empty());
}

// cgroup v1: a child moves itself in through tasks files this process opened
// (process::spawn's way: no RCU grace period), even after dropping to another
// uid (the kernel checks the opener's credentials); then its pids limit holds.
TEST_F(CgroupReal, V1ChildMovesItselfInThroughOpenedTasksFiles) {
  std::string id = unique_id("self");
  Limits l;
  l.pids = 4;
  l.explicit_pids = true;
  auto cg = Cgroup::create(id, l);
  ASSERT_TRUE(cg) << cg.error().str();
  if (cg->v2()) GTEST_SKIP() << "cgroup v2: CLONE_INTO_CGROUP, no self-attach";
  auto fds = cg->open_self_attach();
  ASSERT_TRUE(fds) << fds.error().str();
  ASSERT_EQ(fds->size(), cg->dirs().size());
  std::vector<int> raw;
  for (auto& f : *fds) raw.push_back(f.get());
  Held h = spawn_held([&raw] {
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) return 90;
    if (Cgroup::attach_self(raw.data(), raw.size()) != 0) return 91;
    // pids.max 4: this process and three more; the next fork must fail.
    pid_t kids[8];
    int made = 0;
    for (int i = 0; i < 8; ++i) {
      pid_t c = fork();
      if (c == 0) {
        pause();
        _exit(0);
      }
      if (c < 0) break;
      kids[made++] = c;
    }
    for (int k = 0; k < made; ++k) kill(kids[k], SIGKILL);
    for (int k = 0; k < made; ++k) waitpid(kids[k], nullptr, 0);
    return made;
  });
  fds->clear();
  std::string cg_before = slurp("/proc/" + std::to_string(h.pid) + "/cgroup");
  EXPECT_FALSE(inside(h.pid, *cg, cg_name(id))) << "inside before it moved itself: " << cg_before;
  ASSERT_EQ(write(h.go, "g", 1), 1);
  close(h.go);
  int st = wait_status(h.pid);
  ASSERT_TRUE(WIFEXITED(st)) << "status " << st;
  EXPECT_EQ(WEXITSTATUS(st), 3) << "forks made inside (90: setresuid, 91: attach_self failed)";
  cg->kill_all();
  EXPECT_TRUE(cg->empty());
}

TEST_F(CgroupReal, MemoryHogIsOomKilled) {
  std::string id = unique_id("mem");
  auto cg = Cgroup::create(id, test_limits());
  ASSERT_TRUE(cg) << cg.error().str();
  Held h = spawn_held([] {
    const size_t n = 256ull << 20;
    char* p = static_cast<char*>(mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (p == MAP_FAILED) return 97;
    for (size_t i = 0; i < n; i += 4096) p[i] = 1;
    return 0;  // not killed: the limit did not hold
  });
  ASSERT_GT(h.pid, 0);
  release_inside(*cg, h, id);
  if (HasFatalFailure()) return;
  int st = wait_status(h.pid);
  ASSERT_TRUE(WIFSIGNALED(st)) << "status " << st;
  EXPECT_EQ(WTERMSIG(st), SIGKILL);
  auto o = cg->outcome();
  EXPECT_GE(o.oom_kills, 1u);
  EXPECT_GT(cg->memory_peak(), 32ull << 20);
  EXPECT_LE(cg->memory_peak(), 64ull << 20);
}

TEST_F(CgroupReal, KillAllAndDestroyWithLiveProcesses) {
  std::string id = unique_id("kill");
  std::vector<std::string> dirs;
  pid_t pid;
  {
    auto cg = Cgroup::create(id, test_limits());
    ASSERT_TRUE(cg) << cg.error().str();
    dirs = cg->dirs();
    Held h = spawn_held([] {
      for (int i = 0; i < 5; ++i)
        if (fork() == 0) break;
      pause();
      return 0;
    });
    pid = h.pid;
    release_inside(*cg, h, id);
    if (HasFatalFailure()) return;
    for (int i = 0; i < 200 && cg->empty(); ++i) usleep(1000);
    EXPECT_FALSE(cg->empty());
    // the destructor kills everything and removes the directories
  }
  int st = wait_status(pid);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << st;
  for (const auto& dir : dirs) EXPECT_FALSE(is_dir(dir)) << dir;
}

TEST_F(CgroupReal, SweepStaleRemovesDeadSupervisorsCgroups) {
  auto L = d::plan_layout();
  ASSERT_TRUE(L.usable);
  std::vector<std::string> fake, made_parent;
  for (const auto& b : L.bases) {
    if (mkdir(b.dir.c_str(), 0755) == 0) made_parent.push_back(b.dir);
    std::string f = b.dir + "/exg-999999999-x";
    ASSERT_EQ(mkdir(f.c_str(), 0755), 0) << f << ": " << strerror(errno);
    fake.push_back(f);
  }
  Cgroup::sweep_stale();
  for (const auto& f : fake) {
    EXPECT_FALSE(is_dir(f)) << f;
    rmdir(f.c_str());
  }
  for (const auto& p : made_parent) rmdir(p.c_str());
}

// A run's cgroup is made with the stale ones beside it swept on the way (in the
// layout it was given: the layout is read once a run), those of live
// supervisors kept.
TEST_F(CgroupReal, CreateSweepsDeadSupervisorsCgroupsInItsBases) {
  auto L = d::plan_layout();
  ASSERT_TRUE(L.usable);
  std::vector<std::string> fake, live, made_parent;
  for (const auto& b : L.bases) {
    if (mkdir(b.dir.c_str(), 0755) == 0) made_parent.push_back(b.dir);
    std::string f = b.dir + "/exg-999999997-x";
    ASSERT_EQ(mkdir(f.c_str(), 0755), 0) << f << ": " << strerror(errno);
    fake.push_back(f);
    std::string l = b.dir + "/exg-" + std::to_string(getpid()) + "-alive";  // a live pid: kept
    ASSERT_EQ(mkdir(l.c_str(), 0755), 0) << l << ": " << strerror(errno);
    live.push_back(l);
  }
  {
    auto cg = Cgroup::create_in(L, unique_id("sweep"), Limits{});
    ASSERT_TRUE(cg) << cg.error().str();
  }
  for (const auto& f : fake) {
    EXPECT_FALSE(is_dir(f)) << f << " stayed";
    rmdir(f.c_str());
  }
  for (const auto& l : live) {
    EXPECT_TRUE(is_dir(l)) << l << " was swept while its supervisor lives";
    rmdir(l.c_str());
  }
  for (const auto& p : made_parent) rmdir(p.c_str());
}

// The shared "exguardian" parents go with the last cgroup in them, also one
// this run did not make (left by a run that ended beside another), and one of
// a hierarchy this run does not use goes at once: none stays to sum up the
// counters of every later sandbox.
TEST_F(CgroupReal, AnEmptyParentGoesWithTheLastCgroupWhoeverMadeIt) {
  auto L = d::plan_layout();
  ASSERT_TRUE(L.usable);
  std::vector<std::string> parents;
  for (const auto& b : L.bases) {
    (void)mkdir(b.dir.c_str(), 0755);  // there before the run, as another run leaves it
    if (is_dir(b.dir)) parents.push_back(b.dir);
  }
  ASSERT_FALSE(parents.empty());
  {
    auto a = Cgroup::create_in(L, unique_id("parent-a"), Limits{});
    ASSERT_TRUE(a) << a.error().str();
    {
      auto b = Cgroup::create_in(L, unique_id("parent-b"), Limits{});
      ASSERT_TRUE(b) << b.error().str();
    }
    ASSERT_FALSE(a->dirs().empty());
    for (const auto& dir : a->dirs()) {
      std::string p = dir.substr(0, dir.rfind('/'));
      EXPECT_TRUE(is_dir(p)) << p << " removed while a cgroup is in it";
    }
  }
  for (const auto& p : parents) {
    EXPECT_FALSE(is_dir(p)) << p << " left after the last cgroup in it";
    rmdir(p.c_str());
  }
}

// The end of a run: an empty cgroup is removed on the spot (and the Cgroup is
// inactive); one that still holds a process has it killed first, and goes.
TEST_F(CgroupReal, EndRemovesAnEmptyCgroupAndKillsWhatIsLeft) {
  {
    auto cg = Cgroup::create(unique_id("end"), test_limits());
    ASSERT_TRUE(cg) << cg.error().str();
    auto dirs = cg->dirs();
    ASSERT_FALSE(dirs.empty());
    cg->end();
    EXPECT_FALSE(cg->active());
    for (const auto& dir : dirs) EXPECT_FALSE(is_dir(dir)) << dir;
  }
  std::string id = unique_id("endkill");
  auto cg = Cgroup::create(id, test_limits());
  ASSERT_TRUE(cg) << cg.error().str();
  expect_end_kills_and_removes(std::move(*cg), id, pause_after_forks<0>, [](Cgroup& c) { c.end(); });
}

// A run's cgroup on v1 without the freezer hierarchy (no one pauses it): a
// fork bomb inside is still ended, and from the kill on no fork succeeds
// there (what the freezer gave: the processes left only become fewer).
TEST_F(CgroupReal, V1WithoutFreezerKillStopsAForkBomb) {
  auto L = d::plan_layout();
  if (L.v2) GTEST_SKIP() << "cgroup v2: cgroup.kill";
  std::string id = unique_id("nofrz");
  auto cg = Cgroup::create_in(L, id, test_limits(), /*freezer=*/false);
  ASSERT_TRUE(cg) << cg.error().str();
  for (const auto& dir : cg->dirs()) EXPECT_EQ(dir.find("/freezer/"), std::string::npos) << dir;
  EXPECT_EQ(cg->dirs().size(), 3u);  // memory, pids, cpu (a cpus limit)
  expect_end_kills_and_removes(std::move(*cg), id, fork_for_ever, [](Cgroup& c) {
    usleep(20000);  // the bomb at its limit
    c.end();
  });
  // Far below the limit (one process, killed): a fork after the kill is refused.
  std::string id2 = unique_id("nofrz2");
  auto cg2 = Cgroup::create_in(L, id2, test_limits(), /*freezer=*/false);
  ASSERT_TRUE(cg2) << cg2.error().str();
  expect_end_kills_and_removes(std::move(*cg2), id2, pause_after_forks<0>, [&id2](Cgroup& c) {
    c.kill_all();
    ASSERT_TRUE(c.empty());
    Held late = spawn_held([] {
      pid_t p = fork();
      if (p == 0) _exit(0);
      return p < 0 && errno == EAGAIN ? 0 : 1;
    });
    release_inside(c, late, id2);
    if (::testing::Test::HasFatalFailure()) return;
    int st = wait_status(late.pid);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "a fork succeeded after the kill: " << st;
  });
}

// The sweep takes only what is provably dead: a cgroup whose name carries a
// pid that is dead here (as for a supervisor in another pid namespace) stays
// while someone holds its lock, and goes once the lock is free.
TEST_F(CgroupReal, SweepStaleKeepsCgroupsWhoseLockIsHeld) {
  auto L = d::plan_layout();
  ASSERT_TRUE(L.usable);
  std::vector<std::string> fake, made_parent;
  std::vector<int> locks;
  for (const auto& b : L.bases) {
    if (mkdir(b.dir.c_str(), 0755) == 0) made_parent.push_back(b.dir);
    std::string f = b.dir + "/exg-999999998-held";
    ASSERT_EQ(mkdir(f.c_str(), 0755), 0) << f << ": " << strerror(errno);
    fake.push_back(f);
    int fd = open(f.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(flock(fd, LOCK_EX), 0);
    locks.push_back(fd);
  }
  Cgroup::sweep_stale();
  for (const auto& f : fake) EXPECT_TRUE(is_dir(f)) << f << " was swept while its lock was held";
  for (int fd : locks) close(fd);
  Cgroup::sweep_stale();
  for (const auto& f : fake) {
    EXPECT_FALSE(is_dir(f)) << f << " stayed after its lock was released";
    rmdir(f.c_str());
  }
  for (const auto& p : made_parent) rmdir(p.c_str());
}

// A Cgroup holds the lock on each of its directories from creation to removal.
TEST_F(CgroupReal, CreatedCgroupHoldsItsLock) {
  std::vector<std::string> dirs;
  {
    auto cg = Cgroup::create(unique_id("lock"), test_limits());
    ASSERT_TRUE(cg) << cg.error().str();
    dirs = cg->dirs();
    ASSERT_FALSE(dirs.empty());
    for (const auto& dir : dirs) {
      int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      ASSERT_GE(fd, 0) << dir;
      EXPECT_NE(flock(fd, LOCK_EX | LOCK_NB), 0) << dir << ": lock not held";
      EXPECT_EQ(errno, EWOULDBLOCK);
      close(fd);
    }
    Cgroup moved = std::move(*cg);  // the lock goes with the object
    for (const auto& dir : dirs) {
      int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      ASSERT_GE(fd, 0) << dir;
      EXPECT_NE(flock(fd, LOCK_EX | LOCK_NB), 0) << dir << ": lock lost in the move";
      close(fd);
    }
  }
  for (const auto& dir : dirs) EXPECT_FALSE(is_dir(dir)) << dir;
}

// The v2 code path on a v2 mount without controllers (the hybrid host's
// /sys/fs/cgroup/unified): an explicit limit is refused, a default one is
// skipped with a note, and cgroup.kill still takes everything down.
TEST_F(CgroupReal, V2WithoutControllers) {
  const std::string mnt = "/sys/fs/cgroup/unified";
  if (!std::ifstream(mnt + "/cgroup.controllers")) GTEST_SKIP() << "no " << mnt;
  auto ctrls = slurp(mnt + "/cgroup.subtree_control");
  if (ctrls.find("memory") != std::string::npos) GTEST_SKIP() << "memory is delegated there";
  d::Layout L;
  L.v2 = true;
  L.usable = true;
  L.why = "test";
  L.bases.push_back({{}, mnt + "/exguardian", false});
  Limits ex;
  ex.memory_bytes = 64ull << 20;
  ex.explicit_memory = true;
  auto bad = Cgroup::create_in(L, unique_id("v2x"), ex);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().str().find("memory"), std::string::npos) << bad.error().str();

  std::string id = unique_id("v2");
  auto cg = Cgroup::create_in(L, id, default_limits());
  ASSERT_TRUE(cg) << cg.error().str();
  ASSERT_TRUE(cg->active());
  EXPECT_GE(cg->notes().size(), 2u);  // memory and pids skipped
  EXPECT_GE(cg->clone_into_fd(), 0);
  expect_end_kills_and_removes(std::move(*cg), id, pause_after_forks<3>, [](Cgroup& c) { c.kill_all(); });
}

}  // namespace
}  // namespace exg::cgroup
