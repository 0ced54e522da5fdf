// A small blocking QMP client (qemu's JSON monitor) over a connected unix
// socket: the greeting, qmp_capabilities, then one command at a time, an fd
// passed with a command where it needs one (getfd). Events that arrive in
// between are skipped. Used by the host alone, for the template's save and
// a restore (snapshot.hpp).
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace exg::microvm {

class Qmp {
 public:
  // `timeout_ms` bounds every wait for qemu.
  Qmp(UniqueFd sock, int timeout_ms) : sock_(std::move(sock)), timeout_ms_(timeout_ms) {}
  // Reads the greeting and enters command mode.
  Result<void> start();
  // {"execute": cmd, "arguments": args}, SCM_RIGHTS `pass_fd` with it when >= 0;
  // the "return" value, or the error qemu gave (its "desc").
  Result<nlohmann::json> execute(const std::string& cmd, const nlohmann::json& args = nullptr, int pass_fd = -1);
  int fd() const { return sock_.get(); }
  // While it waits for qemu, `on_readable` serves `fd` too (the sandbox's
  // refused syscalls, which qemu waits on: qemu would not answer meanwhile).
  void serve_meanwhile(int fd, std::function<void()> on_readable) {
    side_fd_ = fd;
    side_ = std::move(on_readable);
  }

 private:
  Result<nlohmann::json> read_message();
  UniqueFd sock_;
  int timeout_ms_;
  std::string buf_;
  int side_fd_ = -1;
  std::function<void()> side_;
};

}  // namespace exg::microvm
