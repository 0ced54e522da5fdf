#include "agent/agent.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>

#include "agent/file_metadata.hpp"
#include "agent/protocol.hpp"

extern char** environ;

namespace exg::agent {

namespace {

constexpr size_t kHighWater = 4 * 1024 * 1024;  // queued bytes to the supervisor before output and requests pause
constexpr size_t kLowWater = 1024 * 1024;
constexpr size_t kMaxPendingInput = 4 * 1024 * 1024;  // input queued for one process whose stdin is full
constexpr int kMaxRemoveDepth = 128;

enum Tag : uint64_t { kChannel = 1, kSignals = 2, kInotify = 3, kOutput = 4, kInput = 5, kPidsEvents = 6 };
uint64_t tag(Tag t, int fd) { return (uint64_t{t} << 32) | static_cast<uint32_t>(fd); }

struct Stream {
  int fd = -1;
  std::string tail;  // the last kTailBytes, for attach
};

struct Proc {
  int pid = 0;
  int pidfd = -1;
  bool pty = false;
  int in = -1;  // stdin pipe, or the pty master (also `out` then)
  std::string pending_in;
  bool close_in_after = false;
  Stream out, err;
  std::vector<std::string> argv;
  bool exited = false;
  nlohmann::json exit;  // the exit event's header, once exited
};

void keep_tail(std::string& tail, const char* p, size_t n) {
  if (n >= kTailBytes) {
    tail.assign(p + n - kTailBytes, kTailBytes);
    return;
  }
  tail.append(p, n);
  if (tail.size() > kTailBytes) tail.erase(0, tail.size() - kTailBytes);
}

void set_nonblock(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

const char* type_name(mode_t m) {
  if (S_ISREG(m)) return "file";
  if (S_ISDIR(m)) return "dir";
  if (S_ISLNK(m)) return "symlink";
  if (S_ISFIFO(m)) return "fifo";
  if (S_ISSOCK(m)) return "socket";
  if (S_ISCHR(m)) return "char";
  if (S_ISBLK(m)) return "block";
  return "unknown";
}

nlohmann::json stat_json(const struct stat& st) {
  return {{"type", type_name(st.st_mode)}, {"size", static_cast<uint64_t>(st.st_size)},
          {"mode", st.st_mode & 07777},    {"uid", st.st_uid},
          {"gid", st.st_gid},              {"mtime", static_cast<int64_t>(st.st_mtim.tv_sec)},
          {"nlink", static_cast<uint64_t>(st.st_nlink)}};
}

nlohmann::json mask_names(uint32_t m) {
  static constexpr std::pair<uint32_t, const char*> kBits[] = {
      {IN_CREATE, "create"},  {IN_DELETE, "delete"},         {IN_MODIFY, "modify"},
      {IN_CLOSE_WRITE, "close_write"},                       {IN_MOVED_FROM, "moved_from"},
      {IN_MOVED_TO, "moved_to"}, {IN_ATTRIB, "attrib"},      {IN_DELETE_SELF, "delete_self"},
      {IN_MOVE_SELF, "move_self"}, {IN_ISDIR, "isdir"},      {IN_IGNORED, "ignored"},
      {IN_Q_OVERFLOW, "overflow"}};
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [bit, name] : kBits)
    if (m & bit) out.push_back(name);
  return out;
}

// Removes a tree below an open directory without following a symlink.
int remove_tree(int dirfd, const char* name, int depth) {
  if (depth > kMaxRemoveDepth) return ELOOP;
  if (::unlinkat(dirfd, name, 0) == 0) return 0;
  if (errno != EISDIR && errno != EPERM) return errno;
  int fd = ::openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return errno;
  DIR* d = ::fdopendir(fd);
  if (!d) {
    int e = errno;
    ::close(fd);
    return e;
  }
  int err = 0;
  while (dirent* e = ::readdir(d)) {
    if (!std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, "..")) continue;
    if (int r = remove_tree(fd, e->d_name, depth + 1); r != 0) {
      err = r;
      break;
    }
  }
  ::closedir(d);
  if (err) return err;
  return ::unlinkat(dirfd, name, AT_REMOVEDIR) == 0 ? 0 : errno;
}

int mkdir_parents(const std::string& path, mode_t mode) {
  std::string cur;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t slash = path.find('/', pos);
    if (slash == std::string::npos) slash = path.size();
    cur = path.substr(0, slash);
    pos = slash + 1;
    if (cur.empty() || cur == "." || cur == "..") continue;
    if (::mkdir(cur.c_str(), mode) != 0 && errno != EEXIST) return errno;
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return errno;
  return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

// The sandbox's own user, as /etc/passwd inside names it (the sandbox maps one uid only).
bool is_own_user(const std::string& who) {
  uid_t uid = ::getuid();
  if (who == std::to_string(uid)) return true;
  int fd = ::open("/etc/passwd", O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  std::string text;
  char buf[8192];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0 && text.size() < (1u << 20);) text.append(buf, static_cast<size_t>(n));
  ::close(fd);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1),
           c = b == std::string::npos ? b : line.find(':', b + 1);
    if (c == std::string::npos) continue;
    if (line.substr(0, a) == who && line.substr(b + 1, c - b - 1) == std::to_string(uid)) return true;
  }
  return false;
}

