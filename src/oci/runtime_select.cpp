// Which runtime binary, which gVisor platform, what to do about the host's
// cgroup mounts: decided before anything is cloned.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>

#include "oci/layer.hpp"
#include "util/mountinfo.hpp"

namespace exg::oci {

namespace {

bool executable(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

// PATH, then the sbin directories an ordinary user's PATH often lacks (runc).
std::string find_binary(const std::string& name) {
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  path += ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty() || dir[0] != '/') continue;
    std::string p = dir + "/" + name;
    if (executable(p)) return p;
  }
  return {};
}

// Runs argv with stdout captured, killed after timeout_ms. Returns the output,
// or nothing when it failed or timed out.
std::optional<std::string> capture(const std::vector<std::string>& argv, int timeout_ms) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return std::nullopt;
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(p[0]);
    ::close(p[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    ::dup2(p[1], 1);
    ::dup2(p[1], 2);  // runsc prints its flags on stderr
    std::vector<char*> a;
    for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
    a.push_back(nullptr);
    ::execv(a[0], a.data());
    ::_exit(127);
  }
  ::close(p[1]);
  std::string out;
  char buf[4096];
  bool timed_out = false;
  for (;;) {
    pollfd pfd{p[0], POLLIN, 0};
    int r = ::poll(&pfd, 1, timeout_ms);
    if (r == 0) {
      timed_out = true;
      break;
    }
    if (r < 0) continue;
    ssize_t n = ::read(p[0], buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(p[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (timed_out || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return out;
}

}  // namespace

std::string RuntimeChoice::describe() const {
  std::string s = std::string(to_string(runtime)) + " (" + path + ")";
  if (!platform.empty()) s += ", platform " + platform;
  return s;
}

std::string pick_gvisor_platform(const std::vector<std::string>& platforms, bool kvm_works,
                                 std::vector<std::string>* notes) {
  auto has = [&](const char* n) { return std::find(platforms.begin(), platforms.end(), n) != platforms.end(); };
  if (has("systrap")) {
    if (notes) notes->push_back("gVisor platform systrap: seccomp-trap based, no virtualisation needed");
    return "systrap";
  }
  if (has("kvm") && kvm_works) {
    if (notes) notes->push_back("gVisor platform kvm: /dev/kvm passed a probe");
    return "kvm";
  }
  if (notes)
    notes->push_back(std::string("gVisor platform ptrace (the last resort: ~60 us per syscall): ") +
                     (has("kvm") ? "this runsc has no systrap, and kvm is used only where known to work (EXGUARDIAN_GVISOR_PLATFORM=kvm)"
                                : "this runsc has no systrap or kvm"));
  return "ptrace";
}

std::vector<std::string> parse_platforms(const std::string& flags_text) {
  std::vector<std::string> out;
  auto pos = flags_text.find("which platform to use:");
  if (pos == std::string::npos) return {"ptrace"};
  auto end = flags_text.find('\n', pos);
  std::string line = flags_text.substr(pos, end == std::string::npos ? std::string::npos : end - pos);
  for (const char* n : {"systrap", "kvm", "ptrace"})
    if (line.find(n) != std::string::npos) out.emplace_back(n);
  return out;
}

Result<RuntimeChoice> choose_runtime(layer::Kind kind, const std::string& runtime_flag) {
  RuntimeChoice c;
  if (!runtime_flag.empty()) {
    if (runtime_flag.find('/') == std::string::npos) c.path = find_binary(runtime_flag);
    else c.path = runtime_flag;
    if (c.path.empty() || !executable(c.path))
      return fail(Error::msg("--runtime " + runtime_flag, "not an executable file"));
    std::string base = c.path.substr(c.path.rfind('/') + 1);
    if (base.find("runsc") != std::string::npos) c.runtime = Runtime::Runsc;
    else if (base.find("runc") != std::string::npos && base.find("crun") == std::string::npos) c.runtime = Runtime::Runc;
    else if (base.find("crun") != std::string::npos) c.runtime = Runtime::Crun;
    else
      return fail(Error::msg("--runtime " + runtime_flag, "unknown runtime (its name must contain crun, runc or runsc)"));
    if ((kind == layer::Kind::Gvisor) != (c.runtime == Runtime::Runsc))
      return fail(Error::msg("--runtime " + runtime_flag, kind == layer::Kind::Gvisor ? "the gvisor layer needs runsc"
                                                                                   : "the container layer runs crun or runc; runsc is --layer gvisor"));
    c.notes.push_back("runtime chosen with --runtime");
  } else if (kind == layer::Kind::Gvisor) {
    c.runtime = Runtime::Runsc;
    c.path = find_binary("runsc");
    if (c.path.empty()) return fail(Error::msg("layer gvisor", "runsc not found (Debian: apt install runsc)"));
  } else {
    c.path = find_binary("crun");
    if (!c.path.empty()) {
      c.runtime = Runtime::Crun;
    } else {
      c.path = find_binary("runc");
      c.runtime = Runtime::Runc;
      if (c.path.empty()) return fail(Error::msg("layer container", "neither crun nor runc found (Debian: apt install crun)"));
      c.notes.push_back("crun not found: runc");
    }
  }
  if (c.runtime == Runtime::Runsc) {
    const char* forced = std::getenv("EXGUARDIAN_GVISOR_PLATFORM");
    if (forced && *forced) {
      std::string f = forced;
      if (f != "systrap" && f != "kvm" && f != "ptrace")
        return fail(Error::msg("EXGUARDIAN_GVISOR_PLATFORM=" + f, "expected systrap, kvm or ptrace"));
      c.platform = f;
      c.notes.push_back("gVisor platform " + f + " (EXGUARDIAN_GVISOR_PLATFORM)");
    } else {
      // kvm is never chosen without a probe, and on a nested host runsc's kvm
      // platform can spin forever (this machine): runs take systrap or ptrace;
      // EXGUARDIAN_GVISOR_PLATFORM=kvm chooses kvm where it is known to work.
      c.platform = pick_gvisor_platform(runsc_platforms(c.path), false, &c.notes);
    }
  }
  return c;
}

namespace {

// $XDG_CACHE_HOME/exguardian or ~/.cache/exguardian; empty when neither is known.
std::string cache_dir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && x[0] == '/') return std::string(x) + "/exguardian";
  if (const char* h = std::getenv("HOME"); h && h[0] == '/') return std::string(h) + "/.cache/exguardian";
  return {};
}

bool owned_by_me(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0 && st.st_uid == ::geteuid() && !(st.st_mode & 022);
}

}  // namespace

std::string runsc_cache_key(const std::string& runsc) {
  struct stat st;
  if (::stat(runsc.c_str(), &st) != 0) return {};
  return runsc + "\t" + std::to_string(st.st_size) + "\t" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec) + "\t" + std::to_string(st.st_ino);
}

std::optional<std::vector<std::string>> parse_platform_cache(const std::string& text, const std::string& key) {
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    if (key.empty() || line.size() <= key.size() || line.compare(0, key.size(), key) != 0 || line[key.size()] != '\t')
      continue;
    std::vector<std::string> out;
    std::stringstream ls(line.substr(key.size() + 1));
    std::string name;
    while (std::getline(ls, name, ',')) {
      if (name != "systrap" && name != "kvm" && name != "ptrace") return std::nullopt;  // not ours: ignore it
      out.push_back(name);
    }
    if (out.empty()) return std::nullopt;
    return out;
  }
  return std::nullopt;
}

// runsc's platforms: asking it (`runsc flags`) costs ~35 ms, so the answer is
// kept per binary (path, size, mtime, inode) in the user's cache dir; a cache
// that is missing, foreign (not ours, or group/other-writable) or stale is
// asked again. Exposed for doctor.
std::vector<std::string> runsc_platforms(const std::string& runsc, bool* from_cache) {
  if (from_cache) *from_cache = false;
  std::string dir = cache_dir(), key = runsc_cache_key(runsc);
  std::string file = dir.empty() ? "" : dir + "/runsc-platforms";
  if (!file.empty() && !key.empty() && owned_by_me(dir) && owned_by_me(file)) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    if (auto hit = parse_platform_cache(text.str(), key)) {
      if (from_cache) *from_cache = true;
      return *hit;
    }
  }
  auto flags = capture({runsc, "flags"}, 5000);
  auto platforms = parse_platforms(flags.value_or(""));
  if (flags && !file.empty() && !key.empty()) {
    // Best effort: a cache that cannot be written costs the question next time.
    std::string parent = dir.substr(0, dir.rfind('/'));
    ::mkdir(parent.c_str(), 0700);
    ::mkdir(dir.c_str(), 0700);
    if (owned_by_me(dir)) {
      std::string tmp = file + "." + std::to_string(::getpid());
      std::string line = key + "\t";
      for (size_t i = 0; i < platforms.size(); ++i) line += (i ? "," : "") + platforms[i];
      std::ofstream out(tmp, std::ios::trunc);
      out << line << "\n";
      out.close();
      if (!out || ::rename(tmp.c_str(), file.c_str()) != 0) ::unlink(tmp.c_str());
    }
  }
  return platforms;
}

