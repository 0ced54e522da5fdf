#include "evidence/world.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace exg::evidence {
namespace {

constexpr const char* kServerAddrs[] = {"203.0.113.10", "169.254.169.254", "10.0.0.5"};
constexpr const char* kMarkPrefix = "exg-world-mark ";

std::string errno_text(int e) { return std::string(::strerrorname_np(e) ? ::strerrorname_np(e) : "?") + " (" + std::strerror(e) + ")"; }

bool write_file(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ::close(fd);
  return ok;
}

const char* ip_path() {
  for (const char* p : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"})
    if (::access(p, X_OK) == 0) return p;
  return nullptr;
}

// Keeps CAP_NET_ADMIN across exec for a non-root uid (ambient set).
void raise_ambient_net_admin() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (::syscall(SYS_capget, &hdr, data) != 0) return;
  data[CAP_NET_ADMIN / 32].inheritable |= 1u << (CAP_NET_ADMIN % 32);
  if (::syscall(SYS_capset, &hdr, data) != 0) return;
  ::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_NET_ADMIN, 0, 0);
}

int listen_tcp(const char* addr, int port) {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  int one = 1;
  ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  ::inet_pton(AF_INET, addr, &sa.sin_addr);
  if (::bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(s, 64) != 0) {
    ::close(s);
    return -1;
  }
  return s;
}

int bind_udp(const char* addr, int port) {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  ::inet_pton(AF_INET, addr, &sa.sin_addr);
  if (::bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    ::close(s);
    return -1;
  }
  return s;
}

void append_log(int log_fd, const std::string& line) {
  (void)!::write(log_fd, line.data(), line.size());  // O_APPEND: one write, one line
}

void serve_tcp(int lfd, std::string addr, int log_fd) {
  for (;;) {
    int c = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;
    }
    timeval tv{3, 0};
    ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    std::string req;
    char buf[4096];
    while (req.size() < 16384 && req.find("\r\n\r\n") == std::string::npos) {
      ssize_t n = ::read(c, buf, sizeof buf);
      if (n <= 0) break;
      req.append(buf, static_cast<size_t>(n));
    }
    std::string first = req.substr(0, req.find("\r\n"));
    std::string method = "-", path = "-", host = "-";
    {
      std::istringstream is(first);
      is >> method >> path;
    }
    for (size_t p = req.find("\r\n"); p != std::string::npos && p + 2 < req.size(); p = req.find("\r\n", p + 2)) {
      std::string h = req.substr(p + 2, req.find("\r\n", p + 2) - (p + 2));
      if (h.size() > 5 && ::strncasecmp(h.c_str(), "host:", 5) == 0) {
        host = h.substr(5);
        while (!host.empty() && host.front() == ' ') host.erase(0, 1);
        break;
      }
    }
    if (req.empty()) method = "(connection, no request)";
    append_log(log_fd, addr + " " + method + " " + path + " host=" + host + "\n");
    std::string body = "hello from " + addr + "\n";
    std::string resp = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: " + std::to_string(body.size()) +
                       "\r\nConnection: close\r\n\r\n" + body;
    (void)!::write(c, resp.data(), resp.size());
    ::close(c);
  }
}

void serve_udp(int fd, std::string addr, int log_fd) {
  char buf[2048];
  for (;;) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;
    // The escape test's own end-of-probe mark (world_mark): logged by its number, so the
    // judge knows every datagram queued before it has been logged.
    const std::string got(buf, static_cast<size_t>(n));
    if (got.starts_with(kMarkPrefix)) append_log(log_fd, addr + " UDP mark " + got.substr(std::strlen(kMarkPrefix)) + "\n");
    else append_log(log_fd, addr + " UDP " + std::to_string(n) + " bytes\n");
  }
}

bool read_byte(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) != 1) return false;
  char b;
  return ::read(fd, &b, 1) == 1;
}

