// The netlink half of transparent egress capture: see capture_rules.hpp.
#include "walls/capture_rules.hpp"

#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace exg::walls {

namespace {

// A netlink message buffer: messages, attributes and nests, 4-byte aligned.
class NlBuffer {
 public:
  size_t begin(uint16_t type, uint16_t flags, const void* fixed, size_t fixed_len) {
    size_t at = buf_.size();
    nlmsghdr h{};
    h.nlmsg_type = type;
    h.nlmsg_flags = flags;
    h.nlmsg_seq = ++seq_;
    append(&h, sizeof h);
    append(fixed, fixed_len);
    msg_ = at;
    return seq_;
  }
  void end() { header(msg_)->nlmsg_len = static_cast<uint32_t>(buf_.size() - msg_); }
  void attr(uint16_t type, const void* data, size_t len) {
    nlattr a{};
    a.nla_type = type;
    a.nla_len = static_cast<uint16_t>(NLA_HDRLEN + len);
    append(&a, sizeof a);
    append(data, len);
  }
  void str(uint16_t type, const char* s) { attr(type, s, std::strlen(s) + 1); }
  void be32(uint16_t type, uint32_t v) {
    v = htonl(v);
    attr(type, &v, sizeof v);
  }
  void u32(uint16_t type, uint32_t v) { attr(type, &v, sizeof v); }
  size_t nest() {
    size_t at = buf_.size();
    nlattr a{};
    append(&a, sizeof a);
    return at;
  }
  void nest_end(size_t at, uint16_t type) {
    nlattr a{};
    a.nla_type = static_cast<uint16_t>(type | NLA_F_NESTED);
    a.nla_len = static_cast<uint16_t>(buf_.size() - at);
    std::memcpy(buf_.data() + at, &a, sizeof a);
  }
  const std::string& bytes() const { return buf_; }

 private:
  void append(const void* p, size_t n) {
    buf_.append(static_cast<const char*>(p), n);
    buf_.append(NLMSG_ALIGN(n) - n, '\0');
  }
  nlmsghdr* header(size_t at) { return reinterpret_cast<nlmsghdr*>(buf_.data() + at); }
  std::string buf_;
  size_t msg_ = 0;
  uint32_t seq_ = 0;
};

// Sends `b` on the netlink socket `s` and reads one ack per message that
// asked for one. 0, or the first error's errno.
int send_and_check(int s, const NlBuffer& b, int acks) {
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  int err = 0;
  if (::sendto(s, b.bytes().data(), b.bytes().size(), 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0)
    err = errno;
  // The kernel handles a request (a whole nftables batch too) within sendto:
  // the acks are queued when it returns.
  alignas(nlmsghdr) char buf[8192];
  while (!err && acks > 0) {
    ssize_t n = ::recv(s, buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0) {
      err = errno == EAGAIN ? EPROTO : errno;  // fewer acks than messages
      break;
    }
    int len = static_cast<int>(n);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
      if (h->nlmsg_type != NLMSG_ERROR) continue;
      auto* e = static_cast<nlmsgerr*>(NLMSG_DATA(h));
      if (e->error) {
        err = -e->error;
        break;
      }
      --acks;
    }
  }
  return err;
}

// A netlink socket of `protocol` in the current netns, or -1 (errno set).
int netlink_socket(int protocol) { return ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, protocol); }

// ip route add default dev lo src 127.0.0.1
// (The source must be given: lo's 127.0.0.1 has host scope, which a route of
// link scope does not pick, and a connection from 0.0.0.0 gets no replies.)
// lo is interface 1 in every netns (the kernel's LOOPBACK_IFINDEX), so the
// caller need not be in the target netns to name it.
int add_default_route_via_lo(int route_sock) {
  constexpr uint32_t lo = 1;
  NlBuffer b;
  rtmsg rt{};
  rt.rtm_family = AF_INET;
  rt.rtm_table = RT_TABLE_MAIN;
  rt.rtm_protocol = RTPROT_BOOT;
  rt.rtm_scope = RT_SCOPE_LINK;
  rt.rtm_type = RTN_UNICAST;
  b.begin(RTM_NEWROUTE, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK, &rt, sizeof rt);
  b.u32(RTA_OIF, lo);
  const in_addr src{htonl(INADDR_LOOPBACK)};
  b.attr(RTA_PREFSRC, &src, sizeof src);
  b.end();
  return send_and_check(route_sock, b, 1);
}