CgroupView decide_cgroup_view(const std::string& mountinfo) {
  // mountinfo: "... mountpoint ... - fstype source options"
  CgroupView v;
  bool v1 = false, v2_at_root = false;
  std::string v2_path;
  for (const auto& m : util::parse_mountinfo(mountinfo)) {
    const std::string& mp = m.mount_point;
    const std::string& type = m.fstype;
    if (type == "cgroup") {
      // A v1 hierarchy with real controllers (name=systemd alone does not count).
      const std::string& opts = m.super_options;
      for (const char* c : {"memory", "pids", "cpu", "freezer", "blkio", "devices", "cpuset"})
        if (("," + opts + ",").find(std::string(",") + c + ",") != std::string::npos) v1 = true;
    } else if (type == "cgroup2") {
      if (mp == "/sys/fs/cgroup") v2_at_root = true;
      else if (v2_path.empty()) v2_path = mp;
    }
  }
  if (v2_at_root && !v1) {
    v.pure_v2 = true;
    v.why = "cgroup v2 only: nothing to hide";
  } else if (v1 && !v2_path.empty()) {
    v.hide_unified = true;
    v.unified_path = v2_path;
    v.why = "hybrid cgroups (v1 controllers, v2 at " + v2_path + "): the v2 mount is hidden from the runtime";
  } else if (v1) {
    v.why = "cgroup v1 only";
  } else {
    v.why = "no cgroup filesystem";
  }
  return v;
}

