#include "microvm/qmp.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <cstring>

#include "util/json_parse.hpp"

namespace exg::microvm {

Result<void> Qmp::start() {
  auto greeting = read_message();
  if (!greeting) return fail(greeting.error());
  if (!greeting->contains("QMP")) return fail(Error::msg("microvm: qemu's monitor", "no QMP greeting"));
  auto caps = execute("qmp_capabilities");
  if (!caps) return fail(caps.error());
  return {};
}

Result<nlohmann::json> Qmp::read_message() {
  for (;;) {
    size_t nl = buf_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buf_.substr(0, nl);
      buf_.erase(0, nl + 1);
      auto j = parse_json(line);
      if (j.is_discarded() || !j.is_object())
        return fail(Error::msg("microvm: qemu's monitor", "not a JSON object: " + line.substr(0, 200)));
      return j;
    }
    if (buf_.size() > (1u << 20)) return fail(Error::msg("microvm: qemu's monitor", "message too long"));
    pollfd p[2] = {{sock_.get(), POLLIN, 0}, {side_fd_, POLLIN, 0}};
    int r = ::poll(p, side_fd_ >= 0 ? 2 : 1, timeout_ms_);
    if (r < 0 && errno == EINTR) continue;
    if (r > 0 && side_fd_ >= 0 && p[1].revents) {
      if (p[1].revents & POLLIN) side_();
      if (p[1].revents & (POLLHUP | POLLERR)) side_fd_ = -1;
      if (!p[0].revents) continue;
    }
    if (r == 0) return fail(Error::msg("microvm: qemu's monitor", "no answer within " + std::to_string(timeout_ms_) + " ms"));
    if (r < 0) return fail(Error::sys("microvm: poll qemu's monitor"));
    char b[8192];
    ssize_t n = ::recv(sock_.get(), b, sizeof b, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(Error::sys("microvm: read qemu's monitor"));
    if (n == 0) return fail(Error::msg("microvm: qemu's monitor", "closed (qemu ended)"));
    buf_.append(b, static_cast<size_t>(n));
  }
}

Result<nlohmann::json> Qmp::execute(const std::string& cmd, const nlohmann::json& args, int pass_fd) {
  nlohmann::json m = {{"execute", cmd}};
  if (!args.is_null()) m["arguments"] = args;
  std::string text = m.dump() + "\n";
  iovec iov{text.data(), text.size()};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))] = {};
  if (pass_fd >= 0) {
    mh.msg_control = ctl;
    mh.msg_controllen = sizeof ctl;
    cmsghdr* c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
  }
  // Small: one sendmsg takes it whole on a unix stream socket.
  ssize_t w;
  do w = ::sendmsg(sock_.get(), &mh, MSG_NOSIGNAL);
  while (w < 0 && errno == EINTR);
  if (w != static_cast<ssize_t>(text.size())) return fail(Error::sys("microvm: write to qemu's monitor (" + cmd + ")"));
  for (;;) {
    auto r = read_message();
    if (!r) return fail(r.error());
    if (r->contains("event")) continue;
    if (r->contains("return")) return (*r)["return"];
    if (r->contains("error"))
      return fail(Error::msg("microvm: qemu's monitor: " + cmd, (*r)["error"].value("desc", std::string("error"))));
  }
}

}  // namespace exg::microvm