// The server side, in a forked child: its own netns, configured once the
// parent has moved the veth's peer into it. Never returns.
[[noreturn]] void server_main(int to_parent, int from_parent, int client_lo_fd, int log_fd) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  char ok = 'u';
  if (::unshare(CLONE_NEWNET) != 0) {
    ok = 'E';
    (void)!::write(to_parent, &ok, 1);
    ::_exit(1);
  }
  (void)!::write(to_parent, &ok, 1);
  if (!read_byte(from_parent, 10000)) ::_exit(1);
  std::string err;
  bool good = run_ip({"link", "set", "lo", "up"}, err) == 0;
  for (const char* a : kServerAddrs) good = good && run_ip({"addr", "add", std::string(a) + "/32", "dev", "lo"}, err) == 0;
  good = good && run_ip({"addr", "add", "198.51.100.2/24", "dev", "exgs"}, err) == 0 &&
         run_ip({"link", "set", "exgs", "up"}, err) == 0;
  std::vector<std::thread> threads;
  if (good) {
    for (const char* a : kServerAddrs) {
      int l = listen_tcp(a, 80);
      if (l < 0) { good = false; break; }
      threads.emplace_back(serve_tcp, l, std::string(a), log_fd);
    }
    int u = bind_udp("203.0.113.10", 53);
    if (u < 0) good = false;
    else threads.emplace_back(serve_udp, u, std::string("203.0.113.10"), log_fd);
    threads.emplace_back(serve_tcp, client_lo_fd, std::string("127.0.0.1"), log_fd);
  }
  ok = good ? 'r' : 'E';
  (void)!::write(to_parent, &ok, 1);
  if (!good) ::_exit(1);
  for (auto& t : threads) t.join();
  ::_exit(0);
}

bool tcp_reachable(const char* addr, int port) {
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s < 0) return false;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  ::inet_pton(AF_INET, addr, &sa.sin_addr);
  bool ok = false;
  if (::connect(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) ok = true;
  else if (errno == EINPROGRESS) {
    pollfd p{s, POLLOUT, 0};
    int soerr = 0;
    socklen_t len = sizeof soerr;
    ok = ::poll(&p, 1, 2000) == 1 && ::getsockopt(s, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 && soerr == 0;
  }
  ::close(s);
  return ok;
}

}  // namespace

int run_ip(const std::vector<std::string>& args, std::string& err) {
  const char* ip = ip_path();
  if (!ip) {
    err = "iproute2 `ip` not found";
    return -1;
  }
  std::vector<std::string> all{"ip"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return -1;
  pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    ::dup2(pipefd[1], 2);
    int nul = ::open("/dev/null", O_RDWR);
    if (nul >= 0) { ::dup2(nul, 0); ::dup2(nul, 1); }
    if (::geteuid() != 0) raise_ambient_net_admin();
    ::execv(ip, argv.data());
    ::_exit(127);
  }
  ::close(pipefd[1]);
  char buf[512];
  ssize_t n;
  err.clear();
  while ((n = ::read(pipefd[0], buf, sizeof buf)) > 0) err.append(buf, static_cast<size_t>(n));
  ::close(pipefd[0]);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
  while (!err.empty() && err.back() == '\n') err.pop_back();
  if (!err.empty()) {
    std::string cmd;
    for (auto& a : all) cmd += (cmd.empty() ? "" : " ") + a;
    err = cmd + ": " + err;
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

std::vector<std::string> TestWorld::allowed_names() { return {"allowed.test", "meta.test", "rebind.test", "private.test"}; }

pid_t start_unix_listener(const std::string& path, const std::string& log, std::string& why) {
  int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof a.sun_path) {
    why = "socket path too long: " + path;
    return -1;
  }
  std::memcpy(a.sun_path, path.c_str(), path.size());
  ::unlink(path.c_str());
  if (s < 0 || ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::chmod(path.c_str(), 0777) != 0 ||
      ::listen(s, 16) != 0) {
    why = "listen on " + path + ": " + errno_text(errno);
    if (s >= 0) ::close(s);
    return -1;
  }
  int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    for (;;) {
      int c = ::accept4(s, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        ::_exit(0);
      }
      timeval tv{3, 0};
      ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      char buf[4096];
      ssize_t n, total = 0;
      while ((n = ::read(c, buf, sizeof buf)) > 0) total += n;
      append_log(log_fd, "unix " + path + ": " + std::to_string(total) + " bytes received\n");
      ::close(c);
    }
  }
  ::close(s);
  if (log_fd >= 0) ::close(log_fd);
  if (pid < 0) why = "fork: " + errno_text(errno);
  return pid;
}

std::string late_bound_marker(const std::string& trigger) { return trigger + ".bound"; }

