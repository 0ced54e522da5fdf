// The tunnel: splice(2) socket -> pipe -> socket per direction, driven by
// asio's readiness waits on the native sockets. A direction always tries the
// operation first and waits only after EAGAIN (asio's epoll is edge-triggered).
//
// Pipes are borrowed from a small shared pool while bytes are in flight and
// given back once a direction has drained and its source has nothing more, so
// an idle tunnel holds no pipe and a short exchange costs no pipe2(). A pipe
// that filled up in one read is grown (up to max_pipe) and kept for the
// direction: that is a bulk transfer, where bigger batches mean fewer
// splice calls and wakeups.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "egress/proxy.hpp"

namespace exg::egress::detail {

using boost::asio::ip::tcp;

namespace {
constexpr size_t kPipePoolMax = 64;  // empty default-size pipes kept for reuse
constexpr uint32_t kDefaultPipe = 64 * 1024;
}  // namespace

IoShared::~IoShared() {
  for (auto [r, w] : pipes) ::close(r), ::close(w);
}

Tunnel::Tunnel(tcp::socket client, tcp::socket upstream, const ProxyConfig& cfg, std::shared_ptr<IoShared> shared,
               std::function<void(const Outcome&)> done)
    : client_(std::move(client)), upstream_(std::move(upstream)), cfg_(cfg), shared_(std::move(shared)),
      done_(std::move(done)) {
  up_.src = &client_;
  up_.dst = &upstream_;
  down_.src = &upstream_;
  down_.dst = &client_;
  boost::system::error_code ec;
  client_.non_blocking(true, ec);
  upstream_.non_blocking(true, ec);
}

Tunnel::~Tunnel() {
  release_pipes(up_);
  release_pipes(down_);
}

void Tunnel::set_up_filter(std::unique_ptr<StreamFilter> f) { up_.filter = std::move(f); }
void Tunnel::set_down_filter(std::unique_ptr<StreamFilter> f) { down_.filter = std::move(f); }

bool Tunnel::get_pipe(Dir& d) {
  if (d.pipe_r >= 0) return true;
  if (!shared_->pipes.empty()) {
    std::tie(d.pipe_r, d.pipe_w) = shared_->pipes.back();
    shared_->pipes.pop_back();
    d.pipe_cap = kDefaultPipe;
    return true;
  }
  int p[2];
  if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) return false;
  d.pipe_r = p[0];
  d.pipe_w = p[1];
  int sz = ::fcntl(d.pipe_w, F_GETPIPE_SZ);
  d.pipe_cap = sz > 0 ? (uint32_t)sz : kDefaultPipe;
  if (d.pipe_cap != kDefaultPipe) {  // odd default (sysctl or soft limit): use it, never pool it
    d.grown = true;
  }
  return true;
}

// An empty default-size pipe goes back to the pool; anything else is closed.
void Tunnel::release_pipes(Dir& d) {
  if (d.pipe_r < 0) return;
  if (d.in_pipe == 0 && !d.grown && shared_ && shared_->pipes.size() < kPipePoolMax) {
    shared_->pipes.emplace_back(d.pipe_r, d.pipe_w);
  } else {
    ::close(d.pipe_r);
    ::close(d.pipe_w);
  }
  d.pipe_r = d.pipe_w = -1;
  d.in_pipe = 0;
  d.pipe_cap = 0;
  d.grown = false;
}

void Tunnel::start(std::string up_prefix, std::string up_initial, std::string down_prefix) {
  last_ = std::chrono::steady_clock::now();
  up_.out = std::move(up_prefix);
  down_.out = std::move(down_prefix);
  if (up_.filter) {
    // Also when empty: a request without a body is complete at once.
    if (!apply_filter(up_, up_initial)) return;
  } else {
    up_.out += up_initial;
  }
  auto self = shared_from_this();
  pump(up_);
  if (!closed_) pump(down_);
}

// Runs the direction's filter over data; false when the tunnel was closed.
bool Tunnel::apply_filter(Dir& d, std::string_view data) {
  switch (d.filter->feed(data, d.out)) {
    case StreamFilter::Status::More: return true;
    case StreamFilter::Status::Passthrough: d.filter.reset(); return true;
    case StreamFilter::Status::Done:
      d.filter.reset();
      d.read_done = true;
      d.shut_dst = false;
      return true;
    case StreamFilter::Status::Error:
      // Best effort: the last message (a 502, say) goes out without waiting.
      if (d.out.size() > d.out_off)
        (void)::send(d.dst->native_handle(), d.out.data() + d.out_off, d.out.size() - d.out_off,
                     MSG_NOSIGNAL | MSG_DONTWAIT);
      {
        std::string why = d.filter->error_reason();
        complete(!why.empty() ? why : "malformed data from " + std::string(&d == &up_ ? "client" : "upstream"));
      }
      return false;
  }
  return true;
}

void Tunnel::wait(Dir& d, bool for_write) {
  tcp::socket& s = for_write ? *d.dst : *d.src;
  s.async_wait(for_write ? tcp::socket::wait_write : tcp::socket::wait_read,
               [self = shared_from_this(), &d](const boost::system::error_code& ec) {
                 if (self->closed_) return;
                 if (ec) return self->complete(ec.message());
                 self->last_ = std::chrono::steady_clock::now();
                 self->pump(d);
               });
}