// The nftables messages, as `nft -f` would send them for:
//   table ip exguardian {
//     chain capture { type nat hook output priority -100; ip daddr != 127.0.0.0/8 meta l4proto tcp redirect to :PORT }
//     chain refuse { type filter hook output priority 0; ip daddr != 127.0.0.0/8 meta l4proto != tcp drop }
//   }
class NftBatch {
 public:
  explicit NftBatch(NlBuffer& b) : b_(b) {}

  void batch(uint16_t type) {
    nfgenmsg g{AF_UNSPEC, NFNETLINK_V0, htons(NFNL_SUBSYS_NFTABLES)};
    b_.begin(type, NLM_F_REQUEST, &g, sizeof g);
    b_.end();
  }
  void table() {
    msg(NFT_MSG_NEWTABLE, NLM_F_CREATE);
    b_.str(NFTA_TABLE_NAME, table_);
    b_.end();
  }
  void chain(const char* name, const char* type, int32_t priority, uint32_t hooknum = NF_INET_LOCAL_OUT) {
    msg(NFT_MSG_NEWCHAIN, NLM_F_CREATE);
    b_.str(NFTA_CHAIN_TABLE, table_);
    b_.str(NFTA_CHAIN_NAME, name);
    size_t hook = b_.nest();
    b_.be32(NFTA_HOOK_HOOKNUM, hooknum);
    b_.be32(NFTA_HOOK_PRIORITY, static_cast<uint32_t>(priority));
    b_.nest_end(hook, NFTA_CHAIN_HOOK);
    b_.be32(NFTA_CHAIN_POLICY, NF_ACCEPT);
    b_.str(NFTA_CHAIN_TYPE, type);
    b_.end();
  }
  // A rule: not to loopback, TCP or not, then the redirect or the drop; with
  // `dnat`, a DNAT to 127.0.0.1:redirect_port instead of the redirect (in
  // prerouting a redirect goes to the incoming interface's address, where the
  // listener is not).
  void rule(const char* chain, bool tcp, uint16_t redirect_port, bool dnat = false) {
    size_t list = begin_rule(chain);
    not_to_loopback();
    l4proto(tcp ? NFT_CMP_EQ : NFT_CMP_NEQ, IPPROTO_TCP);
    const uint16_t port = htons(redirect_port);
    if (tcp && dnat) {
      dnat_to(htonl(INADDR_LOOPBACK), redirect_port);
    } else if (tcp) {
      immediate(NFT_REG_1, &port, 2);  // the port -> reg 1
      size_t e = expr("redir");
      b_.be32(NFTA_REDIR_REG_PROTO_MIN, NFT_REG_1);
      expr_end(e);
    } else {
      verdict(NF_DROP);
    }
    end_rule(list);
  }
  // ip daddr != 127.0.0.0/8 udp dport DPORT dnat to ADDR:PORT (addr in network order).
  void udp_dnat_rule(const char* chain, uint16_t dport, uint32_t addr, uint16_t to_port) {
    size_t list = begin_rule(chain);
    not_to_loopback();
    l4proto(NFT_CMP_EQ, IPPROTO_UDP);
    const uint16_t want = htons(dport);
    payload_is(NFT_PAYLOAD_TRANSPORT_HEADER, 2, &want, 2);  // udp dport
    dnat_to(addr, to_port);
    end_rule(list);
  }
  // Inserted first in `chain`: ip saddr ADDR udp sport PORT accept (addr in network order).
  void udp_accept_from_rule(const char* chain, uint32_t saddr, uint16_t sport) {
    size_t list = begin_rule(chain, false);
    payload_is(NFT_PAYLOAD_NETWORK_HEADER, 12, &saddr, 4);  // ip saddr
    l4proto(NFT_CMP_EQ, IPPROTO_UDP);
    const uint16_t want = htons(sport);
    payload_is(NFT_PAYLOAD_TRANSPORT_HEADER, 0, &want, 2);  // udp sport
    verdict(NF_ACCEPT);
    end_rule(list);
  }
  int acks = 0;

 private:
  const char* table_ = "exguardian";

 public:
  void name_table(const char* t) { table_ = t; }