class Agent {
 public:
  explicit Agent(const AgentConfig& cfg) : cfg_(cfg) {}
  [[noreturn]] void run();

 private:
  const AgentConfig& cfg_;
  // Who may end the sandbox with a signal: pid 0 (outside the pid namespace),
  // or, with no pid namespace (end_descendants), the parent (on_signals).
  const pid_t supervisor_pid_ = cfg_.end_descendants ? ::getppid() : 0;
  int ep_ = -1, sigfd_ = -1, inotify_ = -1;
  FrameReader reader_;
  std::string outq_;
  size_t outq_pos_ = 0;
  bool paused_ = false;
  std::map<int, std::unique_ptr<Proc>> procs_;    // running, by pid
  std::deque<std::unique_ptr<Proc>> exited_;      // the last kMaxExited, for attach
  std::map<int, std::pair<int, bool>> fd_owner_;  // output fd -> (pid, is stderr)
  // inotify wd -> what was asked and the watched directory held open: an
  // inotify watch is on an inode, and a filesystem that makes a new inode at
  // each uncached lookup (the microVM's 9p view) would otherwise send the
  // command's changes to another inode once the dentry is dropped; an open
  // descriptor keeps the dentry, so every lookup meets the watched inode.
  struct Watched {
    std::string path;
    int pin = -1;
    Watched(std::string p, int fd) : path(std::move(p)), pin(fd) {}
    Watched(const Watched&) = delete;
    Watched& operator=(const Watched&) = delete;
    ~Watched() {
      if (pin >= 0) ::close(pin);
    }
  };
  std::map<int, Watched> watches_;
  uint64_t pids_refused_sent_ = 0;                // the last count of refused forks reported

  size_t queued() const { return outq_.size() - outq_pos_; }
  void send(const Frame& f);
  void flush();
  void update_channel_interest();
  void pause_outputs(bool pause);
  // `supervisor_gone`: the channel closed (nothing more can reach the supervisor).
  [[noreturn]] void end(int status, bool supervisor_gone = false);

  void on_channel();
  void on_signals();
  void on_output(int fd);
  void on_input_ready(int fd);
  void on_inotify();
  void on_pids_events(bool exact);
  void handle(const Request& r);

  void start(const Request& r);
  void reap(int pid, int status);
  bool read_stream(Proc& p, Stream& s, bool is_err);
  void close_stream(Stream& s);
  void write_input(Proc& p);
  void attach(const Request& r);
  void list(const Request& r);
  Proc* running(int pid) { auto it = procs_.find(pid); return it == procs_.end() ? nullptr : it->second.get(); }

  void file_op(const Request& r);
  void watch(const Request& r);
};

void Agent::send(const Frame& f) {
  if (outq_pos_ > 0 && outq_pos_ == outq_.size()) {
    outq_.clear();
    outq_pos_ = 0;
  }
  outq_ += encode(f);
  flush();
}

void Agent::flush() {
  while (queued() > 0) {
    ssize_t n = ::write(cfg_.channel, outq_.data() + outq_pos_, queued());
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) break;
      end(0, true);  // the supervisor is gone
    }
    outq_pos_ += static_cast<size_t>(n);
  }
  if (outq_pos_ > (1u << 20) && outq_pos_ * 2 > outq_.size()) {
    outq_.erase(0, outq_pos_);
    outq_pos_ = 0;
  }
  update_channel_interest();
}

// Reads requests only while the supervisor takes what we send: replies and
// output never pile up past the high-water mark.
void Agent::update_channel_interest() {
  bool pause = queued() > kHighWater;
  bool resume = queued() < kLowWater;
  if (pause && !paused_) pause_outputs(true);
  else if (resume && paused_) pause_outputs(false);
  epoll_event ev{};
  ev.events = (paused_ ? 0u : uint32_t{EPOLLIN}) | (queued() > 0 ? uint32_t{EPOLLOUT} : 0u) | EPOLLRDHUP;
  ev.data.u64 = tag(kChannel, cfg_.channel);
  ::epoll_ctl(ep_, EPOLL_CTL_MOD, cfg_.channel, &ev);
}

