#include "evidence/suite.hpp"
#include "microvm/accel_probe.hpp"
#include "microvm/layer.hpp"
#include "microvm/guest_image.hpp"
#include "plan/private_tmp.hpp"
#include "util/mountinfo.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <grp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string_view>

#include "evidence/batch.hpp"
#include "evidence/catalog.hpp"
#include "evidence/foreign_sandbox.hpp"
#include "evidence/progress.hpp"
#include "evidence/world.hpp"
#include "doctor/advice.hpp"
#include "doctor/host_caps.hpp"
#include "util/json_parse.hpp"
#include "util/layer_kind.hpp"
#include "util/write_all.hpp"

namespace exg::evidence {
namespace fs = std::filesystem;

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::held: return "held";
    case Verdict::escaped: return "ESCAPED";
    case Verdict::failed: return "FAILED";
    case Verdict::skipped: return "skipped";
  }
  return "?";
}

static Verdict verdict_from(const std::string& s) {
  if (s == "held") return Verdict::held;
  if (s == "ESCAPED") return Verdict::escaped;
  if (s == "FAILED") return Verdict::failed;
  return Verdict::skipped;
}

int SuiteReport::count(Verdict v) const {
  int n = 0;
  for (const auto& p : probes) n += p.verdict == v;
  return n;
}

bool SuiteReport::passed() const {
  for (const auto& p : probes) {
    if (p.verdict == Verdict::escaped || p.verdict == Verdict::failed) return false;
    if (p.verdict == Verdict::skipped && p.required) return false;
  }
  return true;
}

namespace {
// "N held, N escaped, [N failed, ]N skipped (reasons)" over the probes of `layer` ("" = all).
std::string summary_of(const std::vector<ProbeResult>& all, const std::string& layer) {
  std::vector<ProbeResult> probes;
  for (const auto& p : all)
    if (layer.empty() || p.layer == layer) probes.push_back(p);
  auto count = [&](Verdict v) {
    int n = 0;
    for (const auto& p : probes) n += p.verdict == v;
    return n;
  };
  std::string s = std::to_string(count(Verdict::held)) + " held, " + std::to_string(count(Verdict::escaped)) +
                  " escaped, ";
  if (int f = count(Verdict::failed)) s += std::to_string(f) + " failed, ";
  int k = count(Verdict::skipped);
  s += std::to_string(k) + " skipped";
  if (k) {
    // Group the reasons: "3 x curl is not installed; ..."
    std::vector<std::pair<std::string, int>> why;
    int required = 0;
    for (const auto& p : probes) {
      if (p.verdict != Verdict::skipped) continue;
      required += p.required;
      bool found = false;
      for (auto& w : why) if (w.first == p.evidence) { ++w.second; found = true; }
      if (!found) why.emplace_back(p.evidence, 1);
    }
    s += " (";
    for (size_t i = 0; i < why.size(); ++i) {
      if (i) s += "; ";
      s += std::to_string(why[i].second) + " x " + why[i].first;
    }
    s += ")";
    if (required) s += "; " + std::to_string(required) + " of them required";
  }
  return s;
}
}  // namespace

std::string SuiteReport::summary_line() const { return summary_of(probes, ""); }
std::string SuiteReport::summary_line(const std::string& layer) const { return summary_of(probes, layer); }

std::vector<std::string> SuiteReport::layers() const {
  std::vector<std::string> r;
  for (const auto& p : probes)
    if (std::find(r.begin(), r.end(), p.layer) == r.end()) r.push_back(p.layer);
  return r;
}

std::vector<LayerPresence> layers_present() {
  auto in_path = [](const char* name) {
    const char* path = std::getenv("PATH");
    std::string p = path && *path ? path : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    size_t b = 0;
    while (b <= p.size()) {
      size_t e = p.find(':', b);
      if (e == std::string::npos) e = p.size();
      std::string d = p.substr(b, e - b);
      if (!d.empty() && ::access((d + "/" + name).c_str(), X_OK) == 0) return true;
      b = e + 1;
    }
    return false;
  };
  std::vector<LayerPresence> r;
  auto named = [](layer::Kind k) { return std::string(layer::name(k)); };
  r.push_back({named(layer::Kind::Process), true, true, ""});
  bool oci = in_path("crun") || in_path("runc");
  r.push_back({named(layer::Kind::Container), oci, oci, oci ? "" : "neither crun nor runc is installed"});
  bool gv = in_path("runsc");
  r.push_back({named(layer::Kind::Gvisor), gv, gv, gv ? "" : "runsc is not installed"});
  // Never part of --layer all, even where doctor says it is available: every
  // probe is a guest of its own (restored from a template, about a second each
  // under TCG, 79 s for the suite here), which would more than double the
  // demo's run and every test of all layers; `--layer microvm` runs it. Said
  // plainly in the report, not as "not present".
  bool vm = in_path("qemu-system-x86_64") && microvm::find_guest_image().has_value();
  // Never part of --layer all either: it is the layer for hosts that refuse namespaces (where
  // process, container and gVisor do not run at all), and weaker than each of them by design
  // (docs/layers.md); `--layer landlock` runs it where the kernel has Landlock ABI 6.
  {
    std::string ll_why;
    for (const auto& l : doctor::layer_status(doctor::probe_host()))
      if (l.name == layer::name(layer::Kind::Landlock)) ll_why = l.available ? "" : l.why;
    r.push_back({named(layer::Kind::Landlock), false, ll_why.empty(),
                 ll_why.empty() ? "runs here, but --layer all leaves it out on purpose: it is the layer for hosts that "
                                  "refuse namespaces; run it with `exguardian escape-test --layer landlock`"
                                : ll_why});
  }
  r.push_back({named(layer::Kind::Microvm), false, vm,
               vm ? "installed here, but --layer all leaves it out on purpose: each probe boots a guest of its own "
                    "(about a second each under TCG, over a minute for the suite); run it with "
                    "`exguardian escape-test --layer microvm`"
                  : "qemu-system-x86_64 or the guest image (built by make) is missing"});
  return r;
}

nlohmann::json to_json(const ProbeResult& r) {
  return {{"layer", r.layer},     {"id", r.id},                  {"category", r.category},      {"command", r.command},
          {"expectation", r.expectation}, {"required", r.required}, {"verdict", verdict_name(r.verdict)},
          {"evidence", r.evidence}, {"exit_status", r.exit_status}, {"timed_out", r.timed_out},
          {"output", r.output},   {"run_args", r.run_args},      {"seconds", r.seconds},
          {"shared_with", r.shared_with}};
}

ProbeResult probe_result_from_json(const nlohmann::json& j) {
  ProbeResult r;
  r.layer = j.value("layer", std::string(layer::name(layer::Kind::Process)));
  r.id = j.value("id", "");
  r.category = j.value("category", "");
  r.command = j.value("command", "");
  r.expectation = j.value("expectation", "");
  r.required = j.value("required", true);
  r.verdict = verdict_from(j.value("verdict", "skipped"));
  r.evidence = j.value("evidence", "");
  r.exit_status = j.value("exit_status", -1);
  r.timed_out = j.value("timed_out", false);
  r.output = j.value("output", std::vector<std::string>{});
  r.run_args = j.value("run_args", std::vector<std::string>{});
  r.seconds = j.value("seconds", 0.0);
  r.shared_with = j.value("shared_with", 0);
  return r;
}