 private:
  size_t begin_rule(const char* chain, bool append = true) {
    msg(NFT_MSG_NEWRULE, static_cast<uint16_t>(NLM_F_CREATE | (append ? NLM_F_APPEND : 0)));
    b_.str(NFTA_RULE_TABLE, table_);
    b_.str(NFTA_RULE_CHAIN, chain);
    return b_.nest();
  }
  void end_rule(size_t list) {
    b_.nest_end(list, NFTA_RULE_EXPRESSIONS);
    b_.end();
  }
  void not_to_loopback() {
    load_payload(NFT_PAYLOAD_NETWORK_HEADER, 16, 4);  // ip daddr
    {  // bitwise: reg 1 &= 255.0.0.0
      size_t e = expr("bitwise");
      b_.be32(NFTA_BITWISE_SREG, NFT_REG_1);
      b_.be32(NFTA_BITWISE_DREG, NFT_REG_1);
      b_.be32(NFTA_BITWISE_LEN, 4);
      const uint8_t mask[4] = {255, 0, 0, 0}, zero[4] = {};
      data(NFTA_BITWISE_MASK, mask, 4);
      data(NFTA_BITWISE_XOR, zero, 4);
      expr_end(e);
    }
    const uint8_t loopback[4] = {127, 0, 0, 0};  // cmp: reg 1 != 127.0.0.0
    cmp(NFT_CMP_NEQ, loopback, 4);
  }
  // payload at BASE+OFFSET, LEN bytes -> reg 1
  void load_payload(uint32_t base, uint32_t offset, uint32_t len) {
    size_t e = expr("payload");
    b_.be32(NFTA_PAYLOAD_DREG, NFT_REG_1);
    b_.be32(NFTA_PAYLOAD_BASE, base);
    b_.be32(NFTA_PAYLOAD_OFFSET, offset);
    b_.be32(NFTA_PAYLOAD_LEN, len);
    expr_end(e);
  }
  void payload_is(uint32_t base, uint32_t offset, const void* want, uint32_t len) {
    load_payload(base, offset, len);
    cmp(NFT_CMP_EQ, want, len);
  }
  void verdict(uint32_t code) {
    size_t e = expr("immediate");
    b_.be32(NFTA_IMMEDIATE_DREG, NFT_REG_VERDICT);
    size_t d = b_.nest();
    size_t v = b_.nest();
    b_.be32(NFTA_VERDICT_CODE, code);
    b_.nest_end(v, NFTA_DATA_VERDICT);
    b_.nest_end(d, NFTA_IMMEDIATE_DATA);
    expr_end(e);
  }
  // meta l4proto -> reg 1; `op` proto
  void l4proto(uint32_t op, uint8_t proto) {
    size_t e = expr("meta");
    b_.be32(NFTA_META_DREG, NFT_REG_1);
    b_.be32(NFTA_META_KEY, NFT_META_L4PROTO);
    expr_end(e);
    cmp(op, &proto, 1);
  }
  // dnat to ADDR (network order):PORT
  void dnat_to(uint32_t addr, uint16_t to_port) {
    const uint16_t port = htons(to_port);
    immediate(NFT_REG_1, &addr, 4);  // the address -> reg 1
    immediate(NFT_REG_2, &port, 2);  // the port -> reg 2
    size_t e = expr("nat");
    b_.be32(NFTA_NAT_TYPE, NFT_NAT_DNAT);
    b_.be32(NFTA_NAT_FAMILY, NFPROTO_IPV4);
    b_.be32(NFTA_NAT_REG_ADDR_MIN, NFT_REG_1);
    b_.be32(NFTA_NAT_REG_PROTO_MIN, NFT_REG_2);
    expr_end(e);
  }
  void msg(uint16_t type, uint16_t flags) {
    nfgenmsg g{NFPROTO_IPV4, NFNETLINK_V0, 0};
    b_.begin(static_cast<uint16_t>((NFNL_SUBSYS_NFTABLES << 8) | type), NLM_F_REQUEST | NLM_F_ACK | flags, &g, sizeof g);
    ++acks;
  }
  size_t expr(const char* name) {
    size_t elem = b_.nest();
    b_.str(NFTA_EXPR_NAME, name);
    size_t d = b_.nest();
    nests_[depth_++] = elem;
    return d;
  }
  void expr_end(size_t d) {
    b_.nest_end(d, NFTA_EXPR_DATA);
    b_.nest_end(nests_[--depth_], NFTA_LIST_ELEM);
  }
  void data(uint16_t type, const void* p, size_t n) {
    size_t d = b_.nest();
    b_.attr(NFTA_DATA_VALUE, p, n);
    b_.nest_end(d, type);
  }
  void immediate(uint32_t reg, const void* p, size_t n) {
    size_t e = expr("immediate");
    b_.be32(NFTA_IMMEDIATE_DREG, reg);
    data(NFTA_IMMEDIATE_DATA, p, n);
    expr_end(e);
  }
  void cmp(uint32_t op, const void* p, size_t n) {
    size_t e = expr("cmp");
    b_.be32(NFTA_CMP_SREG, NFT_REG_1);
    b_.be32(NFTA_CMP_OP, op);
    data(NFTA_CMP_DATA, p, n);
    expr_end(e);
  }
  NlBuffer& b_;
  size_t nests_[4] = {};
  int depth_ = 0;
};