void Agent::pause_outputs(bool pause) {
  paused_ = pause;
  for (auto& [fd, owner] : fd_owner_) {
    epoll_event ev{};
    ev.events = pause ? 0u : uint32_t{EPOLLIN};
    ev.data.u64 = tag(kOutput, fd);
    ::epoll_ctl(ep_, EPOLL_CTL_MOD, fd, &ev);
  }
}

[[noreturn]] void Agent::end(int status, bool supervisor_gone) {
  // Best effort: the last replies (shutdown's) reach the supervisor.
  for (int tries = 0; queued() > 0 && tries < 100; ++tries) {
    ssize_t n = ::write(cfg_.channel, outq_.data() + outq_pos_, queued());
    if (n > 0) {
      outq_pos_ += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) break;
    pollfd pfd{cfg_.channel, POLLOUT, 0};
    ::poll(&pfd, 1, 100);
  }
  // Every other process of the sandbox (pid 1's exit would, too). Only as
  // pid 1: anywhere else kill(-1) reaches every process of this uid.
  if (::getpid() == 1) ::kill(-1, SIGKILL);
  else
    for (auto& [pid, p] : procs_) ::kill(pid, SIGKILL);
  if (cfg_.end_descendants) cfg_.end_descendants(supervisor_gone);
  ::_exit(status);
}

void Agent::run() {
  // Pid 1 keeps no terminal and no pipe of the host: stdio goes nowhere.
  int devnull = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (devnull >= 0) {
    for (int k = 0; k < 3; ++k) ::dup2(devnull, k);
    ::close(devnull);
  }
  sigset_t mask;
  sigfillset(&mask);
  sigprocmask(SIG_SETMASK, &mask, nullptr);
  sigemptyset(&mask);
  for (int s : {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGCONT, SIGPIPE, SIGWINCH})
    sigaddset(&mask, s);
  sigfd_ = ::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  ep_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (sigfd_ < 0 || ep_ < 0) ::_exit(125);
  set_nonblock(cfg_.channel);
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.u64 = tag(kChannel, cfg_.channel);
  ::epoll_ctl(ep_, EPOLL_CTL_ADD, cfg_.channel, &ev);
  ev.events = EPOLLIN;
  ev.data.u64 = tag(kSignals, sigfd_);
  ::epoll_ctl(ep_, EPOLL_CTL_ADD, sigfd_, &ev);
  if (cfg_.pids_notify >= 0) {
    ev.events = EPOLLIN;
    ev.data.u64 = tag(kPidsEvents, cfg_.pids_notify);
    ::epoll_ctl(ep_, EPOLL_CTL_ADD, cfg_.pids_notify, &ev);
  }
  nlohmann::json ready = {{"event", "ready"}, {"pid", ::getpid()}, {"uid", ::getuid()}, {"gid", ::getgid()}, {"cwd", cfg_.cwd}};
  if (!cfg_.walls.empty()) {
    ready["walls"] = nlohmann::json::object();
    for (const auto& [what, how] : cfg_.walls) ready["walls"][what] = how;
  }
  send(event(ready));
  for (;;) {
    epoll_event evs[32];
    int n = ::epoll_wait(ep_, evs, 32, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      end(125);
    }
    for (int i = 0; i < n; ++i) {
      auto t = static_cast<Tag>(evs[i].data.u64 >> 32);
      int fd = static_cast<int>(evs[i].data.u64 & 0xffffffffu);
      switch (t) {
        case kChannel:
          if (evs[i].events & EPOLLOUT) flush();
          if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP | EPOLLERR)) on_channel();
          break;
        case kSignals: on_signals(); break;
        case kInotify: on_inotify(); break;
        case kOutput: on_output(fd); break;
        case kInput: on_input_ready(fd); break;
        case kPidsEvents: on_pids_events(false); break;
      }
    }
  }
}

void Agent::on_channel() {
  char buf[65536];
  for (;;) {
    if (paused_) return;
    // Whole frames already buffered are handled before more is read.
    for (;;) {
      auto item = reader_.next();
      if (item.error) send(reply_error(item.error->id, EINVAL, item.error->what));
      else if (item.frame) {
        std::string why;
        auto req = parse_request(*item.frame, &why);
        if (req) handle(*req);
        else send(reply_error(item.frame->id, EINVAL, why));
      } else break;
      if (paused_) return;
    }
    ssize_t n = ::read(cfg_.channel, buf, sizeof buf);
    if (n == 0) end(0, true);  // the supervisor closed the channel
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return;
      end(0, true);
    }
    reader_.feed(buf, static_cast<size_t>(n));
  }
}

