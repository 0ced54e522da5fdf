// OAuth refresh at the proxy: the tokens a response carries, and the user's
// credential file brought up to date outside the sandbox.
#include "egress/token_refresh.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>
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

}  // namespace

std::vector<std::pair<std::string, std::string>> refreshed_tokens(std::string_view body,
                                                                  const std::set<std::string>& fields) {
  std::vector<std::pair<std::string, std::string>> out;
  auto j = parse_json(body);
  if (!j.is_discarded()) collect(j, fields, out);
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
