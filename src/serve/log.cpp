#include "serve/log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "util/write_all.hpp"

namespace exg::serve {

void append_json_escaped(std::string& out, std::string_view s) {
  static const char* hex = "0123456789abcdef";
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
      ++i;
    } else if (c < 0x20 || c == 0x7f) {
      switch (c) {
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 15];
      }
      ++i;
    } else if (c < 0x80) {
      out += static_cast<char>(c);
      ++i;
    } else {
      // A whole UTF-8 sequence (shortest form, no surrogates, <= U+10FFFF), or U+FFFD for one byte.
      size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
      bool good = n > 0 && i + n <= s.size();
      for (size_t k = 1; good && k < n; ++k) good = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
      if (good && n == 3) {
        unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
        good = !(c == 0xe0 && c1 < 0xa0) && !(c == 0xed && c1 >= 0xa0);
      }
      if (good && n == 4) {
        unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
        good = !(c == 0xf0 && c1 < 0x90) && !(c == 0xf4 && c1 >= 0x90);
      }
      if (good) {
        out.append(s.data() + i, n);
        i += n;
      } else {
        out += "\\ufffd";
        ++i;
      }
    }
  }
}

Log::Log() { buf_.reserve(1024); }

Log::~Log() {
  if (own_fd_) ::close(fd_);
}

Result<void> Log::open(const std::string& file) {
  int fd = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600);
  if (fd < 0) return fail(Error::sys("--log " + file));
  if (own_fd_) ::close(fd_);
  fd_ = fd;
  own_fd_ = true;
  return {};
}

Log::Line::Line(Log& log, std::string_view level, std::string_view event) : log_(log) {
  buf_ = log.busy_ ? &own_ : &log.buf_;
  log.busy_ = true;
  buf_->clear();
  timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  struct tm tm {};
  ::gmtime_r(&ts.tv_sec, &tm);
  char t[128];
  int n = std::snprintf(t, sizeof t, "{\"time\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ\",\"level\":\"", tm.tm_year + 1900,
                        tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
  buf_->append(t, static_cast<size_t>(n > 0 ? n : 0));
  buf_->append(level);
  buf_->append("\",\"event\":\"");
  append_json_escaped(*buf_, event);
  *buf_ += '"';
}

Log::Line& Log::Line::str(std::string_view key, std::string_view value) {
  *buf_ += ",\"";
  append_json_escaped(*buf_, key);
  *buf_ += "\":\"";
  append_json_escaped(*buf_, value);
  *buf_ += '"';
  return *this;
}

Log::Line& Log::Line::num(std::string_view key, int64_t value) {
  char v[24];
  int n = std::snprintf(v, sizeof v, "%lld", static_cast<long long>(value));
  *buf_ += ",\"";
  append_json_escaped(*buf_, key);
  *buf_ += "\":";
  buf_->append(v, static_cast<size_t>(n));
  return *this;
}

Log::Line& Log::Line::real(std::string_view key, double value) {
  char v[32];
  int n = std::isfinite(value) ? std::snprintf(v, sizeof v, "%.3f", value) : std::snprintf(v, sizeof v, "null");
  *buf_ += ",\"";
  append_json_escaped(*buf_, key);
  *buf_ += "\":";
  buf_->append(v, static_cast<size_t>(n));
  return *this;
}

Log::Line& Log::Line::flag(std::string_view key, bool value) {
  *buf_ += ",\"";
  append_json_escaped(*buf_, key);
  *buf_ += value ? "\":true" : "\":false";
  return *this;
}

Log::Line::~Line() {
  *buf_ += "}\n";
  int saved = errno;
  (void)write_all(log_.fd_, *buf_);  // a log that cannot be written does not stop the server
  errno = saved;
  if (buf_ == &log_.buf_) log_.busy_ = false;
}

}  // namespace exg::serve
