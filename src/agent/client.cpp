#include "agent/client.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

namespace exg::agent {

Channel::Channel(UniqueFd fd) : fd_(std::move(fd)) {
  if (fd_) ::fcntl(fd_.get(), F_SETFL, ::fcntl(fd_.get(), F_GETFL) | O_NONBLOCK);
}

bool Channel::read_some() {
  static char buf[65536];
  for (int k = 0; k < 16; ++k) {
    ssize_t n = ::read(fd_.get(), buf, sizeof buf);
    if (n > 0) {
      reader_.feed(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return true;
    return false;
  }
  return true;
}

void Channel::send(const Frame& f) {
  if (pos_ > 0 && pos_ == out_.size()) {
    out_.clear();
    pos_ = 0;
  }
  out_ += encode(f);
  (void)flush();
}

bool Channel::flush() {
  while (queued() > 0 && fd_) {
    ssize_t n = ::send(fd_.get(), out_.data() + pos_, queued(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) break;
    if (n <= 0) return false;
    pos_ += static_cast<size_t>(n);
  }
  if (pos_ > (1u << 20) && pos_ * 2 > out_.size()) {
    out_.erase(0, pos_);
    pos_ = 0;
  }
  return true;
}

Result<Client> Client::connect(const std::string& address) {
  if (!address.starts_with("unix:")) return fail(Error::msg("--control " + address, "expected unix:PATH"));
  std::string path = address.substr(5);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof sa.sun_path) return fail(Error::msg("--control " + address, "path empty or too long"));
  path.copy(sa.sun_path, path.size());
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return fail(Error::sys("socket"));
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) return fail(Error::sys("connect " + path));
  Client c;
  c.ch_ = Channel(std::move(fd));
  return c;
}

Result<void> Client::flush_all() {
  while (ch_.queued() > 0) {
    if (!ch_.flush()) return fail(Error::sys("write to the session"));
    if (ch_.queued() == 0) break;
    pollfd p{ch_.fd(), POLLOUT, 0};
    ::poll(&p, 1, -1);
  }
  return {};
}

Result<uint32_t> Client::send(nlohmann::json header, std::string payload) {
  uint32_t id = next_id_++;
  ch_.send(Frame{Kind::Request, id, std::move(header), std::move(payload)});
  if (auto r = flush_all(); !r) return fail(r.error());
  return id;
}

Result<void> Client::send_raw(const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t n = ::send(ch_.fd(), bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
      pollfd p{ch_.fd(), POLLOUT, 0};
      ::poll(&p, 1, -1);
      continue;
    }
    if (n <= 0) return fail(Error::sys("write to the session"));
    off += static_cast<size_t>(n);
  }
  return {};
}

Result<Frame> Client::next() {
  for (;;) {
    auto item = ch_.next();
    if (item.frame) return std::move(*item.frame);
    if (item.error) return fail(Error::msg("a frame from the session", item.error->what));
    // What arrived with the close is handed out first.
    if (closed_) return fail(Error::msg("session", "the connection closed"));
    pollfd p{ch_.fd(), POLLIN, 0};
    if (::poll(&p, 1, -1) < 0 && errno != EINTR) return fail(Error::sys("poll"));
    if (!ch_.read_some()) closed_ = true;
  }
}

Result<std::optional<Frame>> Client::try_next() {
  if (!events_.empty()) {
    Frame f = std::move(events_.front());
    events_.pop_front();
    return f;
  }
  for (int pass = 0; pass < 2; ++pass) {
    auto item = ch_.next();
    if (item.frame) return std::move(*item.frame);
    if (item.error) return fail(Error::msg("a frame from the session", item.error->what));
    if (closed_) return fail(Error::msg("session", "the connection closed"));
    if (pass == 0 && !ch_.read_some()) closed_ = true;
  }
  return std::optional<Frame>{};
}

Result<Frame> Client::call(nlohmann::json header, std::string payload) {
  auto id = send(std::move(header), std::move(payload));
  if (!id) return fail(id.error());
  for (;;) {
    auto f = next();
    if (!f) return f;
    if (f->kind == Kind::Reply && f->id == *id) return f;
    if (f->kind == Kind::Event) events_.push_back(std::move(*f));
  }
}

Result<Frame> Client::next_event() {
  if (!events_.empty()) {
    Frame f = std::move(events_.front());
    events_.pop_front();
    return f;
  }
  for (;;) {
    auto f = next();
    if (!f || f->kind == Kind::Event) return f;
  }
}

}  // namespace exg::agent
