// Typed errors: what failed, why (errno when the kernel said so), and context.
#pragma once
#include <cerrno>
#include <cstring>
#include <expected>
#include <string>

namespace exg {

struct Error {
  std::string what;  // e.g. "bind /home/a/ws", "policy.json:3:5"
  std::string why;   // human-readable reason
  int err = 0;       // errno, 0 when not a system error

  std::string str() const { return why.empty() ? what : what + ": " + why; }

  static Error sys(std::string what, int e = errno) {
    return Error{std::move(what), std::strerror(e), e};
  }
  static Error msg(std::string what, std::string why) {
    return Error{std::move(what), std::move(why), 0};
  }
};

template <typename T>
using Result = std::expected<T, Error>;

inline std::unexpected<Error> fail(Error e) { return std::unexpected<Error>(std::move(e)); }

}  // namespace exg
