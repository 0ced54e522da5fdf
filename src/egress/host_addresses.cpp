// The host's own addresses as the kernel announces them (host_addresses.hpp
// states the bound the proxy relies on).
#include "egress/host_addresses.hpp"

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace exg::egress {

HostAddresses::HostAddresses(const std::vector<IpAddress>& fixed) {
  for (const auto& a : fixed) add(a, 0);
}

bool HostAddresses::matches(const IpAddress& own, const IpAddress& a) const {
  if (own == a || own == unmapped(a)) return true;
  auto inner = embedded_v4(a);
  return inner && own == *inner;
}

bool HostAddresses::contains(const IpAddress& a) const {
  if (blind_) return true;
  return std::any_of(now_.begin(), now_.end(), [&](const Entry& e) { return matches(e.addr, a); });
}

bool HostAddresses::gained_since(const IpAddress& a, uint64_t mark) const {
  if (contains(a) || overflow_at_ > mark) return true;
  return std::any_of(added_.begin(), added_.end(),
                     [&](const auto& e) { return e.second > mark && matches(e.first, a); });
}

void HostAddresses::add(const IpAddress& raw, int ifindex) {
  IpAddress a = unmapped(raw);
  ++generation_;
  bool known = std::any_of(now_.begin(), now_.end(), [&](const Entry& e) { return e.addr == a && e.ifindex == ifindex; });
  if (!known) now_.push_back(Entry{a, ifindex});
  auto h = std::find_if(added_.begin(), added_.end(), [&](const auto& e) { return e.first == a; });
  if (h == added_.end()) added_.emplace_back(a, generation_);
  else h->second = generation_;
}

void HostAddresses::remove(const IpAddress& raw, int ifindex) {
  IpAddress a = unmapped(raw);
  ++generation_;
  std::erase_if(now_, [&](const Entry& e) { return e.addr == a && e.ifindex == ifindex; });
}

bool HostAddresses::apply(const void* buf, size_t len) {
  // The netlink macros take non-const pointers; nothing here writes through them.
  auto* h = reinterpret_cast<nlmsghdr*>(const_cast<void*>(buf));
  int rem = static_cast<int>(len);
  for (; NLMSG_OK(h, rem); h = NLMSG_NEXT(h, rem)) {
    if (h->nlmsg_type != RTM_NEWADDR && h->nlmsg_type != RTM_DELADDR) continue;
    if (h->nlmsg_len < NLMSG_LENGTH(sizeof(ifaddrmsg))) return false;
    auto* ifa = reinterpret_cast<ifaddrmsg*>(NLMSG_DATA(h));
    if (ifa->ifa_family != AF_INET && ifa->ifa_family != AF_INET6) continue;
    const size_t alen = ifa->ifa_family == AF_INET ? 4 : 16;
    // IFA_LOCAL is this end's address where there is a peer (point-to-point
    // links: IFA_ADDRESS is the peer's then); else IFA_ADDRESS is (getifaddrs' choice).
    rtattr* local = nullptr;
    rtattr* address = nullptr;
    int attrs = static_cast<int>(IFA_PAYLOAD(h));
    for (rtattr* rta = IFA_RTA(ifa); RTA_OK(rta, attrs); rta = RTA_NEXT(rta, attrs)) {
      if (rta->rta_type == IFA_LOCAL) local = rta;
      else if (rta->rta_type == IFA_ADDRESS) address = rta;
    }
    rtattr* use = local ? local : address;
    if (!use || RTA_PAYLOAD(use) < alen) return false;
    IpAddress a;
    a.v6 = ifa->ifa_family == AF_INET6;
    std::memcpy(a.bytes, RTA_DATA(use), alen);
    if (h->nlmsg_type == RTM_NEWADDR) add(a, static_cast<int>(ifa->ifa_index));
    else remove(a, static_cast<int>(ifa->ifa_index));
  }
  return rem == 0;
}

void HostAddresses::replace_after_overflow(HostAddresses now) {
  const uint64_t g = generation_ + 1;
  now_ = std::move(now.now_);
  for (const Entry& e : now_) {
    auto h = std::find_if(added_.begin(), added_.end(), [&](const auto& x) { return x.first == e.addr; });
    if (h == added_.end()) added_.emplace_back(e.addr, g);
    else h->second = g;
  }
  generation_ = overflow_at_ = g;
  blind_ = false;
}

void HostAddresses::blind_after_overflow() {
  blind_ = true;
  overflow_at_ = ++generation_;
}

std::vector<IpAddress> HostAddresses::list() const {
  std::vector<IpAddress> out;
  for (const Entry& e : now_)
    if (std::find(out.begin(), out.end(), e.addr) == out.end()) out.push_back(e.addr);
  return out;
}

Result<HostAddresses> dump_host_addresses() {
  const std::string what = "list this host's addresses (netlink RTM_GETADDR)";
  std::unique_ptr<char[]> buf(new char[kNetlinkReadSize]);
  // A dump the kernel marks interrupted (the list changed while it was
  // written) is read again; a list that never holds still is an error.
  for (int attempt = 0; attempt < 8; ++attempt) {
    UniqueFd fd(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
    if (!fd) return fail(Error::sys(what));
    struct {
      nlmsghdr h;
      ifaddrmsg m;
    } req{};
    req.h.nlmsg_len = sizeof req;
    req.h.nlmsg_type = RTM_GETADDR;
    req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    req.h.nlmsg_seq = 1;
    req.m.ifa_family = AF_UNSPEC;
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    if (::sendto(fd.get(), &req, sizeof req, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0)
      return fail(Error::sys(what));
    HostAddresses out;
    bool done = false, interrupted = false;
    while (!done) {
      ssize_t n = ::recv(fd.get(), buf.get(), kNetlinkReadSize, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return fail(Error::sys(what));
      if (n == 0) return fail(Error::msg(what, "the kernel closed the socket"));
      int rem = static_cast<int>(n);
      for (auto* h = reinterpret_cast<nlmsghdr*>(buf.get()); NLMSG_OK(h, rem); h = NLMSG_NEXT(h, rem)) {
        if (h->nlmsg_flags & NLM_F_DUMP_INTR) interrupted = true;
        if (h->nlmsg_type == NLMSG_DONE) done = true;
        if (h->nlmsg_type == NLMSG_ERROR) {
          auto* e = reinterpret_cast<nlmsgerr*>(NLMSG_DATA(h));
          if (e->error != 0) return fail(Error::msg(what, std::strerror(-e->error)));
        }
      }
      if (!out.apply(buf.get(), static_cast<size_t>(n))) return fail(Error::msg(what, "a malformed answer"));
    }
    if (!interrupted) return out;
  }
  return fail(Error::msg(what, "the list kept changing while it was read"));
}

Result<std::shared_ptr<HostAddressWatch>> HostAddressWatch::open() {
  const std::string why = ": the proxy refuses the host's own addresses, so it cannot start without following them";
  std::shared_ptr<HostAddressWatch> w(new HostAddressWatch());
  w->fd_ = UniqueFd(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE));
  if (!w->fd_) return fail(Error::msg("egress", Error::sys("follow this host's addresses (netlink socket)").str() + why));
  // Room for bursts (a VPN bringing up many addresses); an overflow is handled
  // anyway (re-read), so the larger buffer is best effort (FORCE needs CAP_NET_ADMIN).
  int size = 1 << 20;
  if (::setsockopt(w->fd_.get(), SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) != 0)
    (void)::setsockopt(w->fd_.get(), SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  sa.nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR;
  if (::bind(w->fd_.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
    return fail(Error::msg("egress", Error::sys("follow this host's addresses (netlink bind)").str() + why));
  auto now = dump_host_addresses();
  if (!now) return fail(Error::msg("egress", now.error().str() + why));
  *w->set_ = std::move(*now);
  w->sync();  // what changed during the dump
  return w;
}

HostAddressWatch::~HostAddressWatch() { stop(); }

void HostAddressWatch::sync() {
  for (;;) {
    ssize_t n = ::recv(fd_.get(), buf_.get(), kNetlinkReadSize, MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      // ENOBUFS: the queue overflowed and messages were lost; read what is
      // left, then the whole list. Any other error: the same (state unknown).
      overflowed_ = true;
      if (errno == ENOBUFS) continue;
      break;
    }
    if (n == 0) break;
    if (!set_->apply(buf_.get(), static_cast<size_t>(n))) overflowed_ = true;
  }
  if (!overflowed_) return;
  auto now = dump_host_addresses();
  if (now) {
    set_->replace_after_overflow(std::move(*now));
    overflowed_ = false;
  } else {
    set_->blind_after_overflow();  // the next sync tries again
  }
}

void HostAddressWatch::start(boost::asio::io_context& io) {
  if (waiter_) return;
  waiter_ = std::make_unique<boost::asio::posix::stream_descriptor>(io, fd_.get());
  arm();
}

void HostAddressWatch::arm() {
  waiter_->async_wait(boost::asio::posix::stream_descriptor::wait_read,
                      [weak = weak_from_this()](const boost::system::error_code& ec) {
                        if (ec) return;
                        auto self = weak.lock();
                        if (!self || !self->waiter_) return;
                        self->sync();
                        self->arm();
                      });
}

void HostAddressWatch::stop() {
  if (!waiter_) return;
  boost::system::error_code ec;
  waiter_->cancel(ec);
  (void)waiter_->release();  // the fd stays ours (fd_)
  waiter_.reset();
}

}  // namespace exg::egress
