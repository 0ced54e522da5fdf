// The host's own addresses, followed for as long as a proxy runs (issue 39.3):
// an address the host gains during a run (DHCP, a VPN, a bridge coming up) is
// refused from the moment it appears, like the ones it had at the start.
//
// HostAddresses is the set the proxy checks (Rules::check_address) plus what
// changed in it, fed from the kernel's address notifications; HostAddressWatch
// is the NETLINK_ROUTE socket that feeds it (RTMGRP_IPV4_IFADDR |
// RTMGRP_IPV6_IFADDR, in the network namespace of the process that opens it:
// the supervisor's, i.e. the host's side of the proxy).
//
// The bound (what holds, and why nothing newer slips through): the kernel
// queues an address's RTM_NEWADDR on every subscribed socket within the same
// call that adds the address, before that call returns. So after the proxy has
// connected to an address (connect(2) has returned), every address the host had
// when the kernel routed that connection is already in the watch's queue; the
// proxy reads the queue then (sync(), one non-blocking recv, usually EAGAIN)
// and refuses the connection, before one byte of the client's goes up or down,
// when its address is one of the host's now, or became one after the
// connection was judged (even if it was removed again since), or the
// notifications overflowed meanwhile. The check at the decision itself reads
// the set only (no syscall); it keeps known addresses from being connected at
// all. An address gained after connect(2) returned does not change where that
// connection goes.
#pragma once
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "egress/rules.hpp"
#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace exg::egress {

// Used on one thread (the proxy's loop), or filled once before it starts.
class HostAddresses {
 public:
  HostAddresses() = default;
  explicit HostAddresses(const std::vector<IpAddress>& fixed);  // a list that never changes (tests, callers without a watch)

  // a, its IPv4-mapped form, or the IPv4 address inside a NAT64/6to4/compatible form, is one of them now.
  bool contains(const IpAddress& a) const;
  // Where the history stands: gained_since() asks about what came after.
  uint64_t mark() const { return generation_; }
  // Whether a connection judged at `mark` to `a` may have reached this host:
  // a is one of its addresses now, became one after the mark (even if removed
  // again), or the notifications overflowed after the mark (what happened then is unknown).
  bool gained_since(const IpAddress& a, uint64_t mark) const;

  // The kernel's messages: RTM_NEWADDR / RTM_DELADDR (others are skipped).
  // An address counts once per interface: removed from one of two, it stays.
  // false when the buffer is not a sequence of whole netlink messages.
  bool apply(const void* buf, size_t len);
  // The whole list as re-read after an overflow (ENOBUFS): replaces the set;
  // every connection judged before counts as judged blind (gained_since).
  void replace_after_overflow(HostAddresses now);
  // An overflow whose re-read failed: every address counts as the host's
  // (refused) until a re-read succeeds.
  void blind_after_overflow();
  bool blind() const { return blind_; }

  std::vector<IpAddress> list() const;  // each address once

 private:
  struct Entry {
    IpAddress addr;
    int ifindex = 0;
  };
  void add(const IpAddress& a, int ifindex);
  void remove(const IpAddress& a, int ifindex);
  bool matches(const IpAddress& own, const IpAddress& a) const;
  std::vector<Entry> now_;
  // The generation at which each address (by value) was last added: a few per
  // interface the host ever had, never more than the addresses it was given.
  std::vector<std::pair<IpAddress, uint64_t>> added_;
  uint64_t generation_ = 0, overflow_at_ = 0;
  bool blind_ = false;
};

// One recv(2) of netlink messages: the buffers are on the heap (new char[] is
// aligned for nlmsghdr), never static thread_local, which would put them in
// every thread's static TLS block, zeroed by the loader at each exguardian
// start and each thread's creation.
constexpr size_t kNetlinkReadSize = 65536;

// Reads the list from the kernel now (an RTM_GETADDR dump on a socket of its
// own), in the caller's network namespace. An error when netlink cannot be
// opened or answers badly.
Result<HostAddresses> dump_host_addresses();

// The subscription. open() subscribes first, then dumps: a change during the
// dump is both in the dump or not and in the queue, and applying it again is
// harmless. A socket that cannot be opened is an error (the caller does not
// start: a proxy that cannot follow the host's addresses would let the next
// one through).
class HostAddressWatch : public std::enable_shared_from_this<HostAddressWatch> {
 public:
  static Result<std::shared_ptr<HostAddressWatch>> open();
  ~HostAddressWatch();
  HostAddressWatch(const HostAddressWatch&) = delete;
  HostAddressWatch& operator=(const HostAddressWatch&) = delete;

  // The set, kept current by sync() and by the loop's reads after start().
  std::shared_ptr<const HostAddresses> addresses() const { return set_; }
  // Applies everything queued now (non-blocking); after an overflow, re-reads
  // the whole list (if that fails, the set refuses every address until a
  // later re-read succeeds: nothing is let through blind).
  void sync();
  // Reads as notifications arrive, on `io`'s loop, until stop() (which the
  // proxy calls while the loop still exists).
  void start(boost::asio::io_context& io);
  void stop();
  int fd() const { return fd_.get(); }

 private:
  HostAddressWatch() = default;
  void arm();
  UniqueFd fd_;
  std::shared_ptr<HostAddresses> set_ = std::make_shared<HostAddresses>();
  std::unique_ptr<boost::asio::posix::stream_descriptor> waiter_;
  bool overflowed_ = false;  // ENOBUFS seen, the list not yet re-read
  std::unique_ptr<char[]> buf_ = std::unique_ptr<char[]>(new char[kNetlinkReadSize]);  // sync()'s reads (one thread: see HostAddresses)
};

}  // namespace exg::egress
