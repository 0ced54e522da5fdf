// The tunnel: splice(2) socket -> pipe -> socket per direction, driven by
// asio's readiness waits on the native sockets. A direction always tries the
// operation first and waits only after EAGAIN (asio's epoll is edge-triggered).
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "egress/proxy.hpp"

namespace exg::egress::detail {

using boost::asio::ip::tcp;

Tunnel::Tunnel(tcp::socket client, tcp::socket upstream, const ProxyConfig& cfg,
               std::function<void(const Outcome&)> done)
    : client_(std::move(client)), upstream_(std::move(upstream)), cfg_(cfg), done_(std::move(done)),
      idle_(client_.get_executor()) {
  up_.src = &client_;
  up_.dst = &upstream_;
  down_.src = &upstream_;
  down_.dst = &client_;
  boost::system::error_code ec;
  client_.non_blocking(true, ec);
  upstream_.non_blocking(true, ec);
  if (cfg_.tunnel_buffer < 4096) cfg_.tunnel_buffer = 4096;
}

Tunnel::~Tunnel() {
  release_pipes(up_);
  release_pipes(down_);
}

void Tunnel::set_up_filter(std::unique_ptr<StreamFilter> f) { up_.filter = std::move(f); }
void Tunnel::set_down_filter(std::unique_ptr<StreamFilter> f) { down_.filter = std::move(f); }

void Tunnel::release_pipes(Dir& d) {
  if (d.pipe_r >= 0) ::close(d.pipe_r);
  if (d.pipe_w >= 0) ::close(d.pipe_w);
  d.pipe_r = d.pipe_w = -1;
  d.in_pipe = 0;
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
  arm_idle();
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
      complete("malformed data from " + std::string(&d == &up_ ? "client" : "upstream"));
      return false;
  }
  return true;
}

void Tunnel::pump(Dir& d) {
  const int src = d.src->native_handle(), dst = d.dst->native_handle();
  auto wait = [this, &d](tcp::socket& s, tcp::socket::wait_type w) {
    s.async_wait(w, [self = shared_from_this(), &d](const boost::system::error_code& ec) {
      if (self->closed_) return;
      if (ec) return self->complete(ec.message());
      self->pump(d);
    });
  };
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
        last_ = std::chrono::steady_clock::now();
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return wait(*d.dst, tcp::socket::wait_write);
      return failed("send");
    }
    d.out.clear();
    d.out_off = 0;
    // 2. Bytes waiting in the pipe.
    if (d.in_pipe) {
      ssize_t n = ::splice(d.pipe_r, nullptr, dst, nullptr, d.in_pipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n > 0) {
        d.in_pipe -= n;
        d.bytes += n;
        last_ = std::chrono::steady_clock::now();
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return wait(*d.dst, tcp::socket::wait_write);
      return failed("splice");
    }
    if (d.read_done) return finish(d);
    // 3. Read more.
    if (d.use_splice && !d.filter) {
      if (d.pipe_r < 0) {
        int p[2];
        if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
          d.use_splice = false;  // out of fds: copy through the buffer instead
          continue;
        }
        d.pipe_r = p[0];
        d.pipe_w = p[1];
        (void)::fcntl(d.pipe_w, F_SETPIPE_SZ, (int)cfg_.tunnel_buffer);  // bounded; best effort
      }
      ssize_t n = ::splice(src, nullptr, d.pipe_w, nullptr, cfg_.tunnel_buffer, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n > 0) {
        d.in_pipe = n;
        continue;
      }
      if (n == 0) {
        d.read_done = true;
        continue;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return wait(*d.src, tcp::socket::wait_read);
      if (errno == EINVAL || errno == ENOSYS) {
        d.use_splice = false;
        release_pipes(d);
        continue;
      }
      return failed("splice");
    }
    if (d.buf.empty()) d.buf.resize(cfg_.tunnel_buffer);
    ssize_t n = ::recv(src, d.buf.data(), d.buf.size(), MSG_DONTWAIT);
    if (n > 0) {
      last_ = std::chrono::steady_clock::now();
      if (d.filter) {
        if (!apply_filter(d, std::string_view(d.buf.data(), n))) return;
      } else {
        d.out.assign(d.buf.data(), n);
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
    if (errno == EAGAIN || errno == EWOULDBLOCK) return wait(*d.src, tcp::socket::wait_read);
    return failed("recv");
  }
}

void Tunnel::finish(Dir& d) {
  if (d.finished) return;
  d.finished = true;
  release_pipes(d);
  std::vector<char>().swap(d.buf);
  if (d.shut_dst) ::shutdown(d.dst->native_handle(), SHUT_WR);
  if ((up_.finished && down_.finished) || (end_on_down_ && &d == &down_)) complete("");
}

void Tunnel::arm_idle() {
  idle_.expires_at(last_ + cfg_.idle_timeout);
  idle_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (ec || self->closed_) return;
    if (std::chrono::steady_clock::now() - self->last_ >= self->cfg_.idle_timeout) return self->complete("idle timeout");
    self->arm_idle();
  });
}

void Tunnel::close(const std::string& why) {
  if (!closed_) complete(why);
}

void Tunnel::complete(const std::string& error) {
  if (closed_) return;
  closed_ = true;
  idle_.cancel();
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