void Tunnel::pump(Dir& d) {
  const int src = d.src->native_handle(), dst = d.dst->native_handle();
  auto failed = [this, &d](const char* what) {
    complete(std::string(what) + (&d == &up_ ? " (client to upstream): " : " (upstream to client): ") +
             std::strerror(errno));
  };
  while (!closed_) {
    // 1. Pending bytes from a filter or a prefix.
    if (d.out_off < d.out.size()) {
      ssize_t n = ::send(dst, d.out.data() + d.out_off, d.out.size() - d.out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        d.out_off += n;
        d.bytes += n;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return wait(d, true);
      return failed("send");
    }
    if (d.out_off) {
      if (d.out.capacity() > 4096) std::string().swap(d.out);
      else d.out.clear();
      d.out_off = 0;
    }
    // 2. Bytes waiting in the pipe. SPLICE_F_MORE while the source is known to
    // have more (the last read filled the pipe): full segments, fewer pushes.
    if (d.in_pipe) {
      unsigned flags = SPLICE_F_MOVE | SPLICE_F_NONBLOCK | (d.more ? SPLICE_F_MORE : 0);
      ssize_t n = ::splice(d.pipe_r, nullptr, dst, nullptr, d.in_pipe, flags);
      if (n > 0) {
        d.in_pipe -= (uint32_t)n;
        d.bytes += n;
        if (d.more) d.corked = true;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        // The peer is slow: top the pipe up so the source's window stays open.
        if (!d.read_done && d.in_pipe < d.pipe_cap) {
          ssize_t m = ::splice(src, nullptr, d.pipe_w, nullptr, d.pipe_cap - d.in_pipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
          if (m > 0) d.in_pipe += (uint32_t)m;
          else if (m == 0) d.read_done = true;
        }
        return wait(d, true);
      }
      return failed("splice");
    }
    if (d.read_done) return finish(d);
    // 3. Read more.
    if (d.use_splice && !d.filter) {
      if (!get_pipe(d)) {
        d.use_splice = false;  // out of fds: copy through the scratch buffer instead
        continue;
      }
      ssize_t n = ::splice(src, nullptr, d.pipe_w, nullptr, d.pipe_cap, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n > 0) {
        d.in_pipe = (uint32_t)n;
        d.more = (uint32_t)n == d.pipe_cap;
        if (d.more && d.pipe_cap < cfg_.max_pipe) {
          // A full pipe in one read: bulk. Grow (best effort; the per-user pipe
          // limits may refuse, then a smaller step or the current size).
          for (size_t want = cfg_.max_pipe; want > d.pipe_cap; want /= 4) {
            int got = ::fcntl(d.pipe_w, F_SETPIPE_SZ, (int)want);
            if (got > 0) {
              d.pipe_cap = (uint32_t)got;
              break;
            }
          }
          d.grown = true;
        }
        continue;
      }
      if (n == 0) {
        d.read_done = true;
        continue;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        d.more = false;
        if (d.corked) {
          // Push what SPLICE_F_MORE held back (TCP_NODELAY=1 pushes pending frames).
          d.corked = false;
          int one = 1;
          (void)::setsockopt(dst, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        }
        if (!d.grown) release_pipes(d);  // idle: no pipe held
        return wait(d, false);
      }
      if (errno == EINVAL || errno == ENOSYS) {
        d.use_splice = false;
        release_pipes(d);
        continue;
      }
      return failed("splice");
    }
    size_t cap = std::max<size_t>(cfg_.tunnel_buffer, 4096);
    char* buf = shared_->scratch_for(cap);
    ssize_t n = ::recv(src, buf, cap, MSG_DONTWAIT);
    if (n > 0) {
      if (d.filter) {
        if (!apply_filter(d, std::string_view(buf, n))) return;
      } else {
        d.out.assign(buf, n);
      }
      continue;
    }
    if (n == 0) {
      if (d.filter) d.filter->eof(d.out);
      d.filter.reset();
      d.read_done = true;
      continue;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return wait(d, false);
    return failed("recv");
  }
}

void Tunnel::finish(Dir& d) {
  if (d.finished) return;
  d.finished = true;
  release_pipes(d);
  std::string().swap(d.out);
  d.out_off = 0;
  Dir& other = &d == &up_ ? down_ : up_;
  bool ending = other.finished || (end_on_down_ && &d == &down_);
  // A shutdown only when the other direction still runs: otherwise close() follows at once.
  if (d.shut_dst && !ending) ::shutdown(d.dst->native_handle(), SHUT_WR);
  if (ending) complete("");
}

void Tunnel::close(const std::string& why) {
  if (!closed_) complete(why);
}

void Tunnel::complete(const std::string& error) {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ec;
  client_.close(ec);
  upstream_.close(ec);
  release_pipes(up_);
  release_pipes(down_);
  Outcome o{up_.bytes, down_.bytes, error};
  auto done = std::move(done_);
  done_ = nullptr;
  if (done) done(o);
}

}  // namespace exg::egress::detail
