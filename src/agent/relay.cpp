#include "agent/relay.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <string>

namespace exg::agent {

namespace {

constexpr size_t kMaxClients = 16;
constexpr size_t kQueueLimit = 8 * 1024 * 1024;

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77  // Linux 6.5
#endif

// Whether the peer runs where this session runs: in its pid and user
// namespaces. A process of any sandbox runs in namespaces of its own (the
// process and container layers make new ones; gVisor's and a guest's
// processes are not the host's at all), so however the socket was reached (it
// may lie anywhere the user put it, the workspace included), no sandbox drives
// its own supervisor or another's: the uid alone would not tell, a sandbox of
// an ordinary user runs as that user. The peer is held by a pidfd while its
// namespaces are read, so a pid reused meanwhile is not judged in its place.
bool peer_runs_beside_us(int fd, pid_t pid, std::string* why) {
  UniqueFd pidfd;
  int pfd = -1;
  socklen_t len = sizeof pfd;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pfd, &len) == 0) pidfd.reset(pfd);
  if (pid <= 0) {
    *why = "its process is not visible from here (another pid namespace)";
    return false;
  }
  for (const char* ns : {"pid", "user"}) {
    struct stat mine {}, theirs {};
    std::string at = "/proc/" + std::to_string(pid) + "/ns/" + ns;
    if (::stat((std::string("/proc/self/ns/") + ns).c_str(), &mine) != 0 || ::stat(at.c_str(), &theirs) != 0) {
      *why = std::string("its ") + ns + " namespace could not be read";
      return false;
    }
    if (mine.st_ino != theirs.st_ino || mine.st_dev != theirs.st_dev) {
      *why = std::string("it runs in another ") + ns + " namespace (a sandbox's)";
      return false;
    }
  }
  // Still the process that connected (a pidfd signals ESRCH once it is gone).
  if (pidfd && ::syscall(SYS_pidfd_send_signal, pidfd.get(), 0, nullptr, 0) != 0) {
    *why = "it ended while it was judged";
    return false;
  }
  return true;
}

int header_int(const nlohmann::json& h, const char* k) {
  auto it = h.find(k);
  return it != h.end() && it->is_number_integer() ? it->get<int>() : 0;
}

}  // namespace

ControlRelay::~ControlRelay() {
  if (bound_) ::unlink(path_.c_str());
}

Result<void> ControlRelay::start(UniqueFd agent_channel, const std::string& sandbox_id) {
  if (!agent_channel) return fail(Error::msg("session", "the sandbox has no agent channel"));
  agent_ = Channel(std::move(agent_channel));
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (path_.empty() || path_.size() >= sizeof sa.sun_path)
    return fail(Error::msg("--control unix:" + path_, "path empty or longer than 107 bytes"));
  path_.copy(sa.sun_path, path_.size());
  listener_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!listener_) return fail(Error::sys("socket"));
  if (struct stat st; ::lstat(path_.c_str(), &st) == 0) {
    // A socket no one listens on is what a session killed with SIGKILL
    // leaves: taken over. Anything else is not ours to remove.
    UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    bool stale = S_ISSOCK(st.st_mode) && st.st_uid == ::geteuid() && probe &&
                 ::connect(probe.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 && errno == ECONNREFUSED;
    if (!stale || ::unlink(path_.c_str()) != 0)
      return fail(Error::msg("--control unix:" + path_, "exists already (a live session's socket, or not a socket)"));
  }
  // Owner-only from the start: no moment where another user could connect.
  mode_t old = ::umask(0177);
  int r = ::bind(listener_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  int e = errno;
  ::umask(old);
  if (r != 0) return fail(Error::sys("bind " + path_, e));
  bound_ = true;
  if (::listen(listener_.get(), 16) != 0) return fail(Error::sys("listen " + path_));
  sandbox_id_ = sandbox_id;
  std::fprintf(stderr, "exguardian: session %s ready on unix:%s\n", sandbox_id.c_str(), path_.c_str());
  return {};
}

bool ControlRelay::forward_signal(int sig) {
  if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) ending_signal_ = sig;
  return false;  // the supervisor delivers it to pid 1
}