nlohmann::json to_json(const SuiteReport& r) {
  nlohmann::json probes = nlohmann::json::array();
  for (const auto& p : r.probes) probes.push_back(to_json(p));
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : r.layers()) {
    nlohmann::json c = {{"layer", l}, {"line", r.summary_line(l)}};
    for (auto v : {Verdict::held, Verdict::escaped, Verdict::failed, Verdict::skipped}) {
      int n = 0;
      for (const auto& p : r.probes) n += p.layer == l && p.verdict == v;
      c[v == Verdict::escaped ? "escaped" : v == Verdict::failed ? "failed" : verdict_name(v)] = n;
    }
    layers.push_back(c);
  }
  return {{"tool", "exguardian escape-test"},
          {"started", r.started},
          {"exguardian", r.exguardian},
          {"layer", r.layer},
          {"policy_file", r.policy_file},
          {"run_args", r.run_args},
          {"warnings", r.warnings},
          {"world", {{"up", r.world_up}, {"why", r.world_why}}},
          {"summary",
           {{"line", r.summary_line()},
            {"held", r.count(Verdict::held)},
            {"escaped", r.count(Verdict::escaped)},
            {"failed", r.count(Verdict::failed)},
            {"skipped", r.count(Verdict::skipped)},
            {"total", r.probes.size()},
            {"passed", r.passed()}}},
          {"layers", layers},
          {"seconds", r.seconds},
          {"probes", probes},
          {"host", r.host}};
}

namespace {

std::string now_iso() {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string nonce() {
  std::random_device rd;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
  return buf;
}

bool write_file(const std::string& path, const std::string& text, mode_t mode = 0644) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  ::chmod(path.c_str(), mode);
  return static_cast<bool>(f);
}

std::string self_exe() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "/proc/self/exe";
  return std::string(buf, static_cast<size_t>(n));
}

// escape-test --layer microvm --run-arg=--microvm-root: the probes run as the guest's root.
bool guest_root_run(const std::string& layer, const std::vector<std::string>& run_args) {
  return layer == "microvm" && std::find(run_args.begin(), run_args.end(), "--microvm-root") != run_args.end();
}

bool tool_present(const std::string& name) {
  for (const char* d : {"/usr/local/bin", "/usr/bin", "/bin", "/usr/local/sbin", "/usr/sbin", "/sbin"})
    if (::access((std::string(d) + "/" + name).c_str(), X_OK) == 0) return true;
  return false;
}

const std::vector<std::string> kPath = {"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"};

