#include "util/host_probe.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

extern char** environ;

namespace exg::util {

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  if (!f) return {};
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

std::string err_name(int e) { return std::string(strerrorname_np(e) ? strerrorname_np(e) : "E?") + " (" + std::strerror(e) + ")"; }

int wait_bounded(pid_t pid, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  for (;;) {
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0 && errno != EINTR) return -1;
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(-pid, SIGKILL);  // its process group, when it made one (tools we run)
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    ::usleep(2000);
  }
}

ChildResult in_child(const std::function<int(int)>& fn,
                     std::chrono::milliseconds timeout) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return {-1, "pipe: " + err_name(errno)};
  std::fflush(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    int e = errno;
    ::close(p[0]);
    ::close(p[1]);
    return {-1, "fork: " + err_name(e)};
  }
  if (pid == 0) {
    ::close(p[0]);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::_exit(fn(p[1]) & 0xff);
  }
  ::close(p[1]);
  ChildResult r;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[512];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd pfd{p[0], POLLIN, 0};
    int n = ::poll(&pfd, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    ssize_t got = ::read(p[0], buf, sizeof buf);
    if (got <= 0) break;
    r.text.append(buf, static_cast<size_t>(got));
  }
  ::close(p[0]);
  int status = wait_bounded(pid, std::chrono::milliseconds(500) + std::max(
      std::chrono::milliseconds(0),
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now())));
  if (status == -1) {
    r.text += r.text.empty() ? "timed out" : " (timed out)";
  } else if (WIFEXITED(status)) {
    r.code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    r.text += (r.text.empty() ? "" : "; ") + std::string("probe died of signal ") + std::to_string(WTERMSIG(status));
  }
  return r;
}

void say(int fd, const std::string& s) { (void)!::write(fd, s.data(), s.size()); }

std::string find_in_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path && *path ? path : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
  for (std::string d; std::getline(dirs, d, ':');) {
    if (d.empty()) continue;
    std::string full = d + "/" + name;
    if (::access(full.c_str(), X_OK) == 0) return full;
  }
  return {};
}

std::string version_line(const std::string& exe, bool* answered, const char* flag) {
  auto r = in_child(
      [&](int fd) {
        ::setpgid(0, 0);  // so a timeout kills whatever the tool started too
        int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null >= 0) ::dup2(null, 0);
        ::dup2(fd, 1);
        ::dup2(fd, 2);
        char* argv[] = {const_cast<char*>(exe.c_str()), const_cast<char*>(flag), nullptr};
        ::execve(exe.c_str(), argv, environ);
        return 127;
      },
      std::chrono::milliseconds(3000));
  *answered = r.code >= 0 && r.code != 127;
  if (r.code < 0) return "no answer to " + std::string(flag) + (r.text.find("timed out") != std::string::npos ? " within 3 s" : "");
  std::istringstream lines(r.text);
  for (std::string line; std::getline(lines, line);) {
    line = trim(line);
    if (!line.empty()) return line;
  }
  return "(no version printed)";
}

void probe_tool(std::vector<Capability>& out, const std::string& name, const std::string& use) {
  std::string exe = find_in_path(name);
  if (exe.empty()) {
    out.push_back({name, false, "not in PATH; " + use});
    return;
  }
  bool answered = false;
  std::string version = version_line(exe, &answered);
  out.push_back({name, answered, exe + ": " + version + "; " + use});
}

}  // namespace exg::util
