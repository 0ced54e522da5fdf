#include "microvm/egress_bridge.hpp"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cstdio>
#include <cstdlib>

#include "egress/dns.hpp"
#include "egress/transparent.hpp"

static_assert(exg::microvm::egress_mux::kDestinationBytes == exg::egress::kDestinationPreambleBytes,
              "the guest's claim is the proxy's preamble, byte for byte");
static_assert(exg::microvm::egress_mux::kDnsSourceBytes == exg::egress::detail::kDnsStreamPreambleBytes,
              "the guest's asker is the resolver's stream preamble, byte for byte");


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
  struct Each {
    const char* name;
    Endpoint& end;
    UniqueFd& listener;
  };
  Each all[] = {{"http", b->http_, b->http_listener},
                {"socks", b->socks_, b->socks_listener},
                {"transparent", b->transparent_, b->transparent_listener},
                {"dns", b->dns_, b->dns_listener}};
  for (auto& e : all) {
    e.end.path = b->dir_ + "/" + e.name;
    auto l = listen_on(e.end.path);
    if (!l) return fail(l.error());
    e.listener = std::move(*l);
  }
  // The sockets' names go at once: connections reach them through O_PATH
  // descriptors of their inodes (/proc/self/fd/N), so nothing is left on disk
  // even when this process is killed, and no other process has a name to use.
  for (auto& e : all) {
    e.end.inode.reset(::open(e.end.path.c_str(), O_PATH | O_CLOEXEC));
    ::unlink(e.end.path.c_str());
  }
  ::rmdir(b->dir_.c_str());
  b->dir_.clear();
  for (auto& e : all) {
    if (!e.end.inode) return fail(Error::sys("microvm egress: open the proxy's sockets (O_PATH)"));
    e.end.path = "/proc/self/fd/" + std::to_string(e.end.inode.get());
  }
  b->stop_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!b->stop_) return fail(Error::sys("microvm egress: eventfd"));
  return b;
}

int EgressBridge::connect(egress_mux::Target t, std::string_view destination) const {
  using egress_mux::Target;
  if (t == Target::Http || t == Target::Socks) return connect_to(t == Target::Socks ? socks_.path : http_.path);
  // The guest's claims, written before anything of its client's: for a
  // Transparent stream the destination, the preamble the transparent relay
  // listener reads in place of SO_ORIGINAL_DST (judged there, like any address
  // a client names); for a Dns stream who asked, which only labels the
  // resolver's audit lines (a nested container's query).
  const bool dns = t == Target::Dns;
  if (destination.size() != (dns ? egress_mux::kDnsSourceBytes : egress_mux::kDestinationBytes)) return -1;
  int fd = connect_to(dns ? dns_.path : transparent_.path);
  if (fd < 0) return -1;
  // A fresh socket's buffer takes the preamble at once; anything else refuses the stream.
  if (::send(fd, destination.data(), destination.size(), MSG_NOSIGNAL | MSG_DONTWAIT) !=
      static_cast<ssize_t>(destination.size())) {
    ::close(fd);
    return -1;
  }
  return fd;
}

Result<void> EgressBridge::start(UniqueFd channel) {
  channel_ = std::move(channel);
  try {
    thread_ = std::thread([this] {
      egress_mux::Config cfg;
      cfg.channel = channel_.get();
      cfg.stop_fd = stop_.get();
      cfg.connect = [this](egress_mux::Target t, std::string_view destination) { return connect(t, destination); };
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
    for (const char* n : {"/http", "/socks", "/transparent", "/dns"}) ::unlink((dir_ + n).c_str());
    ::rmdir(dir_.c_str());
  }
}

}  // namespace exg::microvm
