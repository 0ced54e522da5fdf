#include "microvm/guest/egress_mux.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>

namespace exg::microvm::egress_mux {

namespace {

void put_u32(std::string& s, uint32_t v) {
  char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
  s.append(b, 4);
}

uint32_t get_u32(const char* p) {
  auto u = [&](int i) { return static_cast<uint32_t>(static_cast<unsigned char>(p[i])); };
  return u(0) << 24 | u(1) << 16 | u(2) << 8 | u(3);
}

void set_nonblocking(int fd) {
  int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) ::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

// The channel is a unix socket on the host and a character device (the
// virtio port) in the guest: send() where it is a socket, so that a peer gone
// is EPIPE and never SIGPIPE.
ssize_t write_some(int fd, const char* p, size_t n) {
  ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
  if (w < 0 && errno == ENOTSOCK) w = ::write(fd, p, n);
  return w;
}

constexpr int kSoOriginalDst = 80;  // SO_ORIGINAL_DST (linux/netfilter_ipv4.h), level SOL_IP

// Who connected, as the Open frame tells the host (whose audit says "nested
// container" for any source outside 127/8). A connection the guest made itself
// whose route picked a source of another of its interfaces (a VPN's tun
// address, say) is the guest's own: it is sent as 127.0.0.1. An address is
// the guest's own when a socket can be bound to it; a nested container's
// (forwarded from its bridge) cannot.
uint32_t origin_of(const sockaddr_in& peer) {
  const uint32_t loopback = htonl(INADDR_LOOPBACK);
  if ((ntohl(peer.sin_addr.s_addr) >> 24) == 127) return peer.sin_addr.s_addr;
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return peer.sin_addr.s_addr;
  sockaddr_in own{};
  own.sin_family = AF_INET;
  own.sin_addr = peer.sin_addr;
  const bool local = ::bind(s, reinterpret_cast<sockaddr*>(&own), sizeof own) == 0;
  ::close(s);
  return local ? loopback : peer.sin_addr.s_addr;
}

struct Stream {
  int fd = -1;                // -1: a Dns stream (no socket of its own)
  bool dns = false;
  sockaddr_in dns_client{};   // a Dns stream's client, where its answer goes
  uint32_t credit = kWindow;  // bytes this side may still send to the peer
  std::string pending;        // from the peer, not yet written on fd
  size_t pos = 0;
  uint32_t consumed = 0;      // written on fd, not yet credited back
  bool read_eof = false;      // fd gave end of stream (Eof sent)
  bool peer_eof = false;      // the peer's Eof arrived
  bool write_shut = false;    // shutdown(SHUT_WR) done after the peer's Eof
  size_t unwritten() const { return pending.size() - pos; }
};

class Mux {
 public:
  explicit Mux(const Config& cfg) : cfg_(cfg) {}
  std::string run();

 private:
  const Config& cfg_;
  std::map<uint32_t, Stream> streams_;
  uint32_t next_id_ = 1;
  std::string out_, in_;
  size_t out_pos_ = 0, in_pos_ = 0;
  std::string ended_;
  size_t dns_streams_ = 0;

  size_t queued() const { return out_.size() - out_pos_; }
  void queue(Type t, uint32_t id, const char* data = nullptr, size_t n = 0) { out_ += encode(t, id, data, n); }
  void abort(uint32_t id, bool tell_peer);
  void finish_if_done(uint32_t id);
  void accept_on(int listener, Target t);
  void receive_dns();
  void dns_data(uint32_t id);
  void erase(std::map<uint32_t, Stream>::iterator it);
  void read_stream(uint32_t id);
  void write_stream(uint32_t id);
  bool read_channel();
  bool write_channel();
  bool on_frame(Type t, uint32_t id, const char* p, uint32_t n);
};

void Mux::erase(std::map<uint32_t, Stream>::iterator it) {
  if (it->second.fd >= 0) ::close(it->second.fd);
  if (it->second.dns) --dns_streams_;
  streams_.erase(it);
}

void Mux::abort(uint32_t id, bool tell_peer) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  erase(it);
  if (tell_peer) queue(Type::Close, id);
}

// Both directions ended: the peer's side reaches the same point by itself
// (its Eof came after all its data, ours after all of ours), so no Close.
void Mux::finish_if_done(uint32_t id) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  Stream& s = it->second;
  if (s.dns) {  // the host ended the stream before a whole answer
    if (s.peer_eof) abort(id, true);
    return;
  }
  if (s.peer_eof && s.unwritten() == 0 && !s.write_shut) {
    ::shutdown(s.fd, SHUT_WR);
    s.write_shut = true;
  }
  if (s.read_eof && s.write_shut) erase(it);
}