pid_t start_late_unix_listener(const std::string& path, const std::string& dgram_path, const std::string& trigger,
                               const std::string& log, std::string& why) {
  auto address = [](const std::string& p) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, p.c_str(), p.size());
    return a;
  };
  for (const std::string* p : {&path, &dgram_path})
    if (p->size() >= sizeof(sockaddr_un::sun_path)) {
      why = "socket path too long: " + *p;
      return -1;
    }
  const sockaddr_un stream_addr = address(path), dgram_addr = address(dgram_path);
  int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    auto bind_one = [&](int type, const sockaddr_un& a, const std::string& p) {
      ::unlink(p.c_str());
      int s = ::socket(AF_UNIX, type | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (s < 0 || ::bind(s, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 || ::chmod(p.c_str(), 0777) != 0 ||
          (type == SOCK_STREAM && ::listen(s, 16) != 0)) {
        append_log(log_fd, "late unix " + p + ": could not bind: " + errno_text(errno) + "\n");
        if (s >= 0) ::close(s);
        return -1;
      }
      append_log(log_fd, "late unix " + p + ": bound\n");
      return s;
    };
    for (;;) {
      struct stat st;
      if (::lstat(trigger.c_str(), &st) != 0) {
        ::usleep(20000);
        continue;
      }
      ::unlink(trigger.c_str());
      int s = bind_one(SOCK_STREAM, stream_addr, path);
      int d = bind_one(SOCK_DGRAM, dgram_addr, dgram_path);
      const std::string marker = late_bound_marker(trigger);
      if (int m = ::open(marker.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644); m >= 0) ::close(m);
      for (int tick = 0; tick < 500 && (s >= 0 || d >= 0); ++tick) {
        int c = s >= 0 ? ::accept4(s, nullptr, nullptr, SOCK_CLOEXEC) : -1;
        if (c >= 0) {
          append_log(log_fd, "late unix " + path + ": a connection\n");
          ::close(c);
        }
        char b[64];
        if (d >= 0 && ::recv(d, b, sizeof b, 0) >= 0) append_log(log_fd, "late unix " + dgram_path + ": a datagram\n");
        ::usleep(20000);
      }
      for (int fd : {s, d})
        if (fd >= 0) ::close(fd);
      ::unlink(marker.c_str());
      ::unlink(path.c_str());
      ::unlink(dgram_path.c_str());
    }
  }
  if (log_fd >= 0) ::close(log_fd);
  if (pid < 0) why = "fork: " + errno_text(errno);
  return pid;
}

bool host_unix_connect(const std::string& path, const std::string& log) {
  int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.c_str(), std::min(path.size(), sizeof a.sun_path - 1));
  bool sent = s >= 0 && ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::write(s, "host", 4) == 4;
  if (s >= 0) ::close(s);
  if (!sent) return false;
  // The listener writes its line once it has read to the end: wait for it (bounded).
  for (int i = 0; i < 500; ++i) {
    struct stat st;
    if (::stat(log.c_str(), &st) == 0 && st.st_size > 0) return ::truncate(log.c_str(), 0) == 0;
    ::usleep(10000);
  }
  return false;
}

TestWorld::~TestWorld() {
  if (server_pid_ > 0) {
    ::kill(server_pid_, SIGKILL);
    ::waitpid(server_pid_, nullptr, 0);
  }
}

