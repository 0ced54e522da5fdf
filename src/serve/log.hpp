// `exguardian serve`'s log: JSON lines, one object per line, to stderr or to
// --log FILE. Every line has "time" (RFC 3339, UTC, milliseconds), "level"
// (info, warn, error) and "event"; the rest depends on the event: "tenant",
// "sandbox", a request's "method", "path", "status" and "ms", a lifecycle
// event's "template", "layer", "reason", and a human "msg".
//
// Cheap: a line is formatted into one buffer the log keeps (no JSON object
// built, nothing allocated once the buffer has grown) and goes out in one
// write(2), so lines of concurrent writers never interleave. The server is
// one thread; a line started while another is being written (a nested call)
// gets a buffer of its own.
//
// What goes in is chosen by the callers: never a key, a token, a header, a
// query string, an environment value or a request body.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "util/error.hpp"

namespace exg::serve {

class Log {
 public:
  Log();  // stderr
  ~Log();
  Log(const Log&) = delete;
  Log& operator=(const Log&) = delete;
  // --log FILE: appended to, created 0600.
  Result<void> open(const std::string& file);

  class Line {
   public:
    Line& str(std::string_view key, std::string_view value);
    Line& num(std::string_view key, int64_t value);
    Line& real(std::string_view key, double value);
    Line& flag(std::string_view key, bool value);
    ~Line();  // ends the object and writes it
    Line(const Line&) = delete;
    Line& operator=(const Line&) = delete;

   private:
    friend class Log;
    Line(Log& log, std::string_view level, std::string_view event);
    Log& log_;
    std::string own_;   // a nested line's buffer
    std::string* buf_;  // the log's, or own_
  };
  Line at(std::string_view level, std::string_view event) { return Line(*this, level, event); }
  Line info(std::string_view event) { return Line(*this, "info", event); }
  Line warn(std::string_view event) { return Line(*this, "warn", event); }
  Line error(std::string_view event) { return Line(*this, "error", event); }

 private:
  int fd_ = 2;
  bool own_fd_ = false;
  bool busy_ = false;
  std::string buf_;
};

// Appends `s` as the inside of a JSON string: quotes, backslashes and control
// characters escaped, bytes that are not UTF-8 replaced by U+FFFD.
void append_json_escaped(std::string& out, std::string_view s);

}  // namespace exg::serve