void Agent::on_signals() {
  signalfd_siginfo si;
  while (::read(sigfd_, &si, sizeof si) == sizeof si) {
    int s = static_cast<int>(si.ssi_signo);
    if (s == SIGCHLD) {
      int status;
      pid_t p;
      while ((p = ::waitpid(-1, &status, WNOHANG)) > 0) reap(p, status);
    } else if ((s == SIGTERM || s == SIGINT || s == SIGHUP) && static_cast<pid_t>(si.ssi_pid) == supervisor_pid_) {
      // From outside the pid namespace (a sender inside has a pid here; without
      // one, from the supervisor, our parent): the supervisor ends the sandbox.
      // A blocked signal reaches even pid 1, so the sandbox's own processes
      // could send one too: those are ignored.
      end(128 + s);
    }
  }
}

void Agent::handle(const Request& r) {
  switch (r.op) {
    case Op::Start: return start(r);
    case Op::Input:
    case Op::CloseStdin: {
      Proc* p = running(r.pid);
      if (!p || p->in < 0) return send(reply_error(r.id, p ? EPIPE : ESRCH, p ? "stdin is closed" : "no such process"));
      if (r.op == Op::Input) {
        if (p->pending_in.size() + r.data.size() > kMaxPendingInput)
          return send(reply_error(r.id, EAGAIN, "the process is not reading its input (4 MiB queued)"));
        p->pending_in += r.data;
      } else if (p->pty) {
        p->pending_in += '\x04';  // a terminal has no end: ^D, as a keyboard would send
      } else {
        p->close_in_after = true;
      }
      write_input(*p);
      return send(reply_ok(r.id));
    }
    case Op::Signal: {
      Proc* p = running(r.pid);
      if (!p) return send(reply_error(r.id, ESRCH, "no such process"));
      // The group too: what a shell line started (a timeout must end `sh -c "sleep 30"` whole).
      // It exists while its leader runs, whose pid names it (every start is setsid).
      if (r.group && ::kill(-p->pid, r.signal) != 0 && errno != ESRCH) return send(reply_error(r.id, errno, "signal the group"));
      // Without a pidfd (gVisor 2022 has no pidfd_open) the pid itself: safe
      // here, as only this process reaps and a reaped pid leaves the table in
      // the same step, so a pid in the table is always this child (a zombie at worst).
      int rc = p->pidfd >= 0 ? static_cast<int>(::syscall(SYS_pidfd_send_signal, p->pidfd, r.signal, nullptr, 0))
                             : ::kill(p->pid, r.signal);
      if (rc != 0) return send(reply_error(r.id, errno, "signal"));
      return send(reply_ok(r.id));
    }
    case Op::Resize: {
      Proc* p = running(r.pid);
      if (!p) return send(reply_error(r.id, ESRCH, "no such process"));
      if (!p->pty) return send(reply_error(r.id, ENOTTY, "the process has no terminal"));
      winsize ws{r.rows, r.cols, 0, 0};
      if (::ioctl(p->in, TIOCSWINSZ, &ws) != 0) return send(reply_error(r.id, errno, "resize"));
      return send(reply_ok(r.id));
    }
    case Op::List: return list(r);
    case Op::Attach: return attach(r);
    case Op::Watch:
    case Op::Unwatch: return watch(r);
    case Op::Shutdown:
      send(reply_ok(r.id));
      end(0);
    default: return file_op(r);
  }
}