bool TestWorld::build(const std::string& dir, std::string& why) {
  uid_t uid = ::geteuid();
  gid_t gid = ::getegid();
  if (!ip_path()) {
    why = "iproute2 `ip` is not installed";
    return false;
  }
  int flags = CLONE_NEWNET | CLONE_NEWNS | (uid != 0 ? CLONE_NEWUSER : 0);
  if (::unshare(flags) != 0) {
    why = std::string("unshare(") + (uid != 0 ? "NEWUSER|" : "") + "NEWNET|NEWNS): " + errno_text(errno);
    return false;
  }
  if (uid != 0) {
    // The user's own uid mapped to itself: capabilities in this namespace, and
    // children that exec as that uid (not 0) lose them, so they sandbox themselves
    // as they would on the host.
    if (!write_file("/proc/self/setgroups", "deny") ||
        !write_file("/proc/self/uid_map", std::to_string(uid) + " " + std::to_string(uid) + " 1\n") ||
        !write_file("/proc/self/gid_map", std::to_string(gid) + " " + std::to_string(gid) + " 1\n")) {
      why = "writing the user namespace's uid/gid map: " + errno_text(errno);
      return false;
    }
  }
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    why = "making mounts private: " + errno_text(errno);
    return false;
  }
  const std::string hosts = dir + "/hosts", resolv = dir + "/resolv.conf";
  log_ = dir + "/world-requests.log";
  if (!write_file(hosts,
                  "127.0.0.1 localhost\n203.0.113.10 allowed.test\n169.254.169.254 meta.test\n"
                  "127.0.0.1 rebind.test\n10.0.0.5 private.test\n") ||
      !write_file(resolv, "nameserver 127.0.0.53\n") || !write_file(log_, "")) {
    why = "writing the world's files under " + dir + ": " + errno_text(errno);
    return false;
  }
  if (::mount(hosts.c_str(), "/etc/hosts", nullptr, MS_BIND, nullptr) != 0 ||
      ::mount(resolv.c_str(), "/etc/resolv.conf", nullptr, MS_BIND, nullptr) != 0) {
    why = "bind-mounting the world's hosts file: " + errno_text(errno);
    return false;
  }
  std::string err;
  if (run_ip({"link", "set", "lo", "up"}, err) != 0) {
    why = "bringing lo up: " + err;
    return false;
  }
  int client_lo = listen_tcp("127.0.0.1", 80);
  if (client_lo < 0) {
    why = "listening on the client side's 127.0.0.1:80: " + errno_text(errno);
    return false;
  }
  int log_fd = ::open(log_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  int up[2], down[2];
  if (log_fd < 0 || ::pipe2(up, O_CLOEXEC) != 0 || ::pipe2(down, O_CLOEXEC) != 0) {
    why = "pipes: " + errno_text(errno);
    return false;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    why = "fork: " + errno_text(errno);
    return false;
  }
  if (pid == 0) server_main(up[1], down[0], client_lo, log_fd);
  server_pid_ = pid;
  ::close(up[1]);
  ::close(down[0]);
  ::close(client_lo);
  ::close(log_fd);
  // First byte: the server side has its own netns ('u') or could not have one ('E').
  char first = 0;
  {
    pollfd p{up[0], POLLIN, 0};
    if (::poll(&p, 1, 10000) != 1 || ::read(up[0], &first, 1) != 1 || first != 'u') {
      why = "the server side could not get a network namespace of its own";
      ::close(up[0]);
      ::close(down[1]);
      return false;
    }
  }
  bool ok = run_ip({"link", "add", "exgc", "type", "veth", "peer", "name", "exgs", "netns", std::to_string(pid)}, err) == 0;
  if (!ok) {
    why = "creating the veth pair: " + err;
  } else if (run_ip({"addr", "add", "198.51.100.1/24", "dev", "exgc"}, err) != 0 ||
             run_ip({"link", "set", "exgc", "up"}, err) != 0) {
    ok = false;
    why = "configuring the client side's veth: " + err;
  }
  char go = 'g';
  (void)!::write(down[1], &go, 1);
  ::close(down[1]);
  if (ok) {
    char r = 0;
    pollfd p{up[0], POLLIN, 0};
    ok = ::poll(&p, 1, 15000) == 1 && ::read(up[0], &r, 1) == 1 && r == 'r';
    if (!ok) why = "the world's servers did not come up (netns or addresses on the server side)";
  }
  ::close(up[0]);
  if (ok && run_ip({"route", "add", "default", "via", "198.51.100.2"}, err) != 0) {
    ok = false;
    why = "default route: " + err;
  }
  if (ok) {
    for (const char* a : kServerAddrs) {
      if (!tcp_reachable(a, 80)) {
        ok = false;
        why = std::string("world server ") + a + ":80 not reachable from the client side";
        break;
      }
    }
  }
  // The readiness connects above are logged as "(connection, no request)": start clean.
  if (ok) {
    ::usleep(50000);
    write_file(log_, "");
  }
  up_ = ok;
  return ok;
}

// The mark goes the way a probe's datagram goes (the client side's route to the server's
// UDP socket) after the probe's process has exited: its datagram, sent before then, is in
// that socket's queue ahead of the mark, and the single reader logs in queue order. So
// once the mark's line is in the log, so is the probe's. Waits on the log's changes
// (inotify), not on a clock; the deadline only bounds a world whose server is gone.
size_t world_mark(const std::string& log_path, unsigned n, int deadline_ms) {
  const std::string line = "203.0.113.10 UDP mark " + std::to_string(n) + "\n";
  auto find_line = [&]() -> size_t {
    std::ifstream f(log_path, std::ios::binary);
    std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    for (size_t at = all.find(line); at != std::string::npos; at = all.find(line, at + 1))
      if (at == 0 || all[at - 1] == '\n') return at;
    return std::string::npos;
  };
  int in = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  if (in < 0) return std::string::npos;
  if (::inotify_add_watch(in, log_path.c_str(), IN_MODIFY) < 0) {
    ::close(in);
    return std::string::npos;
  }
  int u = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(53);
  ::inet_pton(AF_INET, "203.0.113.10", &sa.sin_addr);
  const std::string payload = kMarkPrefix + std::to_string(n);
  bool sent = u >= 0 && ::sendto(u, payload.data(), payload.size(), 0, reinterpret_cast<sockaddr*>(&sa), sizeof sa) ==
                            static_cast<ssize_t>(payload.size());
  if (u >= 0) ::close(u);
  size_t at = sent ? find_line() : std::string::npos;
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(deadline_ms);
  while (sent && at == std::string::npos) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    pollfd p{in, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) > 0) {
      char buf[4096];
      while (::read(in, buf, sizeof buf) > 0) {}
    }
    at = find_line();
  }
  ::close(in);
  return at;
}

}  // namespace exg::evidence