std::vector<std::string> runtime_argv(const RuntimeChoice& rt, bool rootless, const std::string& state_dir,
                                      const std::string& bundle_dir, const std::string& id) {
  std::vector<std::string> a{rt.path, "--root", state_dir};
  switch (rt.runtime) {
    case Runtime::Crun:
      // The container stays in ExGuardian's cgroup (limits set there).
      a.push_back("--cgroup-manager=disabled");
      break;
    case Runtime::Runc:
      break;
    case Runtime::Runsc:
      a.push_back("--network=host");  // inside the runtime host's netns: loopback + our proxy only
      a.push_back("--platform=" + rt.platform);
      // No --oci-seccomp: pid 1 installs the filter (SpecOptions::seccomp_by_pid1).
      a.push_back("--ignore-cgroups");  // the whole sandbox (sentry, gofer) is in ExGuardian's cgroup
      if (rootless) a.push_back("--rootless");
      // runsc's own logs, to see why a sandbox did not start (a host directory).
      if (const char* d = std::getenv("EXGUARDIAN_RUNSC_DEBUG_LOG"); d && d[0] == '/') {
        a.push_back("--debug");
        a.push_back(std::string("--debug-log=") + d + "/");
      }
      break;
  }
  a.insert(a.end(), {"run", "--bundle", bundle_dir, id});
  return a;
}

}  // namespace exg::oci