void Mux::accept_on(int listener, Target t) {
  sockaddr_in peer{};
  socklen_t peer_len = sizeof peer;
  int fd = ::accept4(listener, reinterpret_cast<sockaddr*>(&peer), &peer_len, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd < 0) return;
  char open[1 + kDestinationBytes] = {static_cast<char>(t)};
  size_t n = 1;
  if (t == Target::Transparent) {
    // Where the client meant to go, before netfilter redirected it here;
    // none: it connected to the listener itself, and is closed.
    sockaddr_in dst{};
    socklen_t len = sizeof dst;
    if (::getsockopt(fd, SOL_IP, kSoOriginalDst, &dst, &len) != 0 || dst.sin_family != AF_INET) {
      ::close(fd);
      return;
    }
    std::memcpy(open + 1, &dst.sin_addr.s_addr, 4);  // (both in network order already)
    std::memcpy(open + 5, &dst.sin_port, 2);
    const uint32_t origin = origin_of(peer);  // who connected (a nested container: not 127/8)
    std::memcpy(open + 7, &origin, 4);
    n += kDestinationBytes;
  }
  uint32_t id = next_id_++;
  if (next_id_ == 0) next_id_ = 1;  // (ids of streams long gone; the peer keeps none)
  Stream s;
  s.fd = fd;
  streams_.emplace(id, std::move(s));
  queue(Type::Open, id, open, n);
}

// One query from the resolver's socket: a stream of its own, the query sent
// whole with its length, then Eof.
void Mux::receive_dns() {
  char buf[kMaxDnsMessage + 1];
  sockaddr_in from{};
  socklen_t len = sizeof from;
  ssize_t r = ::recvfrom(cfg_.dns_socket, buf, sizeof buf, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&from), &len);
  if (r < static_cast<ssize_t>(kMinDnsMessage) || static_cast<size_t>(r) > kMaxDnsMessage || from.sin_family != AF_INET)
    return;  // (an error, a runt, an oversized datagram: dropped, as a resolver would)
  uint32_t id = next_id_++;
  if (next_id_ == 0) next_id_ = 1;
  Stream s;
  s.dns = true;
  s.dns_client = from;
  s.read_eof = true;
  std::string framed;
  framed.push_back(static_cast<char>(r >> 8));
  framed.push_back(static_cast<char>(r & 0xff));
  framed.append(buf, static_cast<size_t>(r));
  s.credit -= static_cast<uint32_t>(framed.size());
  streams_.emplace(id, std::move(s));
  ++dns_streams_;
  // The target, then who asked (a nested container's address, or the guest's own 127/8).
  char open[1 + kDnsSourceBytes];
  open[0] = static_cast<char>(Target::Dns);
  std::memcpy(open + 1, &from.sin_addr.s_addr, kDnsSourceBytes);
  queue(Type::Open, id, open, sizeof open);
  queue(Type::Data, id, framed.data(), framed.size());
  queue(Type::Eof, id);
}

// The host's answer so far on a Dns stream: once whole, to the client.
void Mux::dns_data(uint32_t id) {
  Stream& s = streams_.at(id);
  if (s.pending.size() < 2) return;
  size_t len = (static_cast<unsigned char>(s.pending[0]) << 8) | static_cast<unsigned char>(s.pending[1]);
  if (len > kMaxDnsMessage) return abort(id, true);
  if (s.pending.size() < 2 + len) return;
  (void)::sendto(cfg_.dns_socket, s.pending.data() + 2, len, MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&s.dns_client),
                 sizeof s.dns_client);  // (a full buffer drops the answer; the client asks again)
  abort(id, true);
}