// Runs argv on the host (setup only: git init), quietly. Returns the exit status.
int host_run(const std::vector<std::string>& argv, const std::string& cwd, const std::vector<std::string>& env) {
  pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    if (::chdir(cwd.c_str()) != 0) ::_exit(126);
    int nul = ::open("/dev/null", O_RDWR);
    ::dup2(nul, 0); ::dup2(nul, 1); ::dup2(nul, 2);
    std::vector<char*> a, e;
    for (auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    for (auto& s : env) e.push_back(const_cast<char*>(s.c_str()));
    e.push_back(nullptr);
    ::execvpe(a[0], a.data(), e.data());
    ::_exit(127);
  }
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

struct Setup {
  std::string dir, home, ws, canary, host_marker, leftover_marker;
  std::string sandbox_settings;  // {settings} of a foreign sandbox (SuiteOptions)
  std::string stdio_dir, stdin_file, stdio_marker;  // the stdio probe's (Context)
  std::vector<std::string> sibling_dirs;            // (Context; removed by remove_siblings)
  std::string sibling_secret, sibling_why;
  std::vector<std::string> canary_files;
  std::vector<std::string> env;  // for the `exguardian run` children
};

void plant(Setup& s) {
  const std::string& h = s.home;
  for (auto d : {"/.ssh", "/.aws", "/.config", "/.config/gcloud", "/.kube", "/.docker"}) ::mkdir((h + d).c_str(), 0755);
  const std::string& c = s.canary;
  auto put = [&](const std::string& rel, const std::string& text) {
    write_file(h + rel, text);
    s.canary_files.push_back(h + rel);
  };
  put("/.ssh/id_ed25519", "-----BEGIN OPENSSH PRIVATE KEY-----\n" + c + "\n-----END OPENSSH PRIVATE KEY-----\n");
  put("/.aws/credentials", "[default]\naws_access_key_id = AKIA" + c + "\naws_secret_access_key = " + c + "\n");
  put("/.netrc", "machine example.org login exg password " + c + "\n");
  put("/.git-credentials", "https://exg:" + c + "@github.com\n");
  put("/.config/gcloud/application_default_credentials.json", "{\"refresh_token\": \"" + c + "\"}\n");
  put("/.kube/config", "users:\n- name: x\n  user:\n    token: " + c + "\n");
  put("/.docker/config.json", "{\"auths\": {\"x\": {\"auth\": \"" + c + "\"}}}\n");
  put("/.npmrc", "//registry.npmjs.org/:_authToken=" + c + "\n");
  put("/.bashrc", "# the fake HOME's .bashrc (escape-test)\n");
}

void make_workspace(Setup& s, bool have_git) {
  const std::string& ws = s.ws;
  write_file(ws + "/README.md", "# escape-test workspace\n");
  std::vector<std::string> env = kPath;
  env.push_back("HOME=" + s.home);
  env.push_back("GIT_CONFIG_NOSYSTEM=1");
  auto init_repo = [&](const std::string& dir) {
    fs::create_directories(dir);
    if (have_git) {
      host_run({"git", "-c", "init.defaultBranch=main", "init", "-q", "."}, dir, env);
      host_run({"git", "config", "user.name", "escape-test"}, dir, env);
      host_run({"git", "config", "user.email", "escape-test@example.invalid"}, dir, env);
    } else {
      fs::create_directories(dir + "/.git/hooks");
      write_file(dir + "/.git/config", "[core]\n\trepositoryformatversion = 0\n");
      write_file(dir + "/.git/HEAD", "ref: refs/heads/main\n");
    }
    fs::create_directories(dir + "/.git/hooks");
    write_file(dir + "/.git/hooks/pre-commit", "#!/bin/sh\necho original-hook\n", 0755);
  };
  init_repo(ws);
  if (have_git) {
    host_run({"git", "add", "README.md"}, ws, env);
    host_run({"git", "-c", "core.hooksPath=/dev/null", "commit", "-q", "-m", "initial"}, ws, env);
  }
  init_repo(ws + "/vendor/lib");
  // Targets of the protected-move probes: a denyWrite file and a denyRead file
  // whose parent directories the sandbox tries to rename away.
  fs::create_directories(ws + "/config");
  write_file(ws + "/config/prod.yaml", "env: prod\n");
  fs::create_directories(ws + "/vault");
  write_file(ws + "/vault/key.txt", vault_marker(s.canary) + "\n");
  // For the planted-* probes: the nested repo names a hooks directory that does
  // not exist yet, and one of its hooks is a link to a file in the workspace.
  std::ofstream(ws + "/vendor/lib/.git/config", std::ios::app)
      << "[core]\n\thooksPath = ci-hooks\n\tfsmonitor = tools/fsmon.sh\n";
  // The script that core.fsmonitor names (the host's next `git status` there runs it).
  fs::create_directories(ws + "/vendor/lib/tools");
  write_file(ws + "/vendor/lib/tools/fsmon.sh", "#!/bin/sh\nexit 1\n", 0755);
  fs::create_directories(ws + "/tools");
  write_file(ws + "/tools/pre-push", "#!/bin/sh\nexit 0\n", 0755);
  fs::create_symlink("../../../../tools/pre-push", ws + "/vendor/lib/.git/hooks/pre-push");
  fs::create_directories(s.dir + "/extra");  // an --allow-write tree outside the workspace
}

// One of the notes the landlock layer prints at every start (docs/layers.md: no namespaces, what
// is read-only or unreadable there): said once in the report's header, not in each probe's output.
bool landlock_note(const std::string& l) {
  if (!l.starts_with("exguardian: ")) return false;
  return l.starts_with("exguardian: layer landlock: no namespaces") || l.starts_with("exguardian: the host's /tmp") ||
         l.starts_with("exguardian: protected names in the workspace") ||
         l.starts_with("exguardian: no transparent egress") || l.ends_with(" here (no mounts)") ||
         l.find(" is read-only here (") != std::string::npos || l.ends_with(" is unreadable here instead of its masked copy");
}

// The uid root's landlock-layer suite gives its trees to (run_layer): nobody's, which owns no
// file of the host's own, so the command it runs as reaches nothing by ownership.
constexpr uid_t kLandlockRootRunsAs = 65534;

// chown -R top to uid (its group too), symlinks themselves.
void give_tree(const std::string& top, uid_t uid) {
  std::error_code ec;
  (void)::lchown(top.c_str(), uid, uid);
  for (auto it = fs::recursive_directory_iterator(top, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    (void)::lchown(it->path().c_str(), uid, uid);
}

// A sibling sandbox of the same uid, as its files lie in the host's temporary trees: its private
// TMPDIR as the landlock layer names one (/tmp/exguardian-ID), a directory in /var/tmp and one in
// /dev/shm, each mode 0700 with a file `secret` (the sibling's secret), owned by `owner`, the uid
// the probes run as (so that only the sandbox, not the mode bits, stands between them). Outside
// the suite's directory: removed by remove_siblings, --keep or not.
void plant_siblings(Setup& s, uid_t owner, gid_t group) {
  s.sibling_secret = "EXGSIBLING-" + nonce();
  for (const std::string& dir : {plan::host_private_tmp("exgsib" + nonce()), "/var/tmp/exg-sibling." + nonce(),
                                 "/dev/shm/exg-sibling." + nonce()}) {
    std::string parent = dir.substr(0, dir.rfind('/'));
    if (::mkdir(dir.c_str(), 0700) != 0) {
      s.sibling_why += (s.sibling_why.empty() ? "" : "; ") + parent + ": " + std::strerror(errno);
      continue;
    }
    s.sibling_dirs.push_back(dir);
    write_file(dir + "/secret", s.sibling_secret + "\n", 0600);
    (void)::lchown((dir + "/secret").c_str(), owner, group);
    (void)::lchown(dir.c_str(), owner, group);
  }
}

void remove_siblings(const Setup& s) {
  for (const auto& d : s.sibling_dirs) {
    std::error_code ec;
    fs::remove_all(d, ec);
  }
}

// Every process whose argv holds `marker`, as "pid: cmdline".
std::vector<std::pair<pid_t, std::string>> processes_with(const std::string& marker) {
  std::vector<std::pair<pid_t, std::string>> r;
  DIR* d = ::opendir("/proc");
  if (!d) return r;
  while (auto* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    auto cmd = read_whole(std::string("/proc/") + e->d_name + "/cmdline");
    if (!cmd) continue;
    for (auto& ch : *cmd) if (ch == '\0') ch = ' ';
    if (cmd->find(marker) != std::string::npos) r.emplace_back(std::atoi(e->d_name), *cmd);
  }
  ::closedir(d);
  return r;
}

std::set<std::string> mount_points() {
  std::set<std::string> m;
  for (auto& e : util::read_mountinfo()) m.insert(std::move(e.mount_point));
  return m;
}

// exguardian's cgroup directories named after one of these supervisors: exg-<pid>-*.
std::vector<std::string> cgroups_of(const std::vector<pid_t>& pids) {
  std::vector<std::string> left;
  std::set<std::string> prefixes;
  for (pid_t p : pids) prefixes.insert("exg-" + std::to_string(p) + "-");
  std::vector<std::string> parents = {"/sys/fs/cgroup/exguardian"};
  if (DIR* d = ::opendir("/sys/fs/cgroup")) {
    while (auto* e = ::readdir(d))
      if (e->d_name[0] != '.') parents.push_back(std::string("/sys/fs/cgroup/") + e->d_name + "/exguardian");
    ::closedir(d);
  }
  for (const auto& par : parents) {
    DIR* d = ::opendir(par.c_str());
    if (!d) continue;
    while (auto* e = ::readdir(d)) {
      std::string n = e->d_name;
      auto dash = n.find('-', 4);
      if (n.starts_with("exg-") && dash != std::string::npos && prefixes.count(n.substr(0, dash + 1)))
        left.push_back(par + "/" + n);
    }
    ::closedir(d);
  }
  return left;
}

std::vector<std::string> head_lines(const std::string& s, size_t n) {
  std::vector<std::string> r;
  std::istringstream is(s);
  for (std::string l; r.size() < n && std::getline(is, l);) {
    if (l.size() > 300) l = l.substr(0, 297) + "...";
    r.push_back(l);
  }
  return r;
}

// ---------------------------------------------------------------- coordinator

struct Runner {
  const SuiteOptions& opts;
  const std::string& layer;
  const Setup& s;
  Context& ctx;
  std::string exe, world_log;
  std::vector<std::string> world_names;
  std::vector<pid_t> supervisors;
  int n = 0;

  Outcome run(const ProbeSpec& p, std::vector<std::string>& argv_out) {
    return run_command(p.id, p.run_args, p.command, p.timeout_s ? p.timeout_s : opts.probe_timeout_s, argv_out,
                       p.stdio_files);
  }

  // One sandbox for the probes of a batch, each its own process between markers the
  // shell prints (evidence/batch.hpp); each gets its own slice of the output, its exit
  // status and (tagged probes) the audit lines whose command is its tag. A probe whose end
  // marker is missing (the sandbox died or timed out in it or before it) gets no outcome:
  // it is listed in `unfinished`, for a sandbox of its own. `all`: the sandbox's own outcome.
  std::map<std::string, Outcome> run_batch(const std::vector<const ProbeSpec*>& ps, double& seconds,
                                           std::vector<std::string>& unfinished, Outcome& all) {
    std::vector<BatchProbe> bp;
    int longest = opts.probe_timeout_s;
    for (const auto* p : ps) {
      bp.push_back({p->command, p->tag_arg});
      longest = std::max(longest, p->timeout_s);
    }
    // Each probe is a fork or a short command: the sandbox's start dominates.
    int timeout_s = longest + static_cast<int>(ps.size()) / 2;
    std::vector<std::string> argv;
    auto t0 = std::chrono::steady_clock::now();
    all = run_command(ps.front()->batch + "-batch", {}, batch_script(bp), timeout_s, argv);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto slices = split_batch_output(all.out, ps.size());
    std::map<std::string, Outcome> by_id;
    for (size_t i = 0; i < ps.size(); ++i) {
      const auto& sl = slices[i];
      if (!sl.ended) {
        unfinished.push_back(ps[i]->id);
        continue;
      }
      Outcome o;
      o.status = sl.status;
      o.out = sl.out;
      if (ps[i]->tag_arg)
        for (const auto& j : all.audit)
          if (j.value("command", "") == batch_tag(i)) o.audit.push_back(j);
      by_id[ps[i]->id] = std::move(o);
    }
    return by_id;
  }

  Outcome run_command(const std::string& id, const std::vector<std::string>& run_args, const std::string& command,
                      int timeout_s, std::vector<std::string>& argv_out, bool stdio_files = false) {
    Outcome o;
    ++n;
    std::string audit = s.dir + "/logs/" + std::to_string(n) + "-" + id + ".audit.jsonl";
    std::string outp = (stdio_files ? s.stdio_dir : s.dir + "/logs") + "/" + std::to_string(n) + "-" + id + ".out";
    std::vector<std::string> argv;
    if (!opts.sandbox_name.empty()) {
      // A foreign sandbox (--sandbox): its own prefix (none: no prefix), no audit log, no run args of ours.
      argv = expand_placeholders(opts.sandbox_prefix, {s.ws, s.home, opts.probe_program, s.sandbox_settings});
    } else {
      // --quiet: each probe is judged from its own output and the audit log; the
      // run's refusal summary would only repeat the log (and shift the last line).
      argv = {exe, "run", "--quiet"};
      if (layer != layer::name(layer::Kind::Process)) { argv.push_back("--layer"); argv.push_back(layer); }
      if (!opts.policy_file.empty()) { argv.push_back("--policy"); argv.push_back(opts.policy_file); }
      for (auto& a : opts.run_args) argv.push_back(a);
      for (auto& d : world_names) { argv.push_back("--allow-domain"); argv.push_back(d); }
      argv.push_back("--audit-log");
      argv.push_back(audit);
      for (auto& a : run_args) argv.push_back(a);
      argv.push_back("--");
    }
    argv.push_back("sh");
    argv.push_back("-c");
    argv.push_back(command);
    argv_out = argv;
    std::vector<char*> a, e;
    for (auto& x : argv) a.push_back(x.data());
    a.push_back(nullptr);
    for (auto& x : s.env) e.push_back(const_cast<char*>(x.c_str()));
    e.push_back(nullptr);
    off_t world_before = 0;
    struct stat st{};
    if (!world_log.empty() && ::stat(world_log.c_str(), &st) == 0) world_before = st.st_size;

    // stdio_files: appended to (as `>> log` would), after a first line of the harness's own,
    // mode 0666 like the stdin file, so that only the sandbox keeps the probe from them.
    int out_fd = ::open(outp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | (stdio_files ? O_APPEND : 0), 0644);
    if (stdio_files && out_fd >= 0) {
      (void)::fchmod(out_fd, 0666);
      (void)write_all(out_fd, s.stdio_marker + "\n");
    }
    pid_t pid = ::fork();
    if (pid == 0) {
      if (::chdir(s.ws.c_str()) != 0) ::_exit(126);
      int nul = ::open(stdio_files ? s.stdin_file.c_str() : "/dev/null", O_RDONLY);
      ::dup2(nul, 0);
      ::dup2(out_fd, 1);
      ::dup2(out_fd, 2);
      if (opts.sandbox_name.empty()) ::execve(exe.c_str(), a.data(), e.data());
      else ::execvpe(a[0], a.data(), e.data());
      ::_exit(127);
    }
    ::close(out_fd);
    if (pid < 0) {
      o.out = std::string("fork: ") + std::strerror(errno);
      return o;
    }
    supervisors.push_back(pid);
    int pfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (pfd >= 0) {
      pollfd pl{pfd, POLLIN, 0};
      int r;
      while ((r = ::poll(&pl, 1, timeout_s * 1000)) < 0 && errno == EINTR) {}
      if (r == 0) {
        o.timed_out = true;
        ::kill(pid, SIGKILL);
      }
      ::close(pfd);
    }
    int wst = 0;
    while (::waitpid(pid, &wst, 0) < 0 && errno == EINTR) {}
    o.status = WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);
    o.out = read_whole(outp).value_or("");
    if (stdio_files) {
      o.stdio_marker_kept = o.out.starts_with(s.stdio_marker + "\n");
      if (o.stdio_marker_kept) o.out.erase(0, s.stdio_marker.size() + 1);
    }
    // exguardian's own warnings about a deliberately weakened sandbox are in the
    // report's header; judge the command's output without them.
    {
      std::string kept, line;
      std::istringstream is(o.out);
      while (std::getline(is, line))
        // (and the microVM layer's caution that egress is not carried into the guest: in the header too)
        if (!line.starts_with("exguardian: WARNING: sandbox weakened") &&
            !line.starts_with("exguardian: microvm: egress is not carried") &&
            !(layer == layer::name(layer::Kind::Landlock) && landlock_note(line)))
          kept += line + "\n";
      o.out = kept;
    }
    // Keep the beginning and the end (exguardian's own report comes last).
    if (o.out.size() > 65536) o.out = o.out.substr(0, 32768) + "\n...\n" + o.out.substr(o.out.size() - 32768);
    std::ifstream af(audit);
    for (std::string l; std::getline(af, l);) {
      auto j = parse_json(l);
      if (!j.is_discarded()) o.audit.push_back(std::move(j));
    }
    if (!world_log.empty()) {
      // What the servers received up to the mark sent now (a datagram still on its way
      // when the probe's process ended is in the log before the mark: world_mark).
      size_t mark = world_mark(world_log, static_cast<unsigned>(n));
      auto w = read_whole(world_log).value_or("");
      if (mark != std::string::npos && mark < w.size()) w.resize(mark);
      if (static_cast<off_t>(w.size()) > world_before) o.world_log = w.substr(static_cast<size_t>(world_before));
    }
    return o;
  }
};

[[noreturn]] void coordinator(const SuiteOptions& opts, const std::string& layer, const Setup& s, int leaked_fd,
                              pid_t marker_pid, const std::string& results_path) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  nlohmann::json res;
  Progress progress(progress_wanted(opts.verbose), stderr, layer, 0);
  progress.now("building the test world");
  TestWorld world;
  std::string why;
  bool up = world.build(s.dir, why);
  res["world"] = {{"up", up}, {"why", why}};

  Context ctx;
  ctx.canary = s.canary;
  ctx.home = s.home;
  ctx.ws = s.ws;
  ctx.host_marker = s.host_marker;
  ctx.host_marker_pid = marker_pid;
  ctx.leftover_marker = s.leftover_marker;
  ctx.extra_tree = s.dir + "/extra";
  ctx.leaked_fd = leaked_fd;
  ctx.stdio_dir = s.stdio_dir;
  ctx.stdin_file = s.stdin_file;
  ctx.stdio_marker = s.stdio_marker;
  ctx.sibling_dirs = s.sibling_dirs;
  ctx.sibling_secret = s.sibling_secret;
  ctx.sibling_why = s.sibling_why;
  ctx.exe = self_exe();
  ctx.world_up = up;
  ctx.world_why = why;
  ctx.as_root = ::geteuid() == 0;
  ctx.layer = layer;
  ctx.guest_root = guest_root_run(layer, opts.run_args);
  for (auto t : {"curl", "gcc", "python3", "bash", "git", "podman"}) ctx.tools[t] = tool_present(t);
  // A host service on a pathname Unix socket the sandbox can see (in HOME, like an agent's socket).
  ctx.host_socket_log = s.dir + "/logs/unix-listener.log";
  if (start_unix_listener(s.home + "/.exg-agent.sock", ctx.host_socket_log, ctx.host_socket_why) > 0) {
    // The control: the listener answers a client on the host (so a refusal inside is the sandbox's).
    if (host_unix_connect(s.home + "/.exg-agent.sock", ctx.host_socket_log)) ctx.host_socket = s.home + "/.exg-agent.sock";
    else ctx.host_socket_why = "the listener on " + s.home + "/.exg-agent.sock did not log a host client";
  }
  // One bound only after the sandbox started (issue 39, 1: the start-time masks cannot know it).
  ctx.late_socket_log = s.dir + "/logs/late-unix-listener.log";
  ctx.late_socket_trigger = s.ws + "/.exg-bind-now";
  if (start_late_unix_listener(s.ws + "/.exg-late.sock", s.ws + "/.exg-late.dgram", ctx.late_socket_trigger,
                               ctx.late_socket_log, ctx.late_socket_why) > 0) {
    ctx.late_socket = s.ws + "/.exg-late.sock";
    ctx.late_dgram = s.ws + "/.exg-late.dgram";
  }
  for (auto& f : s.canary_files) ctx.files.remember(f);
  ctx.targets.remember(s.home + "/escape-test");
  ctx.targets.remember(s.ws + "/.git/hooks/pre-commit");
  ctx.targets.remember(s.stdin_file);
  ctx.files.remember(s.ws + "/.git/hooks/pre-commit");
  ctx.files.remember(s.ws + "/.git/config");

  Runner runner{opts, layer, s, ctx, ctx.exe, up ? world.log_path() : "", up ? TestWorld::allowed_names() : std::vector<std::string>{}};
  auto specs = build_catalog(ctx);
  const bool foreign = !opts.sandbox_name.empty();
  // No sandbox: nothing gates the destructive probes but their own safety (adapt_for_foreign
  // has not run the unsafe ones); the gate's row says there is no sandbox.
  const bool no_sandbox = opts.sandbox_name == kNoSandbox;
  if (foreign)
    adapt_for_foreign(specs, ctx, expand_placeholders(opts.probe_inside, {s.ws, s.home, opts.probe_program, s.sandbox_settings}), no_sandbox);
  // The exguardian binary is no target inside a foreign sandbox (persist-exguardian-binary is not
  // applicable there), and its 200 MB would be read again after every probe (remember_again below).
  if (foreign) ctx.targets.forget(ctx.exe);
  if (!opts.only.empty())
    std::erase_if(specs, [&](const ProbeSpec& p) {
      return p.id != "sandbox-in-place" && std::find(opts.only.begin(), opts.only.end(), p.id) == opts.only.end();
    });
  progress.set_total(static_cast<int>(specs.size()));
  bool in_place = false;
  std::string not_in_place;
  nlohmann::json probes = nlohmann::json::array();
  // Batched probes' outcomes, by id, filled when the first of their batch is reached.
  std::map<std::string, Outcome> batched;
  std::vector<std::string> warnings;  // for the report's header
  std::set<std::string> alone;        // batched, but its batch's sandbox ended before it did
  std::map<std::string, std::pair<double, int>> batch_time;  // batch -> (seconds, size)
  std::set<std::string> batches_run;
  for (auto& p : specs) {
    ProbeResult r;
    r.layer = layer;
    r.id = p.id;
    r.category = p.category;
    r.command = p.command;
    r.expectation = p.expectation;
    r.required = p.required;
    r.run_args = p.run_args;
    if (!p.skip_why.empty()) {
      r.evidence = p.skip_why;
    } else if (p.needs_world && !up) {
      r.evidence = "no test world (" + why + "); network probes never touch a real address";
    } else if (!not_in_place.empty()) {
      r.evidence = not_in_place;
    } else if (p.destructive && !in_place && !no_sandbox) {
      r.evidence = "the sandbox was not seen in place (sandbox-in-place did not hold)";
    } else {
      Outcome o;
      progress.now(p.batch.empty() || alone.count(p.id) ? p.id : p.batch + " batch");
      if (!p.batch.empty()) {
        if (batches_run.insert(p.batch).second) {
          // Everything that gates this probe gates the rest of its batch alike (they
          // are neither destructive nor world probes, and none has a skip of its own
          // that is not checked here).
          std::vector<const ProbeSpec*> members;
          for (const auto& q : specs)
            if (q.batch == p.batch && q.skip_why.empty()) members.push_back(&q);
          double secs = 0;
          std::vector<std::string> unfinished;
          Outcome all;
          batched.merge(runner.run_batch(members, secs, unfinished, all));
          batch_time[p.batch] = {secs, static_cast<int>(members.size())};
          if (!unfinished.empty()) {
            // What stopped the shared sandbox is found again by the probe that caused it, in a
            // sandbox of its own, and not blamed on its neighbours; those that finished keep theirs.
            std::string how = all.timed_out ? std::string("timed out") : "exit " + std::to_string(all.status);
            warnings.push_back("the " + p.batch + " batch's sandbox ended (" + how + ") before " + std::to_string(unfinished.size()) + " of its " +
                               std::to_string(members.size()) + " probes had ended, first " + unfinished.front() +
                               ": they ran again, one per sandbox");
            alone.insert(unfinished.begin(), unfinished.end());
          } else if (all.status != 0 || all.timed_out) {
            // Every probe ended and the script's last word is exit 0: anything else is exguardian's
            // own report on the sandbox (a post-run sweep's 123: something was planted), which no
            // probe's slice shows. Not attributable to one probe: it fails the run as the batch's.
            ProbeResult b;
            b.layer = layer;
            b.id = p.batch + "-batch";
            b.category = "sandbox";
            b.command = "(the " + std::to_string(members.size()) + " probes of the " + p.batch + " batch, one sandbox)";
            b.expectation = "the shared sandbox ends with the script's own exit 0 once every probe has ended";
            b.verdict = Verdict::failed;
            b.exit_status = all.status;
            b.timed_out = all.timed_out;
            std::string last;
            std::istringstream is(all.out);
            for (std::string l; std::getline(is, l);)
              if (l.starts_with("exguardian: ")) last = l;
            b.evidence = (all.timed_out ? std::string("timed out") : "exit " + std::to_string(all.status)) +
                         " after every probe ended" + (last.empty() ? "" : ": " + last);
            b.output = head_lines(all.out.substr(all.out.size() > 2000 ? all.out.size() - 2000 : 0), 6);
            if (opts.verbose)
              std::fprintf(stderr, "escape-test: %-8s %-34s %s\n", verdict_name(b.verdict), b.id.c_str(), b.evidence.c_str());
            progress.done(b);
            probes.push_back(to_json(b));
          }
        }
        if (!alone.count(p.id)) {
          o = batched.at(p.id);
          auto [secs, size] = batch_time[p.batch];
          r.seconds = secs / std::max(size, 1);
          r.shared_with = size - 1;
        } else {
          std::vector<std::string> argv;
          auto t0 = std::chrono::steady_clock::now();
          o = runner.run(p, argv);
          r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
      } else {
        std::vector<std::string> argv;
        auto t0 = std::chrono::steady_clock::now();
        o = runner.run(p, argv);
        r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
      Judgement j = p.judge(o);
      r.verdict = j.verdict;
      r.evidence = j.evidence;
      r.exit_status = o.status;
      r.timed_out = o.timed_out;
      r.output = head_lines(o.out, 6);
      if (j.verdict == Verdict::skipped) r.required = false;
      if (p.id == "sandbox-in-place") {
        in_place = j.verdict == Verdict::held;
        // exguardian could not set the sandbox up at all (a bad policy, a missing
        // kernel feature): every other probe would only repeat that.
        if (o.status == 125) not_in_place = "exguardian run could not set up the sandbox (125): " + (r.output.empty() ? std::string("no output") : r.output.front());
        if (foreign && !in_place && !no_sandbox) not_in_place = "the foreign sandbox was not seen in place: " + j.evidence;
      }
      // A foreign sandbox may let a probe change what the next ones compare (a hook, a
      // canary): each judge sees only its own probe's changes (the cleanup rows see them all).
      // A batch's members (next to each other: group_batches) all ran before the first was
      // judged: the reference is taken again after the last, so each sees its own target's change.
      const size_t at = static_cast<size_t>(&p - specs.data());
      const bool batch_goes_on = !p.batch.empty() && at + 1 < specs.size() && specs[at + 1].batch == p.batch;
      if (foreign && !batch_goes_on) {
        ctx.files.remember_again();
        ctx.targets.remember_again();
      }
    }
    if (opts.verbose)
      std::fprintf(stderr, "escape-test: %-8s %-34s %s\n", verdict_name(r.verdict), r.id.c_str(), r.evidence.c_str());
    progress.done(r);
    probes.push_back(to_json(r));
  }
  progress.finish();
  res["probes"] = probes;
  res["supervisors"] = runner.supervisors;
  res["warnings"] = warnings;
  std::ofstream f(results_path);
  f << res.dump();
  f.close();
  ::_exit(f ? 0 : 1);
}


// One layer's run of the suite: its own workspace, fake HOME, world and host
// checks; appends its probes (tagged with the layer) to `report`.
int run_layer(const SuiteOptions& opts, const std::string& layer, bool all_layers, SuiteReport& report) {
  Setup s;
  char tmpl[] = "/tmp/exg-escape.XXXXXX";
  if (!::mkdtemp(tmpl)) {
    std::fprintf(stderr, "exguardian: escape-test: mkdtemp: %s\n", std::strerror(errno));
    return 125;
  }
  s.dir = tmpl;
  ::chmod(s.dir.c_str(), 0755);
  s.home = s.dir + "/home";
  s.ws = s.dir + "/workspace";
  fs::create_directories(s.home);
  fs::create_directories(s.ws);
  fs::create_directories(s.dir + "/logs");
  s.canary = "EXGCANARY-" + nonce();
  s.host_marker = "EXGMARK-" + nonce();
  s.leftover_marker = "EXGLEFT-" + nonce();
  plant(s);
  // The stdio probe's stdin and output files, mode 0666 in a directory anyone may write: only
  // the sandbox stands between the probe and them.
  s.stdio_dir = s.home + "/stdio";
  s.stdin_file = s.stdio_dir + "/setup.sh";
  s.stdio_marker = "EXGSTDOUT-" + nonce();
  fs::create_directories(s.stdio_dir);
  ::chmod(s.stdio_dir.c_str(), 0777);
  write_file(s.stdin_file, "#!/bin/sh\necho setup EXGSTDIN-" + nonce() + "\n", 0666);
  make_workspace(s, tool_present("git"));
  // A foreign sandbox's settings file: the user's, else the preset's default, in the run's
  // directory (outside the workspace and the fake HOME: not the probes' to change).
  s.sandbox_settings = opts.sandbox_settings;
  if (s.sandbox_settings.empty() && !opts.sandbox_default_settings.empty()) {
    s.sandbox_settings = s.dir + "/sandbox-settings.json";
    write_file(s.sandbox_settings, opts.sandbox_default_settings, 0644);
  }
  report.workspace = s.ws;
  report.home = s.home;
  s.env = kPath;
  // Quarantined files (the planted-* probes) go to the suite's own directory,
  // removed with it, not to /var/tmp (where --allow-write HOME would send them).
  ::mkdir((s.dir + "/state").c_str(), 0700);
  s.env.push_back("XDG_STATE_HOME=" + s.dir + "/state");
  for (auto v : {"HOME=" + s.home, std::string("LANG=C.UTF-8"), std::string("TERM=dumb"),
                 "GITHUB_TOKEN=" + s.canary, "AWS_SECRET_ACCESS_KEY=" + s.canary, "OPENAI_API_KEY=" + s.canary,
                 "ANTHROPIC_API_KEY=" + s.canary, "EXG_ESCAPE_PLAIN=" + s.canary})
    s.env.push_back(v);

  if (opts.sandbox_name == kNoSandbox) {
    // No sandbox: no private /tmp either; what a probe writes there (work-tmp) goes to the suite's own.
    ::mkdir((s.dir + "/tmp").c_str(), 0700);
    s.env.push_back("TMPDIR=" + s.dir + "/tmp");
  }
  if (opts.sandbox_name.empty() && layer == layer::name(layer::Kind::Microvm))
    // The microVM layer's own settings (EXG_MICROVM_IMAGE_DIR: where the guest image is, when not
    // beside exguardian; the scratch disk's and the templates' directories) reach its runs.
    for (char** e = environ; *e; ++e)
      if (std::string_view(*e).starts_with("EXG_MICROVM_")) s.env.push_back(*e);
  if (!opts.sandbox_name.empty())
    // A foreign sandbox's own configuration (podman's CONTAINERS_CONF, ...) reaches its wrapper.
    for (char** e = environ; *e; ++e)
      for (const char* keep : {"CONTAINERS_", "XDG_RUNTIME_DIR=", "DOCKER_HOST="})
        if (std::string_view(*e).starts_with(keep)) s.env.push_back(*e);

  // The landlock layer runs root's command as the workspace's owner and refuses a workspace root
  // owns (docs/layers.md, landlock, 4): as root, the workspace, the fake HOME (canaries, stdio
  // files) and the --allow-write tree go to an unprivileged uid, the command's, so that the layer's
  // walls and not file ownership keep the probes from them; the host's marker process runs as it
  // too, so that only Landlock's scoping refuses it a signal.
  uid_t runs_as = 0;
  if (::geteuid() == 0 && opts.sandbox_name.empty() && layer == layer::name(layer::Kind::Landlock)) {
    runs_as = kLandlockRootRunsAs;
    for (const auto& top : {s.ws, s.home, s.dir + "/extra"}) give_tree(top, runs_as);
  }
  plant_siblings(s, runs_as != 0 ? runs_as : ::geteuid(), runs_as != 0 ? runs_as : ::getegid());

  HostFiles host_files;
  for (auto& f : s.canary_files) host_files.remember(f);
  host_files.remember(s.ws + "/.git/hooks/pre-commit");
  host_files.remember(s.ws + "/vendor/lib/.git/hooks/pre-commit");
  auto mounts_before = mount_points();

  // A host process the sandbox must not see, with the marker as its argv[0].
  pid_t marker = ::fork();
  if (marker == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (runs_as != 0 && (::setgroups(0, nullptr) != 0 || ::setresgid(runs_as, runs_as, runs_as) != 0 ||
                         ::setresuid(runs_as, runs_as, runs_as) != 0))
      ::_exit(126);
    int nul = ::open("/dev/null", O_RDWR);
    ::dup2(nul, 0); ::dup2(nul, 1); ::dup2(nul, 2);
    const char* sleep_bin = ::access("/bin/sleep", X_OK) == 0 ? "/bin/sleep" : "/usr/bin/sleep";
    ::execl(sleep_bin, s.host_marker.c_str(), "600", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // An fd on a canary file, inherited (no O_CLOEXEC) by every exguardian run.
  int leaked = -1;
  {
    int fd = ::open((s.home + "/.ssh/id_ed25519").c_str(), O_RDONLY);
    if (fd >= 0) {
      leaked = ::fcntl(fd, F_DUPFD, 40);
      ::close(fd);
    }
  }

  const std::string results_path = s.dir + "/results.json";
  std::fflush(nullptr);
  pid_t coord = ::fork();
  if (coord == 0) coordinator(opts, layer, s, leaked, marker, results_path);
  if (leaked >= 0) ::close(leaked);
  int st = 0;
  if (coord > 0)
    while (::waitpid(coord, &st, 0) < 0 && errno == EINTR) {}

  auto res = parse_json(read_whole(results_path).value_or("{}"));
  std::vector<pid_t> supervisors;
  const std::string tag = all_layers ? layer + " layer: " : "";
  if (res.is_discarded() || !res.contains("probes")) {
    report.warnings.push_back(tag + "the coordinator did not report (status " + std::to_string(st) + ")");
    ProbeResult r;
    r.layer = layer;
    r.id = "coordinator";
    r.category = "suite";
    r.verdict = Verdict::failed;
    r.evidence = "the escape test's coordinator died before reporting";
    report.probes.push_back(r);
  } else {
    report.world_up = res["world"].value("up", false);
    report.world_why = res["world"].value("why", "");
    for (auto& j : res["probes"]) report.probes.push_back(probe_result_from_json(j));
    supervisors = res.value("supervisors", std::vector<pid_t>{});
    for (const auto& w : res.value("warnings", std::vector<std::string>{})) report.warnings.push_back(tag + w);
  }
  if (!report.world_up) report.warnings.push_back(tag + "no network test world: " + report.world_why);

  // ---- After the sandboxes ended: nothing of them remains on the host.
  auto add_cleanup = [&](std::string id, std::string expectation, Verdict v, std::string evidence) {
    ProbeResult r;
    r.layer = layer;
    r.id = std::move(id);
    r.category = "cleanup";
    r.command = "(checked on the host after every sandbox ended)";
    r.expectation = std::move(expectation);
    r.verdict = v;
    r.evidence = std::move(evidence);
    report.probes.push_back(std::move(r));
  };
  std::vector<std::pair<pid_t, std::string>> left;
  for (int i = 0; i < 20; ++i) {  // a dying sandbox may take a moment
    left = processes_with(s.leftover_marker);
    if (left.empty()) break;
    ::usleep(100000);
  }
  if (left.empty())
    add_cleanup("cleanup-processes", "no process the sandboxes started survives them (setsid, double fork, nohup)",
                Verdict::held, "no process with the probe's marker in its argv on the host");
  else {
    add_cleanup("cleanup-processes", "no process the sandboxes started survives them", Verdict::escaped,
                std::to_string(left.size()) + " survived, e.g. pid " + std::to_string(left[0].first) + ": " + left[0].second);
    for (auto& [pid, _] : left) ::kill(pid, SIGKILL);
  }
  auto cg = cgroups_of(supervisors);
  if (!opts.sandbox_name.empty()) {
    add_cleanup("cleanup-cgroups", "no cgroup of a finished sandbox remains", Verdict::skipped,
                std::string(kNotApplicable) + "the exg-<pid>-* cgroups are ExGuardian's supervisors'; a foreign sandbox names its own");
    report.probes.back().required = false;
  } else {
    add_cleanup("cleanup-cgroups", "no cgroup of a finished sandbox remains",
                cg.empty() ? Verdict::held : Verdict::escaped,
                cg.empty() ? "no exg-<pid>-* cgroup of the " + std::to_string(supervisors.size()) + " supervisors remains"
                           : "left: " + cg.front());
  }
  auto mounts_after = mount_points();
  std::vector<std::string> ours;
  for (auto& m : mounts_after)
    if (!mounts_before.count(m) && (m.find("exguardian") != std::string::npos || m.starts_with(s.dir) ||
                                    m.find("exg") != std::string::npos) &&
        !m.starts_with("/run/netns/exgw-"))  // the integration tests' egress world (egress_world.sh), not ours
      ours.push_back(m);
  add_cleanup("cleanup-mounts", "no mount of a sandbox remains in the host's mount namespace",
              ours.empty() ? Verdict::held : Verdict::escaped,
              ours.empty() ? "host mounts: " + std::to_string(mounts_before.size()) + " before, " +
                                 std::to_string(mounts_after.size()) + " after; none of ours"
                           : "left: " + ours.front());
  auto changed = host_files.any_changed();
  add_cleanup("cleanup-canaries", "the canary files and hooks are unchanged on the host",
              changed.empty() ? Verdict::held : Verdict::escaped,
              changed.empty() ? std::to_string(s.canary_files.size()) + " canary files and 2 hooks unchanged (SHA-256)" : changed);
  if (process_running(marker))
    add_cleanup("cleanup-host-marker", "the host's marker process was untouched by the sandboxes", Verdict::held,
                "pid " + std::to_string(marker) + " alive until escape-test ended it");
  else
    add_cleanup("cleanup-host-marker", "the host's marker process was untouched by the sandboxes", Verdict::escaped,
                "pid " + std::to_string(marker) + " was killed");
  ::kill(marker, SIGKILL);
  ::waitpid(marker, nullptr, 0);

  remove_siblings(s);
  if (opts.keep) {
    report.warnings.push_back(tag + "kept: " + s.dir + " (workspace, fake HOME, per-probe output and audit logs)");
  } else {
    std::error_code ec;
    fs::remove_all(s.dir, ec);
  }
  return 0;
}

}  // namespace

int run_suite(const SuiteOptions& opts, SuiteReport& report) {
  auto t0 = std::chrono::steady_clock::now();
  report.started = now_iso();
  report.exguardian = self_exe();
  report.layer = opts.layer;
  report.policy_file = opts.policy_file.empty() ? "(default policy)" : opts.policy_file;
  report.run_args = opts.run_args;
  if (opts.layer != "all" && !layer::parse_kind(opts.layer)) {
    std::fprintf(stderr, "exguardian: escape-test: --layer %s: must be %s or all\n", opts.layer.c_str(),
                 layer::names_text(layer::all_kinds(), ", ").c_str());
    return 125;
  }
  if (opts.layer == layer::name(layer::Kind::Microvm)) {
    // Every probe is one guest (restored from the template after the first):
    // the report says which accelerator ran them.
    std::string why;
    microvm::chosen_accel(&why);
    report.warnings.push_back("microvm: " + why);
    plan::Plan with_egress;
    with_egress.network.allowed_domains.push_back({"allowed.test", {}});
    for (const auto& c : microvm::MicrovmLayer({}, {}).cautions(with_egress)) report.warnings.push_back(c);
  }
  if (opts.layer == layer::name(layer::Kind::Landlock))
    report.warnings.push_back("landlock: no namespaces: the probes run in the host's own namespaces behind Landlock, "
                              "seccomp and the proxy; what the layer cannot do (docs/layers.md) is judged not "
                              "applicable, naming the limit; its notes at each start are left out of the probes' output" +
                              std::string(::geteuid() == 0 ? "; as root, the workspace and fake HOME belong to uid " +
                                                                 std::to_string(kLandlockRootRunsAs) + ", the command's" : ""));
  if (!opts.policy_file.empty() && ::access(opts.policy_file.c_str(), R_OK) != 0) {
    std::fprintf(stderr, "exguardian: escape-test: %s: %s\n", opts.policy_file.c_str(), std::strerror(errno));
    return 125;
  }
  for (const auto& a : opts.run_args)
    if (a.starts_with("--unsafe"))
      report.warnings.push_back("SANDBOX DELIBERATELY WEAKENED: " + a + " is passed to every exguardian run");
  if (!opts.run_args.empty()) {
    std::string all;
    for (auto& a : opts.run_args) all += (all.empty() ? "" : " ") + a;
    report.warnings.push_back("every sandbox ran with extra arguments: " + all);
  }
  if (!opts.policy_file.empty()) report.warnings.push_back("policy under test: " + opts.policy_file);
  if (!opts.only.empty()) {
    Context none;  // (the layer's own probes and ids too: microvm's guest-own-kernel, guest root's)
    if (opts.layer != "all") none.layer = opts.layer;
    none.guest_root = guest_root_run(opts.layer, opts.run_args);
    auto all = build_catalog(none);
    for (const auto& id : opts.only)
      if (std::none_of(all.begin(), all.end(), [&](const ProbeSpec& p) { return p.id == id; })) {
        std::fprintf(stderr, "exguardian: escape-test: --only %s: no such probe (see the JSON report's ids)\n", id.c_str());
        return 125;
      }
    report.warnings.push_back("only " + std::to_string(opts.only.size()) + " of " + std::to_string(all.size()) +
                              " probes selected (--only): this is not the whole suite");
  }

  if (!opts.sandbox_name.empty()) {
    // A foreign sandbox: its probes are tagged with its name instead of a layer's.
    report.layer = "sandbox " + opts.sandbox_name;
    if (opts.sandbox_name == kNoSandbox)
      report.warnings.push_back("NO SANDBOX (--sandbox none): every probe safe without a sandbox ran as sh -c COMMAND on the "
                                "host as the caller, in the escape test's own network world and mount namespace; the "
                                "others: not run: unsafe without a sandbox");
    else report.warnings.push_back("FOREIGN SANDBOX " + opts.sandbox_name + ": every probe ran as: " +
                              shown_command(opts.sandbox_prefix) + " sh -c COMMAND ({probe} = " + opts.probe_program +
                              "); not applicable: what needs ExGuardian's own audit log, proxy or run options");
    if (run_layer(opts, opts.sandbox_name, false, report) == 125) return 125;
  } else {
    if (opts.layer == "all") {
      std::string run, out;
      for (const auto& l : layers_present()) {
        if (l.present) run += (run.empty() ? "" : ", ") + l.name;
        else if (l.installed) {
          out += (out.empty() ? "" : "; ") + l.name + ": " + l.why;
          report.warnings.push_back(l.name + " layer: " + l.why);
        }
      }
      if (progress_wanted(opts.verbose))
        std::fprintf(stderr, "escape-test: --layer all runs %s%s\n", run.c_str(), out.empty() ? "" : ("; not " + out).c_str());
    }
    for (const auto& l : layers_present()) {
      if (opts.layer == "all" ? !l.present : l.name != opts.layer) continue;
      if (run_layer(opts, l.name, opts.layer == "all", report) == 125) return 125;
    }
  }
  if (opts.layer == "all") {
    for (const auto& l : layers_present()) {
      if (l.present) continue;
      ProbeResult r;
      r.layer = l.name;
      r.id = "layer-" + l.name;
      r.category = "layers";
      r.expectation = "the suite against the " + l.name + " layer";
      r.required = false;
      r.evidence = l.installed ? l.why : "layer not installed here: " + l.why;
      report.probes.push_back(r);
    }
  }

  // ---- The host's capabilities (doctor).
  auto caps = doctor::probe_host();
  nlohmann::json cj = nlohmann::json::array();
  for (auto& c : caps) cj.push_back({{"name", c.name}, {"ok", c.ok}, {"detail", c.detail}});
  nlohmann::json lj = nlohmann::json::array();
  for (auto& l : doctor::layer_status(caps)) lj.push_back({{"name", l.name}, {"available", l.available}, {"why", l.why}});
  report.host = {{"identity", doctor::host_identity()}, {"user", doctor::user_identity()}, {"capabilities", cj},
                 {"layers", lj}};

  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report.passed() ? 0 : 1;
}

}  // namespace exg::evidence