int add_capture_rules(int nft_sock, uint16_t port) {
  NlBuffer b;
  NftBatch n(b);
  n.batch(NFNL_MSG_BATCH_BEGIN);
  n.table();
  n.chain("capture", "nat", -100);  // NF_IP_PRI_NAT_DST
  n.chain("refuse", "filter", 0);
  n.rule("capture", true, port);
  n.rule("refuse", false, 0);
  n.batch(NFNL_MSG_BATCH_END);
  return send_and_check(nft_sock, b, n.acks);
}

int add_forwarded_rules(int nft_sock, uint16_t port, const ForwardedResolver& resolver) {
  NlBuffer b;
  NftBatch n(b);
  n.name_table("exguardian-nested");
  n.batch(NFNL_MSG_BATCH_BEGIN);
  n.table();
  n.chain("capture", "nat", -100, NF_INET_PRE_ROUTING);
  n.rule("capture", true, port, true);
  if (resolver.address) {
    n.udp_dnat_rule("capture", 53, resolver.address, resolver.port);
    // The resolver's answers to them leave through the guest's own output
    // hook, whose refuse chain drops UDP not to loopback: this one source and
    // port (the resolver's, bound by pid 1's relay) is let out before it.
    n.name_table("exguardian");
    n.udp_accept_from_rule("refuse", resolver.address, resolver.port);
  }
  n.batch(NFNL_MSG_BATCH_END);
  return send_and_check(nft_sock, b, n.acks);
}

}  // namespace

int add_forwarded_capture(uint16_t port, const ForwardedResolver& resolver, std::string* what) {
  int nft = netlink_socket(NETLINK_NETFILTER);
  int e = nft < 0 ? errno : add_forwarded_rules(nft, port, resolver);
  if (nft >= 0) ::close(nft);
  if (e) {
    if (what) *what = "transparent egress: the nftables DNAT of forwarded traffic (prerouting)";
    return e;
  }
  int f = ::open("/proc/sys/net/ipv4/conf/all/route_localnet", O_WRONLY | O_CLOEXEC);
  if (f < 0 || ::write(f, "1", 1) != 1) {
    e = errno;
    if (f >= 0) ::close(f);
    if (what) *what = "transparent egress: net.ipv4.conf.all.route_localnet";
    return e ? e : EIO;
  }
  ::close(f);
  return 0;
}

int capture_listener(uint16_t port, std::string* what) {
  auto fail = [&](const char* w, int err, int fd = -1) {
    if (fd >= 0) ::close(fd);
    if (what) *what = w;
    errno = err;
    return -1;
  };
  int l = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (l < 0) return fail("transparent egress: listener socket", errno);
  int one = 1;
  ::setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(l, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0)
    return fail("transparent egress: bind its listener on 127.0.0.1", errno, l);
  if (::listen(l, 1024) != 0) return fail("transparent egress: listen", errno, l);
  return l;
}

int add_capture_routing(int route_sock, int nft_sock, uint16_t port, std::string* what) {
  if (int e = add_default_route_via_lo(route_sock)) {
    if (what) *what = "transparent egress: a default route through lo (rtnetlink)";
    return e;
  }
  if (int e = add_capture_rules(nft_sock, port)) {
    if (what) *what = "transparent egress: the nftables redirect (nf_tables in the sandbox's netns)";
    return e;
  }
  return 0;
}

int set_up_transparent_capture(uint16_t port, std::string* what) {
  int l = capture_listener(port, what);
  if (l < 0) return -1;
  int route = netlink_socket(NETLINK_ROUTE), nft = netlink_socket(NETLINK_NETFILTER);
  int e = 0;
  if (route < 0 || nft < 0) {
    e = errno;
    if (what) *what = "transparent egress: netlink sockets";
  } else {
    e = add_capture_routing(route, nft, port, what);
  }
  for (int fd : {route, nft})
    if (fd >= 0) ::close(fd);
  if (e == 0) return l;
  ::close(l);
  errno = e;
  return -1;
}

}  // namespace exg::walls