int ControlRelay::final_status(int sandbox_status) {
  return sandbox_status == 0 && ending_signal_ ? 128 + ending_signal_ : sandbox_status;
}

size_t ControlRelay::poll_fds(pollfd* out, size_t max) {
  size_t n = 0;
  bool client_full = std::any_of(clients_.begin(), clients_.end(), [](auto& c) { return c->ch.queued() > kQueueLimit; });
  if (agent_ && n < max)
    out[n++] = {agent_.fd(), static_cast<short>((client_full ? 0 : POLLIN) | (agent_.queued() ? POLLOUT : 0)), 0};
  if (listener_ && clients_.size() < kMaxClients && n < max) out[n++] = {listener_.get(), POLLIN, 0};
  bool agent_full = agent_.queued() > kQueueLimit;
  for (auto& c : clients_) {
    if (n >= max) break;
    out[n++] = {c->ch.fd(), static_cast<short>((agent_full ? 0 : POLLIN) | (c->ch.queued() ? POLLOUT : 0)), 0};
  }
  return n;
}

void ControlRelay::on_ready(const pollfd* fds, size_t n) {
  std::vector<Conn*> gone;
  for (size_t i = 0; i < n; ++i) {
    const pollfd& p = fds[i];
    if (!p.revents) continue;
    if (agent_ && p.fd == agent_.fd()) {
      if (p.revents & POLLOUT) (void)agent_.flush();
      if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
        bool open = agent_.read_some();
        from_agent();
        if (!open) agent_.close();  // the agent is gone; the supervisor sees its exit
      }
      continue;
    }
    if (listener_ && p.fd == listener_.get()) {
      accept_client();
      continue;
    }
    for (auto& c : clients_) {
      if (c->ch.fd() != p.fd) continue;
      bool ok = true;
      if (p.revents & POLLOUT) ok = c->ch.flush();
      if (ok && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
        ok = c->ch.read_some();
        from_client(c.get());
      }
      if (!ok) gone.push_back(c.get());
      break;
    }
  }
  for (Conn* c : gone) drop(c);
}

void ControlRelay::accept_client() {
  UniqueFd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
  if (!fd) return;
  ucred cred{};
  socklen_t len = sizeof cred;
  // Only the session's own user drives it (the socket's mode says so too),
  // and only from outside every sandbox (peer_runs_beside_us).
  if (::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != ::geteuid()) {
    if (verbose_) std::fprintf(stderr, "exguardian: session: refused a client of uid %u\n", cred.uid);
    return;
  }
  if (std::string why; !peer_runs_beside_us(fd.get(), cred.pid, &why)) {
    std::fprintf(stderr, "exguardian: session %s: refused a client (pid %d): %s\n", sandbox_id_.c_str(), cred.pid,
                 why.c_str());
    return;
  }
  auto c = std::make_unique<Conn>();
  c->ch = Channel(std::move(fd));
  c->uid = cred.uid;
  clients_.push_back(std::move(c));
}

void ControlRelay::from_client(Conn* c) {
  for (;;) {
    auto item = c->ch.next();
    if (item.error) {
      c->ch.send(reply_error(item.error->id, EINVAL, item.error->what));
      continue;
    }
    if (!item.frame) break;
    Frame& f = *item.frame;
    if (f.kind != Kind::Request || f.id == 0) {
      c->ch.send(reply_error(f.id, EINVAL, f.id == 0 ? "request id 0 (ids start at 1)" : "clients send requests only"));
      continue;
    }
    if (supervisor_request(c, f)) continue;
    if (!agent_) {
      c->ch.send(reply_error(f.id, EPIPE, "the sandbox has ended"));
      continue;
    }
    uint32_t id = next_agent_id_++;
    if (next_agent_id_ == 0) next_agent_id_ = 1;
    auto op = f.header.find("op");
    pending_[id] = Pending{c, f.id, op != f.header.end() && op->is_string() ? op->get<std::string>() : "",
                           header_int(f.header, "pid"), header_int(f.header, "watch")};
    f.id = id;
    agent_.send(f);
  }
}

