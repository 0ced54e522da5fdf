#include "microvm/egress_bridge.hpp"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstdio>
#include <cstdlib>

#include "microvm/egress_mux.hpp"

namespace exg::microvm {

namespace {

bool fill_address(sockaddr_un& sa, const std::string& path) {
  sa = {};
  sa.sun_family = AF_UNIX;
  if (path.size() >= sizeof sa.sun_path) return false;
  std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path.c_str());
  return true;
}

Result<UniqueFd> listen_on(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return fail(Error::sys("microvm egress: socket"));
  sockaddr_un sa;
  if (!fill_address(sa, path)) return fail(Error::msg("microvm egress: " + path, "socket path too long"));
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd.get(), SOMAXCONN) != 0)
    return fail(Error::sys("microvm egress: listen on " + path));
  return fd;
}

// A connection to the proxy for one guest stream; -1 refuses the stream.
int connect_to(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  sockaddr_un sa;
  if (!fill_address(sa, path) || ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    ::close(fd);  // (EAGAIN: the proxy's backlog is full; the guest's client sees its connection closed)
    return -1;
  }
  return fd;
}

}  // namespace

Result<std::unique_ptr<EgressBridge>> EgressBridge::make() {
  std::unique_ptr<EgressBridge> b(new EgressBridge());
  char tmpl[] = "/tmp/exguardian-microvm-egress-XXXXXX";
  if (!::mkdtemp(tmpl)) return fail(Error::sys("microvm egress: mkdtemp /tmp/exguardian-microvm-egress-*"));
  b->dir_ = tmpl;
  b->http_path_ = b->dir_ + "/http";
  b->socks_path_ = b->dir_ + "/socks";
  auto h = listen_on(b->http_path_);
  if (!h) return fail(h.error());
  b->http_listener = std::move(*h);
  auto s = listen_on(b->socks_path_);
  if (!s) return fail(s.error());
  b->socks_listener = std::move(*s);
  // The sockets' names go at once: connections reach them through O_PATH
  // descriptors of their inodes (/proc/self/fd/N), so nothing is left on disk
  // even when this process is killed, and no other process has a name to use.
  b->http_inode_.reset(::open(b->http_path_.c_str(), O_PATH | O_CLOEXEC));
  b->socks_inode_.reset(::open(b->socks_path_.c_str(), O_PATH | O_CLOEXEC));
  ::unlink(b->http_path_.c_str());
  ::unlink(b->socks_path_.c_str());
  ::rmdir(b->dir_.c_str());
  if (!b->http_inode_ || !b->socks_inode_) return fail(Error::sys("microvm egress: open the proxy's sockets (O_PATH)"));
  b->http_path_ = "/proc/self/fd/" + std::to_string(b->http_inode_.get());
  b->socks_path_ = "/proc/self/fd/" + std::to_string(b->socks_inode_.get());
  b->dir_.clear();
  b->stop_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!b->stop_) return fail(Error::sys("microvm egress: eventfd"));
  return b;
}

Result<void> EgressBridge::start(UniqueFd channel) {
  channel_ = std::move(channel);
  try {
    thread_ = std::thread([this] {
      egress_mux::Config cfg;
      cfg.channel = channel_.get();
      cfg.stop_fd = stop_.get();
      cfg.connect = [this](egress_mux::Target t) {
        return connect_to(t == egress_mux::Target::Socks ? socks_path_ : http_path_);
      };
      (void)egress_mux::run(cfg);
    });
  } catch (const std::system_error& e) {
    return fail(Error::msg("microvm egress: the bridge's thread", e.what()));
  }
  return {};
}

EgressBridge::~EgressBridge() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    (void)!::write(stop_.get(), &one, sizeof one);
    thread_.join();
  }
  if (!dir_.empty()) {  // (a make() that failed half way)
    ::unlink((dir_ + "/http").c_str());
    ::unlink((dir_ + "/socks").c_str());
    ::rmdir(dir_.c_str());
  }
}

}  // namespace exg::microvm