void Mux::read_stream(uint32_t id) {
  Stream& s = streams_.at(id);
  char buf[kMaxData];
  size_t want = std::min<size_t>(s.credit, sizeof buf);
  ssize_t r = ::recv(s.fd, buf, want, MSG_DONTWAIT);
  if (r < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (r < 0) return abort(id, true);
  if (r == 0) {
    s.read_eof = true;
    queue(Type::Eof, id);
    return finish_if_done(id);
  }
  s.credit -= static_cast<uint32_t>(r);
  queue(Type::Data, id, buf, static_cast<size_t>(r));
}

void Mux::write_stream(uint32_t id) {
  Stream& s = streams_.at(id);
  while (s.unwritten()) {
    ssize_t w = ::send(s.fd, s.pending.data() + s.pos, s.unwritten(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) break;
    if (w <= 0) return abort(id, true);
    s.pos += static_cast<size_t>(w);
    s.consumed += static_cast<uint32_t>(w);
  }
  if (s.pos == s.pending.size()) {
    s.pending.clear();
    s.pos = 0;
  } else if (s.pos > kMaxData) {
    s.pending.erase(0, s.pos);
    s.pos = 0;
  }
  // Credit in batches (a quarter window, or all once the buffer is empty).
  if (s.consumed && (s.consumed >= kWindow / 4 || s.unwritten() == 0)) {
    std::string v;
    put_u32(v, s.consumed);
    queue(Type::Credit, id, v.data(), v.size());
    s.consumed = 0;
  }
  finish_if_done(id);
}

bool Mux::on_frame(Type t, uint32_t id, const char* p, uint32_t n) {
  auto it = streams_.find(id);
  switch (t) {
    case Type::Open: {
      // The target and, for Transparent the destination, for Dns the asker: any other payload is refused.
      auto target = n ? static_cast<Target>(p[0]) : Target::Http;
      bool known = n == 1 ? target == Target::Http || target == Target::Socks
                          : (n == 1 + kDestinationBytes && target == Target::Transparent) ||
                                (n == 1 + kDnsSourceBytes && target == Target::Dns);
      bool ok = cfg_.connect && known && it == streams_.end() && streams_.size() < kMaxStreams;
      int fd = ok ? cfg_.connect(target, std::string_view(p + 1, n - 1)) : -1;
      if (fd < 0) {
        if (it == streams_.end()) queue(Type::Close, id);
        else abort(id, true);  // an id in use opened again: both go
        return true;
      }
      Stream s;
      s.fd = fd;
      streams_.emplace(id, std::move(s));
      return true;
    }
    case Type::Data: {
      if (it == streams_.end()) return true;  // aborted here meanwhile
      Stream& s = it->second;
      // Past the window (unwritten + written but not credited), or after Eof: the peer broke the rules.
      if (s.peer_eof || s.unwritten() + s.consumed + n > kWindow) {
        abort(id, true);
        return true;
      }
      s.pending.append(p, n);
      if (s.dns) dns_data(id);
      else write_stream(id);
      return true;
    }
    case Type::Credit: {
      if (it == streams_.end()) return true;
      if (n != 4) return false;
      uint64_t c = uint64_t(it->second.credit) + get_u32(p);
      if (c > kWindow) {
        abort(id, true);
        return true;
      }
      it->second.credit = static_cast<uint32_t>(c);
      return true;
    }
    case Type::Eof:
      if (it == streams_.end()) return true;
      it->second.peer_eof = true;
      finish_if_done(id);
      return true;
    case Type::Close:
      abort(id, false);
      return true;
  }
  return false;
}

bool Mux::read_channel() {
  char buf[256 * 1024];
  ssize_t r = ::read(cfg_.channel, buf, sizeof buf);
  if (r < 0 && (errno == EAGAIN || errno == EINTR)) return true;
  if (r <= 0) {
    ended_ = r == 0 ? "channel closed" : "channel read failed";
    return false;
  }
  in_.append(buf, static_cast<size_t>(r));
  while (in_.size() - in_pos_ >= kHeaderBytes) {
    const char* h = in_.data() + in_pos_;
    auto t = static_cast<Type>(h[0]);
    uint32_t id = get_u32(h + 1), n = get_u32(h + 5);
    bool known = t == Type::Open || t == Type::Data || t == Type::Credit || t == Type::Eof || t == Type::Close;
    if (!known || n > kMaxData || id == 0) {
      char why[96];
      std::snprintf(why, sizeof why, "bad frame (type 0x%02x, stream %u, %u bytes)", static_cast<unsigned char>(h[0]),
                    id, n);
      ended_ = why;
      return false;
    }
    if (in_.size() - in_pos_ < kHeaderBytes + n) break;
    if (!on_frame(t, id, h + kHeaderBytes, n)) {
      ended_ = "bad frame payload";
      return false;
    }
    in_pos_ += kHeaderBytes + n;
  }
  in_.erase(0, in_pos_);
  in_pos_ = 0;
  return true;
}

bool Mux::write_channel() {
  while (queued()) {
    ssize_t w = write_some(cfg_.channel, out_.data() + out_pos_, queued());
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) break;
    if (w <= 0) {
      ended_ = "channel write failed";
      return false;
    }
    out_pos_ += static_cast<size_t>(w);
  }
  if (out_pos_ == out_.size()) {
    out_.clear();
    out_pos_ = 0;
  } else if (out_pos_ > kOutHigh) {
    out_.erase(0, out_pos_);
    out_pos_ = 0;
  }
  return true;
}

std::string Mux::run() {
  set_nonblocking(cfg_.channel);
  for (auto& l : cfg_.listeners) set_nonblocking(l.first);
  if (cfg_.dns_socket >= 0) set_nonblocking(cfg_.dns_socket);
  std::vector<pollfd> fds;
  std::vector<uint32_t> ids;
  for (;;) {
    fds.clear();
    ids.clear();
    short ch = static_cast<short>((queued() < kOutHard ? POLLIN : 0) | (queued() ? POLLOUT : 0));
    fds.push_back({cfg_.channel, ch, 0});
    fds.push_back({cfg_.stop_fd, POLLIN, 0});
    bool room = queued() < kOutHigh;
    for (auto& l : cfg_.listeners)
      fds.push_back({l.first, static_cast<short>(room && streams_.size() < kMaxStreams ? POLLIN : 0), 0});
    bool dns_room = room && streams_.size() < kMaxStreams && dns_streams_ < kMaxDnsStreams;
    fds.push_back({dns_room ? cfg_.dns_socket : -1, POLLIN, 0});
    for (auto& [id, s] : streams_) {
      short ev = 0;
      if (!s.read_eof && s.credit > 0 && room) ev |= POLLIN;
      if (s.unwritten() && !s.dns) ev |= POLLOUT;
      // (-1 when nothing is awaited: a hung-up socket would wake every poll)
      fds.push_back({ev ? s.fd : -1, ev, 0});
      ids.push_back(id);
    }
    int r = ::poll(fds.data(), fds.size(), -1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      ended_ = "poll failed";
      break;
    }
    if (fds[1].revents) {
      ended_ = "stopped";
      break;
    }
    if ((fds[0].revents & POLLOUT) && !write_channel()) break;
    if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) && !read_channel()) break;
    size_t k = 2;
    for (auto& l : cfg_.listeners)
      if (fds[k++].revents & POLLIN) accept_on(l.first, l.second);
    if (fds[k++].revents & POLLIN) receive_dns();
    for (size_t i = 0; i < ids.size(); ++i) {
      const pollfd& p = fds[k + i];
      if (!p.revents || !streams_.count(ids[i])) continue;
      if (p.revents & POLLOUT) write_stream(ids[i]);
      if (!streams_.count(ids[i])) continue;
      if (p.revents & POLLNVAL) abort(ids[i], true);
      else if ((p.events & POLLIN) && (p.revents & (POLLIN | POLLHUP | POLLERR))) read_stream(ids[i]);
      else if (!(p.revents & POLLOUT) && (p.revents & (POLLHUP | POLLERR))) abort(ids[i], true);
    }
    if (queued() && !write_channel()) break;
  }
  while (!streams_.empty()) erase(streams_.begin());
  return ended_;
}

}  // namespace

std::string encode(Type t, uint32_t stream, const char* data, size_t n) {
  std::string s;
  s.reserve(kHeaderBytes + n);
  s.push_back(static_cast<char>(t));
  put_u32(s, stream);
  put_u32(s, static_cast<uint32_t>(n));
  if (n) s.append(data, n);
  return s;
}

std::string run(const Config& cfg) { return Mux(cfg).run(); }

}  // namespace exg::microvm::egress_mux