void Agent::start(const Request& r) {
  if (procs_.size() >= kMaxProcesses)
    return send(reply_error(r.id, EAGAIN, "more than 256 processes started and running"));
  if (r.user && !is_own_user(*r.user))
    return send(reply_error(r.id, EPERM, "user " + r.user->substr(0, 64) +
                                             ": a sandbox has one user, uid " + std::to_string(::getuid())));
  // The environment: the sandbox's, with the request's entries over it.
  std::vector<std::string> env = cfg_.env;
  for (const auto& e : r.env) {
    std::string name = e.substr(0, e.find('=') + 1);
    std::erase_if(env, [&](const std::string& x) { return x.starts_with(name); });
    env.push_back(e);
  }
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, status_pipe[2] = {-1, -1};
  int master = -1, slave = -1;
  auto close_all = [&] {
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1], status_pipe[0], status_pipe[1], master, slave})
      if (fd >= 0) ::close(fd);
  };
  auto fail_with = [&](int e, const std::string& what) {
    close_all();
    send(reply_error(r.id, e, what));
  };
  if (r.pty) {
    master = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (master < 0) return fail_with(errno, "open a terminal (/dev/ptmx)");
    if (::unlockpt(master) != 0) return fail_with(errno, "unlock the terminal");
    slave = ::ioctl(master, TIOCGPTPEER, O_RDWR | O_NOCTTY);
    if (slave < 0 && (errno == ENOTTY || errno == EINVAL)) {
      // gVisor has no TIOCGPTPEER: the peer by its name in this sandbox's own devpts.
      char name[64];
      if (::ptsname_r(master, name, sizeof name) == 0) slave = ::open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
    }
    if (slave < 0) return fail_with(errno, "open the terminal's peer");
    winsize ws{r.rows, r.cols, 0, 0};
    ::ioctl(master, TIOCSWINSZ, &ws);
  } else {
    if ((r.stdin_open && ::pipe2(in, O_CLOEXEC) != 0) || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
      return fail_with(errno, "pipes for the process's stdio");
  }
  if (::pipe2(status_pipe, O_CLOEXEC) != 0) return fail_with(errno, "pipe");
  std::vector<char*> argv, envp;
  for (const auto& a : r.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const std::string& cwd = r.cwd.empty() ? cfg_.cwd : r.cwd;
  pid_t pid = ::fork();
  if (pid < 0) return fail_with(errno, "fork");
  if (pid == 0) {
    auto die = [&](int e) {
      (void)::write(status_pipe[1], &e, sizeof e);
      ::_exit(127);
    };
    for (int s = 1; s < NSIG; ++s) std::signal(s, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (::setsid() < 0) die(errno);
    if (r.pty) {
      if (::ioctl(slave, TIOCSCTTY, 0) != 0) die(errno);
      for (int k = 0; k < 3; ++k) ::dup2(slave, k);
    } else {
      int null = r.stdin_open ? -1 : ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (::dup2(r.stdin_open ? in[0] : null, 0) < 0 || ::dup2(out[1], 1) < 0 || ::dup2(err[1], 2) < 0) die(errno);
    }
    if (::chdir(cwd.c_str()) != 0) die(errno);
    // Descriptors 3 and up are the agent's (the channel among them): none goes on.
    ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    environ = envp.data();
    ::execvp(argv[0], argv.data());
    die(errno);
  }
  ::close(status_pipe[1]);
  status_pipe[1] = -1;
  int child_err = 0;
  ssize_t got;
  do got = ::read(status_pipe[0], &child_err, sizeof child_err); while (got < 0 && errno == EINTR);
  if (got == sizeof child_err) {
    // Reaped by the SIGCHLD path (it is not in the table): only the error goes back.
    return fail_with(child_err, std::string(child_err == ENOENT ? "not found: " : "cannot start ") + r.argv[0].substr(0, 256));
  }
  auto p = std::make_unique<Proc>();
  p->pid = pid;
  p->pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  p->pty = r.pty;
  p->argv = r.argv;
  if (r.pty) {
    ::close(slave);
    slave = -1;
    p->in = master;
    p->out.fd = ::dup(master);
    ::fcntl(p->out.fd, F_SETFD, FD_CLOEXEC);
    master = -1;
  } else {
    ::close(in[0]);
    ::close(out[1]);
    ::close(err[1]);
    in[0] = out[1] = err[1] = -1;
    p->in = in[1];
    p->out.fd = out[0];
    p->err.fd = err[0];
    in[1] = out[0] = err[0] = -1;
  }
  ::close(status_pipe[0]);
  status_pipe[0] = -1;
  for (int fd : {p->in, p->out.fd, p->err.fd}) if (fd >= 0) set_nonblock(fd);
  for (auto [fd, is_err] : {std::pair{p->out.fd, false}, std::pair{p->err.fd, true}}) {
    if (fd < 0) continue;
    fd_owner_[fd] = {pid, is_err};
    epoll_event ev{};
    ev.events = paused_ ? 0u : uint32_t{EPOLLIN};
    ev.data.u64 = tag(kOutput, fd);
    ::epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev);
  }
  nlohmann::json reply{{"pid", pid}};
  procs_[pid] = std::move(p);
  send(reply_ok(r.id, reply));
}

// Reads what a stream holds now (up to one payload); false at its end.
bool Agent::read_stream(Proc& p, Stream& s, bool is_err) {
  static char buf[kMaxPayload];
  ssize_t n = ::read(s.fd, buf, sizeof buf);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
  if (n <= 0) return false;  // EOF, or EIO: the terminal's last holder is gone
  keep_tail(s.tail, buf, static_cast<size_t>(n));
  send(event({{"event", is_err ? "stderr" : "stdout"}, {"pid", p.pid}}, std::string(buf, static_cast<size_t>(n))));
  return true;
}

void Agent::close_stream(Stream& s) {
  if (s.fd < 0) return;
  ::epoll_ctl(ep_, EPOLL_CTL_DEL, s.fd, nullptr);
  fd_owner_.erase(s.fd);
  ::close(s.fd);
  s.fd = -1;
}

void Agent::on_output(int fd) {
  auto it = fd_owner_.find(fd);
  if (it == fd_owner_.end()) return;
  Proc* p = running(it->second.first);
  if (!p) return;
  Stream& s = it->second.second ? p->err : p->out;
  if (!read_stream(*p, s, it->second.second)) close_stream(s);
}

void Agent::write_input(Proc& p) {
  while (!p.pending_in.empty() && p.in >= 0) {
    ssize_t n = ::write(p.in, p.pending_in.data(), p.pending_in.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n < 0) {  // the reader is gone: what is queued cannot arrive
      p.pending_in.clear();
      break;
    }
    p.pending_in.erase(0, static_cast<size_t>(n));
  }
  bool want_out = !p.pending_in.empty();
  if (p.close_in_after && !want_out && p.in >= 0) {
    ::epoll_ctl(ep_, EPOLL_CTL_DEL, p.in, nullptr);
    ::close(p.in);
    p.in = -1;
    return;
  }
  if (p.in < 0) return;
  epoll_event ev{};
  ev.events = EPOLLOUT;
  ev.data.u64 = tag(kInput, p.pid);
  if (want_out) {
    if (::epoll_ctl(ep_, EPOLL_CTL_MOD, p.in, &ev) != 0) ::epoll_ctl(ep_, EPOLL_CTL_ADD, p.in, &ev);
  } else {
    ::epoll_ctl(ep_, EPOLL_CTL_DEL, p.in, nullptr);  // (a pty's output is read through its own dup)
  }
}

void Agent::on_input_ready(int pid) {
  Proc* p = running(pid);
  if (p) write_input(*p);
}

// The pids limit's refusals (pids.events "max N"), as "limit" events: a fork
// bomb changes the count thousands of times a second, so it is reported when
// it first rises and whenever it has doubled since, and exactly before each
// exit event (`exact`), which is when the supervisor reads it for its report.
void Agent::on_pids_events(bool exact) {
  if (cfg_.pids_events < 0) return;
  char drain[4096];
  while (::read(cfg_.pids_notify, drain, sizeof drain) > 0) {
  }
  char buf[256];
  ssize_t n = ::pread(cfg_.pids_events, buf, sizeof buf - 1, 0);
  if (n <= 0) return;
  buf[n] = 0;
  const char* at = std::strstr(buf, "max ");
  if (!at || (at != buf && at[-1] != '\n')) return;
  uint64_t refused = std::strtoull(at + 4, nullptr, 10);
  if (refused <= pids_refused_sent_) return;
  if (!exact && pids_refused_sent_ > 0 && refused < 2 * pids_refused_sent_) return;
  pids_refused_sent_ = refused;
  send(event({{"event", "limit"}, {"limit", "pids"}, {"max", cfg_.pids_max}, {"refused", refused}}));
}

void Agent::reap(int pid, int status) {
  auto it = procs_.find(pid);
  if (it == procs_.end()) return;  // an orphan, or a start that failed before exec
  on_pids_events(true);
  Proc& p = *it->second;
  // What the process wrote before it ended goes out before its exit.
  for (auto [s, is_err] : {std::pair{&p.out, false}, std::pair{&p.err, true}}) {
    if (s->fd < 0) continue;
    for (int k = 0; k < 64; ++k) {
      int avail = 0;
      if (::ioctl(s->fd, FIONREAD, &avail) != 0 || avail <= 0) break;
      if (!read_stream(p, *s, is_err)) break;
    }
    close_stream(*s);
  }
  if (p.in >= 0) {
    ::epoll_ctl(ep_, EPOLL_CTL_DEL, p.in, nullptr);
    ::close(p.in);
    p.in = -1;
  }
  if (p.pidfd >= 0) ::close(p.pidfd);
  p.pidfd = -1;
  p.exited = true;
  p.exit = {{"event", "exit"}, {"pid", pid}};
  if (WIFEXITED(status)) {
    p.exit["status"] = WEXITSTATUS(status);
    p.exit["code"] = WEXITSTATUS(status);
  } else {
    p.exit["status"] = 128 + WTERMSIG(status);
    p.exit["signal"] = WTERMSIG(status);
  }
  send(event(p.exit));
  exited_.push_back(std::move(it->second));
  procs_.erase(it);
  while (exited_.size() > kMaxExited) exited_.pop_front();
}

void Agent::list(const Request& r) {
  nlohmann::json running_list = nlohmann::json::array(), exited_list = nlohmann::json::array();
  for (const auto& [pid, p] : procs_)
    running_list.push_back({{"pid", pid}, {"argv", p->argv}, {"pty", p->pty}, {"stdin", p->in >= 0}});
  for (const auto& p : exited_) exited_list.push_back({{"pid", p->pid}, {"argv", p->argv}, {"status", p->exit["status"]}});
  send(reply_ok(r.id, {{"processes", running_list}, {"exited", exited_list}}));
}

// Again the output of a process (its last 64 KiB per stream), then its
// events as they come; an exited one's exit event follows its output.
void Agent::attach(const Request& r) {
  Proc* p = running(r.pid);
  if (!p)
    for (auto it = exited_.rbegin(); it != exited_.rend(); ++it)
      if ((*it)->pid == r.pid) {
        p = it->get();
        break;
      }
  if (!p) return send(reply_error(r.id, ESRCH, "no such process (running, or among the last 32 that exited)"));
  send(reply_ok(r.id, {{"pid", p->pid}, {"argv", p->argv}, {"running", !p->exited}, {"pty", p->pty}}));
  if (!p->out.tail.empty())
    send(event({{"event", "stdout"}, {"pid", p->pid}, {"replay", true}}, p->out.tail));
  if (!p->err.tail.empty())
    send(event({{"event", "stderr"}, {"pid", p->pid}, {"replay", true}}, p->err.tail));
  if (p->exited) {
    nlohmann::json e = p->exit;
    e["replay"] = true;
    send(event(e));
  }
}

// Files: plain system calls by this process, as the sandbox's user, inside
// its mounts, Landlock domain and seccomp filter; relative paths from the
// sandbox's working directory. Whatever the sandbox could not reach, a
// request cannot: the errno is the sandbox's own.
void Agent::file_op(const Request& r) {
  const char* path = r.path.c_str();
  auto sys_error = [&](int e, const char* what) { send(reply_error(r.id, e, std::string(what) + " " + r.path.substr(0, 256))); };
  switch (r.op) {
    case Op::Stat: {
      struct stat st;
      if (::lstat(path, &st) != 0) return sys_error(errno, "stat");
      nlohmann::json h = stat_json(st);
      if (S_ISLNK(st.st_mode)) {
        char target[4096];
        ssize_t n = ::readlink(path, target, sizeof target);
        if (n >= 0) h["target"] = std::string(target, static_cast<size_t>(n));
        // Where it leads, every link followed (serve's envd answers this); absent when dangling.
        if (char* real = ::realpath(path, nullptr)) {
          h["resolved"] = std::string(real);
          std::free(real);
        }
      }
      if (auto md = read_file_metadata(r.path); !md.empty()) h["metadata"] = std::move(md);
      return send(reply_ok(r.id, h));
    }
    case Op::ListDir: {
      int fd = ::open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0) return sys_error(errno, "open directory");
      DIR* d = ::fdopendir(fd);
      if (!d) {
        ::close(fd);
        return sys_error(errno, "open directory");
      }
      nlohmann::json entries = nlohmann::json::array();
      bool truncated = false;
      while (dirent* e = ::readdir(d)) {
        if (!std::strcmp(e->d_name, ".") || !std::strcmp(e->d_name, "..")) continue;
        if (entries.size() >= kMaxListEntries) {
          truncated = true;
          break;
        }
        nlohmann::json entry{{"name", e->d_name}};
        struct stat st;
        if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
          entry["type"] = type_name(st.st_mode);
          entry["size"] = static_cast<uint64_t>(st.st_size);
          entry["mode"] = st.st_mode & 07777;
        }
        entries.push_back(std::move(entry));
      }
      ::closedir(d);
      return send(reply_ok(r.id, {{"entries", entries}, {"truncated", truncated}}));
    }
    case Op::Read: {
      // O_NONBLOCK: a FIFO planted under the name never blocks the agent.
      int fd = ::open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
      if (fd < 0) return sys_error(errno, "open");
      struct stat st;
      if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return sys_error(S_ISDIR(st.st_mode) ? EISDIR : EINVAL, "read (not a regular file)");
      }
      std::string data(static_cast<size_t>(r.length), '\0');
      size_t got = 0;
      while (got < data.size()) {
        ssize_t n = ::pread(fd, data.data() + got, data.size() - got, static_cast<off_t>(r.offset + got));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          int e = errno;
          ::close(fd);
          return sys_error(e, "read");
        }
        if (n == 0) break;
        got += static_cast<size_t>(n);
      }
      ::close(fd);
      data.resize(got);
      return send(reply_ok(r.id, {{"size", static_cast<uint64_t>(st.st_size)}, {"offset", r.offset}, {"bytes", got},
                                  {"eof", got < r.length}},
                           std::move(data)));
    }
    case Op::Write: {
      int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (r.append ? O_APPEND : 0) |
                  (r.exclusive ? O_EXCL : 0);
      int fd = ::open(path, flags, r.mode ? r.mode : 0644);
      if (fd < 0) return sys_error(errno, "open");
      struct stat st;
      if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return sys_error(S_ISDIR(st.st_mode) ? EISDIR : EINVAL, "write (not a regular file)");
      }
      if (r.truncate && ::ftruncate(fd, 0) != 0) {
        int e = errno;
        ::close(fd);
        return sys_error(e, "truncate");
      }
      if (r.metadata)
        if (int e = replace_file_metadata(fd, *r.metadata)) {
          ::close(fd);
          return sys_error(e, "metadata (user.e2b.* extended attributes) of");
        }
      size_t done = 0;
      while (done < r.data.size()) {
        ssize_t n = r.append ? ::write(fd, r.data.data() + done, r.data.size() - done)
                             : ::pwrite(fd, r.data.data() + done, r.data.size() - done,
                                        static_cast<off_t>(r.offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          int e = n < 0 ? errno : EIO;
          ::close(fd);
          return sys_error(e, "write");
        }
        done += static_cast<size_t>(n);
      }
      if (::close(fd) != 0) return sys_error(errno, "write");
      return send(reply_ok(r.id, {{"bytes", done}}));
    }
    case Op::Mkdir: {
      mode_t mode = r.mode ? r.mode : 0755;
      int e = r.parents ? mkdir_parents(r.path, mode) : (::mkdir(path, mode) == 0 ? 0 : errno);
      if (e) return sys_error(e, "mkdir");
      return send(reply_ok(r.id));
    }
    case Op::Remove: {
      int e = 0;
      if (r.recursive) {
        e = remove_tree(AT_FDCWD, path, 0);
      } else if (::unlink(path) != 0) {
        e = errno;
        if ((e == EISDIR || e == EPERM) && ::rmdir(path) == 0) e = 0;
        else if (e == EISDIR || e == EPERM) e = errno;
      }
      if (e) return sys_error(e, "remove");
      return send(reply_ok(r.id));
    }
    case Op::Rename:
      if (::rename(path, r.to.c_str()) != 0) return sys_error(errno, "rename");
      return send(reply_ok(r.id));
    default:
      return send(reply_error(r.id, ENOSYS, "not a file request"));
  }
}

