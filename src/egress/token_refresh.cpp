// OAuth refresh at the proxy: the tokens a response carries, and the user's
// credential file brought up to date outside the sandbox.
#include "egress/token_refresh.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>

#include "util/json_parse.hpp"
#include "util/unique_fd.hpp"
#include "util/write_all.hpp"

namespace exg::egress {

namespace {

void collect(const nlohmann::json& j, const std::set<std::string>& fields,
             std::vector<std::pair<std::string, std::string>>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      if (it.value().is_string() && fields.count(it.key())) out.emplace_back(it.key(), it.value().get<std::string>());
      else collect(it.value(), fields, out);
    }
  } else if (j.is_array()) {
    for (const auto& e : j) collect(e, fields, out);
  }
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// application/x-www-form-urlencoded's decoding of one name or value ('+' a
// space, %XX a byte); nullopt when a % is not followed by two hex digits.
std::optional<std::string> form_decode(std::string_view s) {
  std::string r;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      r += ' ';
    } else if (s[i] == '%') {
      if (i + 2 >= s.size()) return std::nullopt;
      int hi = hex_digit(s[i + 1]), lo = hex_digit(s[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      r += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      r += s[i];
    }
  }
  return r;
}

// A form-encoded body (name=value&...; as GitHub's token endpoint answers by
// default): its pairs whose name is in `fields`. Not such a body: none.
void collect_form(std::string_view body, const std::set<std::string>& fields,
                  std::vector<std::pair<std::string, std::string>>& out) {
  while (!body.empty() && (body.back() == '\n' || body.back() == '\r')) body.remove_suffix(1);
  if (body.empty() || body.find_first_of(" \t\r\n{}[]\"") != std::string_view::npos) return;
  std::vector<std::pair<std::string, std::string>> found;
  for (size_t start = 0; start <= body.size();) {
    size_t end = std::min(body.find('&', start), body.size());
    std::string_view pair = body.substr(start, end - start);
    size_t eq = pair.find('=');
    if (eq == std::string_view::npos || eq == 0) return;  // every pair has a name and a '='
    auto name = form_decode(pair.substr(0, eq));
    auto value = form_decode(pair.substr(eq + 1));
    if (!name || !value) return;
    if (fields.count(*name)) found.emplace_back(std::move(*name), std::move(*value));
    start = end + 1;
  }
  out.insert(out.end(), found.begin(), found.end());
}

}  // namespace

std::vector<std::pair<std::string, std::string>> refreshed_tokens(std::string_view body,
                                                                  const std::set<std::string>& fields) {
  std::vector<std::pair<std::string, std::string>> out;
  auto j = parse_json(body);
  if (!j.is_discarded()) collect(j, fields, out);
  else collect_form(body, fields, out);
  return out;
}

Result<void> write_back_token(const std::string& path, const std::string& old_value, const std::string& new_value) {
  if (old_value.empty()) return fail(Error::msg(path, "no old value to replace"));
  static std::mutex mu;
  std::lock_guard lock(mu);
  UniqueFd in(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY));
  if (!in) return fail(Error::sys("read " + path));
  struct stat st;
  if (::fstat(in.get(), &st) != 0 || !S_ISREG(st.st_mode)) return fail(Error::msg(path, "not a regular file"));
  std::string text;
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(in.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return fail(Error::sys("read " + path));
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > kMaxTokenResponse) return fail(Error::msg(path, "larger than 1 MiB: not a credential file"));
  }
  size_t replaced = 0;
  for (size_t pos = 0; (pos = text.find(old_value, pos)) != std::string::npos; pos += new_value.size(), ++replaced)
    text.replace(pos, old_value.size(), new_value);
  if (!replaced) return fail(Error::msg(path, "the old value is no longer in the file (changed outside?): left as it is"));
  // Written in place, not renamed over: the sandbox's copy is mounted on this
  // file, and replacing the file would detach that mount (the sandbox would see
  // the new file, with the real tokens).
  UniqueFd out(::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY));
  if (!out || !write_all(out.get(), text) || ::ftruncate(out.get(), (off_t)text.size()) != 0 || ::fsync(out.get()) != 0)
    return fail(Error::sys("write " + path));
  return {};
}

}  // namespace exg::egress
