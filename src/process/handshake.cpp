#include "process/handshake.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cgroup/cgroup.hpp"
#include "util/fd_passing.hpp"
#include "util/step_timer.hpp"

namespace exg::process {

namespace {

// One message of the parent's on the setup socket: its type byte and its
// descriptors. False when it is not one byte with what fits (the parent is
// gone, or sent something else).
bool recv_parent_message(int sync_fd, char* type, int (&fds)[kMaxPassedFds], size_t* n) {
  bool truncated = false;
  return recv_with_fds(sync_fd, type, 1, fds, n, &truncated) == 1 && !truncated;
}

}  // namespace

// ---- the parent's half ----

bool send_go(int sock, std::string_view trust_anchor) {
  std::string go(1, kMsgGo);
  go += trust_anchor;
  return ::send(sock, go.data(), go.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(go.size());
}

int send_idmapped_trees(int sock, const std::vector<UniqueFd>& trees) {
  for (size_t at = 0; at < trees.size(); at += kMaxPassedFds) {
    int fds[kMaxPassedFds];
    size_t n = 0;
    for (size_t k = at; k < trees.size() && n < kMaxPassedFds; ++k) fds[n++] = trees[k].get();
    if (!send_fds(sock, kMsgIdmapped, fds, n)) return errno;
  }
  return 0;
}

int send_in_cgroup(int sock, const std::vector<UniqueFd>& tasks) {
  int fds[kMaxPassedFds];
  size_t n = 0;
  for (const auto& fd : tasks)
    if (n < kMaxPassedFds) fds[n++] = fd.get();
  return send_fds(sock, kMsgInCgroup, fds, n) ? 0 : errno;
}

bool send_listener_taken(int sock) { return send_fds(sock, kMsgListenerTaken, nullptr, 0); }

// ---- the child's half ----

bool await_go_view(int sync_fd, std::string_view* trust_anchor) {
  static char go[1 + kMaxTrustAnchor + 1];
  ssize_t got = ::recv(sync_fd, go, sizeof go, 0);
  if (got < 1 || go[0] != kMsgGo || static_cast<size_t>(got) > 1 + kMaxTrustAnchor) return false;
  if (trust_anchor) *trust_anchor = std::string_view(go + 1, static_cast<size_t>(got - 1));
  return true;
}

bool await_go(int sync_fd, std::string* trust_anchor) {
  std::string_view pem;
  if (!await_go_view(sync_fd, &pem)) return false;
  if (trust_anchor) trust_anchor->assign(pem);
  return true;
}

bool await_idmapped_trees(int sync_fd, int* trees, size_t count) {
  size_t have = 0;
  while (have < count) {
    char type = 0;
    int fds[kMaxPassedFds];
    size_t n = 0;
    bool ok = recv_parent_message(sync_fd, &type, fds, &n) && type == kMsgIdmapped && n > 0 && n <= count - have;
    for (size_t k = 0; k < n; ++k) {
      if (ok) trees[have++] = fds[k];
      else ::close(fds[k]);
    }
    if (!ok) return false;
  }
  return true;
}

int await_in_cgroup(int sync_fd, StepTimer* timer, bool* moved) {
  char type = 0;
  int fds[kMaxPassedFds];
  size_t n = 0;
  int result = -1;
  if (recv_parent_message(sync_fd, &type, fds, &n) && type == kMsgInCgroup) {
    result = n ? cgroup::Cgroup::attach_self(fds, n) : 0;
    if (result == 0 && n && timer) timer->child_mark("cgroup attach");
    if (moved) *moved = result == 0 && n > 0;
  }
  for (size_t k = 0; k < n; ++k) ::close(fds[k]);  // nothing of the sandbox keeps a way into other cgroups
  return result;
}

namespace {

bool send_listener_number(int sync_fd, char type, int listener) {
  char msg[16] = {type};
  size_t len = 1;
  char digits[12];
  size_t n = 0;
  for (unsigned v = static_cast<unsigned>(listener); n == 0 || v > 0; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
  while (n > 0) msg[len++] = digits[--n];
  return ::send(sync_fd, msg, len, MSG_NOSIGNAL) == static_cast<ssize_t>(len);
}

}  // namespace

bool offer_listener(int sync_fd, int listener) { return send_listener_number(sync_fd, kMsgSeccompLast, listener); }

bool await_listener_taken(int sync_fd) {
  char taken = 0;
  ssize_t n;
  do n = ::recv(sync_fd, &taken, 1, 0); while (n < 0 && errno == EINTR);
  return n == 1 && taken == kMsgListenerTaken;
}

bool hand_over_listener(int sync_fd, int listener) {
  return send_listener_number(sync_fd, kMsgSeccomp, listener) && await_listener_taken(sync_fd);
}

void send_ready(int sync_fd, int listener) {
  // Without a descriptor, send(), not sendmsg(): init is under its filter by
  // now, and the supervisor judges sendmsg() only once it is in its poll loop
  // (hand_over_listener), which comes after this "ready".
  if (listener < 0) {
    char r = kMsgReady;
    (void)::send(sync_fd, &r, 1, MSG_NOSIGNAL);
    return;
  }
  (void)send_fds(sync_fd, kMsgReady, &listener, 1);
}

[[noreturn]] void die(int sync_fd, const std::string& what, int err) {
  std::string msg(1, kMsgError);
  msg += what;
  if (err) {
    msg += ": ";
    msg += std::strerror(err);
  }
  (void)::send(sync_fd, msg.data(), msg.size(), MSG_NOSIGNAL);
  ::_exit(125);
}

}  // namespace exg::process