void Agent::watch(const Request& r) {
  if (r.op == Op::Unwatch) {
    if (!watches_.count(r.watch)) return send(reply_error(r.id, ENOENT, "no such watch"));
    ::inotify_rm_watch(inotify_, r.watch);
    watches_.erase(r.watch);
    return send(reply_ok(r.id));
  }
  if (watches_.size() >= kMaxWatches) return send(reply_error(r.id, ENOSPC, "more than 64 watches"));
  if (inotify_ < 0) {
    inotify_ = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (inotify_ < 0) return send(reply_error(r.id, errno, "inotify"));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag(kInotify, inotify_);
    ::epoll_ctl(ep_, EPOLL_CTL_ADD, inotify_, &ev);
  }
  // The directory is opened first and the watch put on that very inode
  // (its /proc/self/fd link), so that the pin and the watch are one directory.
  int pin = ::open(r.path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (pin < 0) return send(reply_error(r.id, errno, "watch " + r.path.substr(0, 256)));
  const std::string via = "/proc/self/fd/" + std::to_string(pin);
  int wd = ::inotify_add_watch(inotify_, via.c_str(),
                               IN_CREATE | IN_DELETE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO |
                                   IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR);
  if (wd < 0) {
    int e = errno;
    ::close(pin);
    return send(reply_error(r.id, e, "watch " + r.path.substr(0, 256)));
  }
  watches_.erase(wd);  // the same directory watched again: one watch, one pin
  watches_.try_emplace(wd, r.path, pin);
  send(reply_ok(r.id, {{"watch", wd}}));
}

void Agent::on_inotify() {
  alignas(inotify_event) char buf[16384];
  for (;;) {
    ssize_t n = ::read(inotify_, buf, sizeof buf);
    if (n <= 0) return;
    for (ssize_t off = 0; off < n;) {
      auto* e = reinterpret_cast<inotify_event*>(buf + off);
      off += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
      auto it = watches_.find(e->wd);
      nlohmann::json h{{"event", "watch"}, {"watch", e->wd}, {"mask", mask_names(e->mask)}};
      if (it != watches_.end()) h["path"] = it->second.path;
      if (e->len > 0) h["name"] = std::string(e->name);
      if (e->mask & IN_IGNORED) watches_.erase(e->wd);
      send(event(std::move(h)));
    }
  }
}

}  // namespace

[[noreturn]] void serve(const AgentConfig& cfg) {
  Agent a(cfg);
  a.run();
}

}  // namespace exg::agent