bool ControlRelay::supervisor_request(Conn* c, const Frame& f) {
  if (f.header.value("op", nlohmann::json()) == request::kAuditTags) {
    // The warm pool's adoption: the tenant a held audit log waited for.
    auto it = f.header.find("tags");
    bool fields_ok = f.header.size() == 2 && it != f.header.end() && it->is_object() && !it->empty() && it->size() <= 8;
    if (fields_ok)
      for (auto& [k, v] : it->items()) {
        bool name_ok = !k.empty() && k.size() <= 64 &&
                       std::all_of(k.begin(), k.end(), [](char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_'; });
        if (!name_ok || !v.is_string() || v.get<std::string>().size() > 256) fields_ok = false;
      }
    if (!fields_ok) {
      c->ch.send(reply_error(f.id, EINVAL, "audit_tags: expected {\"tags\": {NAME: VALUE}}: 1-8 names of [a-z0-9_], values strings of at most 256 bytes"));
      return true;
    }
    if (!audit_tagger_) {
      c->ch.send(reply_error(f.id, ENOTSUP, "audit_tags: this session's audit log is not held (exguardian session --audit-hold)"));
      return true;
    }
    if (auto r = audit_tagger_(*it); !r) {
      c->ch.send(reply_error(f.id, EALREADY, "audit_tags: " + r.error().str()));
      return true;
    }
    c->ch.send(reply_ok(f.id));
    return true;
  }
  if (f.header.value("op", nlohmann::json()) != request::kSetNetwork) return false;
  // Only clients of the socket's owner are here at all (accept_client).
  NetworkChange change;
  for (const char* k : {"allow", "deny"}) {
    auto& out = std::string(k) == "allow" ? change.allow : change.deny;
    auto it = f.header.find(k);
    if (it == f.header.end() || it->is_null()) continue;
    bool strings = it->is_array() && std::all_of(it->begin(), it->end(), [](auto& e) { return e.is_string(); });
    if (!strings) {
      c->ch.send(reply_error(f.id, EINVAL, std::string("set_network: ") + k + ": expected an array of strings"));
      return true;
    }
    for (auto& e : *it) out.push_back(e.get<std::string>());
  }
  for (auto& [k, v] : f.header.items())
    if (k != "op" && k != "allow" && k != "deny") {
      c->ch.send(reply_error(f.id, EINVAL, "set_network: unknown field " + k + " (allow, deny)"));
      return true;
    }
  if (!network_changer_) {
    c->ch.send(reply_error(f.id, ENOTSUP, "set_network: this sandbox has no egress proxy (it was started without allowed hosts)"));
    return true;
  }
  auto r = network_changer_(change);
  if (!r) {
    c->ch.send(reply_error(f.id, EINVAL, "set_network: " + r.error().str()));
    return true;
  }
  if (verbose_) std::fprintf(stderr, "exguardian: session: egress rules replaced: %s\n", r->c_str());
  c->ch.send(reply_ok(f.id, {{"rules", *r}}));
  return true;
}

void ControlRelay::from_agent() {
  for (;;) {
    auto item = agent_.next();
    if (item.error) {
      if (verbose_) std::fprintf(stderr, "exguardian: session: bad frame from the agent: %s\n", item.error->what.c_str());
      continue;
    }
    if (!item.frame) break;
    Frame& f = *item.frame;
    if (f.kind == Kind::Reply) {
      auto it = pending_.find(f.id);
      if (it == pending_.end()) continue;
      Pending p = it->second;
      pending_.erase(it);
      bool ok = f.header.value("ok", false);
      if (ok && p.client) {
        if (p.op == "start") process_owners_[header_int(f.header, "pid")].insert(p.client);
        if (p.op == "attach") process_owners_[p.pid].insert(p.client);
        if (p.op == "watch") watch_owner_[header_int(f.header, "watch")] = p.client;
      }
      if (ok && p.op == "unwatch") watch_owner_.erase(p.watch);
      if (!p.client) continue;
      f.id = p.client_id;
      p.client->ch.send(f);
      continue;
    }
    if (f.kind != Kind::Event) continue;
    if (f.header.value("event", "") == "ready" && !user_said_) {
      // Who the sandbox's user is and where its home is, as the agent itself
      // runs: a front end (serve) learns it here on every layer (in a microVM
      // guest pid 1 is the guest's init, so its /proc/1 says nothing of it).
      // The guest's agent is on the far side of the wall: its fields are
      // checked, and a control character never reaches the line.
      user_said_ = true;
      auto id_of = [&](const char* k) -> unsigned long long {
        auto it = f.header.find(k);
        return it != f.header.end() && it->is_number_unsigned() ? it->get<uint64_t>() : ~0ULL;
      };
      auto cwd_it = f.header.find("cwd");
      std::string home = cwd_it != f.header.end() && cwd_it->is_string() ? cwd_it->get<std::string>() : "/";
      for (char& c : home)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
      if (id_of("uid") <= 0xfffffffeULL && id_of("gid") <= 0xfffffffeULL)
        std::fprintf(stderr, "exguardian: session %s user uid %llu gid %llu home %s\n", sandbox_id_.c_str(), id_of("uid"),
                     id_of("gid"), home.c_str());
      else
        std::fprintf(stderr, "exguardian: session %s: the agent's ready event has no valid uid and gid\n", sandbox_id_.c_str());
    }
    if (inside_.take(f)) continue;
    std::string ev = f.header.value("event", "");
    if (ev == "stdout" || ev == "stderr" || ev == "exit") {
      int pid = header_int(f.header, "pid");
      auto it = process_owners_.find(pid);
      if (it == process_owners_.end()) continue;
      for (Conn* c : it->second) c->ch.send(f);
      if (ev == "exit") process_owners_.erase(it);
    } else if (ev == "watch") {
      int w = header_int(f.header, "watch");
      auto it = watch_owner_.find(w);
      if (it == watch_owner_.end()) continue;
      it->second->ch.send(f);
      auto mask = f.header.value("mask", nlohmann::json::array());
      if (std::find(mask.begin(), mask.end(), "ignored") != mask.end()) watch_owner_.erase(it);
    } else if (verbose_ && ev == "ready" && !inside_.walls().empty()) {
      for (const auto& w : inside_.walls()) std::fprintf(stderr, "exguardian: session: in the guest: %s\n", w.c_str());
    } else if (verbose_) {
      std::fprintf(stderr, "exguardian: session: agent %s\n", f.header.dump().c_str());
    }
  }
}

void ControlRelay::drop(Conn* c) {
  for (auto& [pid, owners] : process_owners_) owners.erase(c);
  std::erase_if(process_owners_, [](auto& kv) { return kv.second.empty(); });
  for (auto& [id, p] : pending_)
    if (p.client == c) p.client = nullptr;
  // Its watches end with it; its processes go on (attach finds them again).
  for (auto it = watch_owner_.begin(); it != watch_owner_.end();) {
    if (it->second != c) {
      ++it;
      continue;
    }
    if (agent_) {
      uint32_t id = next_agent_id_++;
      pending_[id] = Pending{nullptr, 0, to_string(Op::Unwatch), 0, it->first};
      agent_.send(Frame{Kind::Request, id, request::unwatch(it->first), {}});
    }
    it = watch_owner_.erase(it);
  }
  std::erase_if(clients_, [c](auto& x) { return x.get() == c; });
}

}  // namespace exg::agent
