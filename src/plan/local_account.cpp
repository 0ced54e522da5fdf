#include "plan/local_account.hpp"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdlib>

#include "util/unique_fd.hpp"

namespace exg::plan {

namespace {

// isspace() in the C locale, which glibc's parsers use.
bool blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'; }

bool same_letters(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i] >= 'a' && a[i] <= 'z' ? static_cast<char>(a[i] - 32) : a[i];
    if (x != b[i]) return false;
  }
  return true;
}

struct FirstService {
  std::string_view name;
  bool has_actions = false;
};

// A database's service list as glibc's nss_action_parse reads it:
// `( <source> ( "[" "!"? (<status> "=" <action>)+ "]" )? )*`. false: a syntax
// error (which makes glibc refuse the whole file).
bool parse_services(std::string_view s, FirstService* first) {
  size_t i = 0;
  auto skip_blanks = [&] {
    while (i < s.size() && blank(s[i])) ++i;
  };
  auto word = [&](bool stop_at_equals) {
    size_t b = i;
    while (i < s.size() && !blank(s[i]) && s[i] != ']' && !(stop_at_equals && s[i] == '=')) ++i;
    return s.substr(b, i - b);
  };
  bool seen = false;
  for (;;) {
    skip_blanks();
    if (i == s.size()) return true;
    size_t b = i;
    while (i < s.size() && !blank(s[i]) && s[i] != '[') ++i;
    if (b == i) return true;  // "[" where a name belongs: glibc stops reading the line there
    std::string_view name = s.substr(b, i - b);
    skip_blanks();
    bool actions = i < s.size() && s[i] == '[';
    if (!seen) *first = {name, actions};
    seen = true;
    if (!actions) continue;
    ++i;
    skip_blanks();
    do {
      if (i < s.size() && s[i] == '!') ++i;
      std::string_view status = word(true);
      if (!same_letters(status, "SUCCESS") && !same_letters(status, "UNAVAIL") && !same_letters(status, "NOTFOUND") &&
          !same_letters(status, "TRYAGAIN"))
        return false;  // (the end of the line inside [...] too: an empty status)
      skip_blanks();
      if (i == s.size() || s[i] != '=') return false;
      ++i;
      skip_blanks();
      std::string_view action = word(true);
      if (!same_letters(action, "RETURN") && !same_letters(action, "CONTINUE") && !same_letters(action, "MERGE"))
        return false;
      skip_blanks();
    } while (i == s.size() || s[i] != ']');
    ++i;
  }
}

constexpr std::array<std::string_view, 17> kDatabases = {
    "aliases",   "ethers",        "group",     "group_compat", "gshadow",  "hosts",
    "initgroups", "netgroup",     "networks",  "passwd",       "passwd_compat", "protocols",
    "publickey", "rpc",           "services",  "shadow",       "shadow_compat"};

// One decimal field of a passwd entry followed by ':', as strictly as this
// reader takes it: plain digits that fit 32 bits (glibc's strtoul would also
// take blanks, a sign, and clamp).
bool id_field(std::string_view line, size_t* at, uint32_t* out) {
  size_t i = *at;
  uint64_t v = 0;
  while (i < line.size() && line[i] >= '0' && line[i] <= '9' && i - *at < 10) v = v * 10 + static_cast<uint64_t>(line[i++] - '0');
  if (i == *at || i == line.size() || line[i] != ':' || v > 0xffffffffu) return false;
  *out = static_cast<uint32_t>(v);
  *at = i + 1;
  return true;
}

std::optional<std::string> read_small_file(const char* path) {
  UniqueFd fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  std::string text;
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) return text;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > (4u << 20)) return std::nullopt;  // not a passwd file this reader takes on
  }
}

// glibc 2.33 and later parse nsswitch.conf as passwd_files_first() does. A
// binary built against 2.34 or later cannot run on an older one (it needs
// __libc_start_main@GLIBC_2.34), so the version it was built with says.
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
constexpr bool kGlibcParsesAsMirrored = true;
#else
constexpr bool kGlibcParsesAsMirrored = false;
#endif

}  // namespace

bool passwd_files_first(std::string_view conf) {
  if (conf.find('\0') != std::string_view::npos) return false;
  std::optional<FirstService> passwd;
  // Lines as getline() gives them (with their '\n'); glibc stops at end of
  // file before a last line that has none, so that one is not read at all.
  for (size_t at = 0; at < conf.size();) {
    size_t nl = conf.find('\n', at);
    if (nl == std::string_view::npos) break;
    std::string_view line = conf.substr(at, nl + 1 - at);
    at = nl + 1;
    size_t i = 0;
    while (i < line.size() && blank(line[i])) ++i;
    size_t b = i;
    while (i < line.size() && !blank(line[i]) && line[i] != ':') ++i;
    if (i == line.size() || b == i) continue;
    std::string_view db = line.substr(b, i - b);
    while (i < line.size() && (blank(line[i]) || line[i] == ':')) ++i;
    bool known = false;
    for (auto k : kDatabases) known = known || k == db;
    if (!known) continue;  // (sudoers, automount, comments: glibc does not parse them)
    FirstService first;
    if (!parse_services(line.substr(i), &first)) return false;
    if (db == "passwd") passwd = first;  // the last passwd line is the one glibc keeps
  }
  return passwd && passwd->name == "files" && !passwd->has_actions;
}

std::optional<Account> files_account(std::string_view text, uid_t uid) {
  for (size_t at = 0; at < text.size();) {
    size_t nl = text.find('\n', at);
    std::string_view line = text.substr(at, nl == std::string_view::npos ? std::string_view::npos : nl - at);
    at = nl == std::string_view::npos ? text.size() : nl + 1;
    if (line.find('\0') != std::string_view::npos) return std::nullopt;
    bool all_blank = true;
    for (char c : line) all_blank = all_blank && blank(c);
    if (all_blank || line[0] == '#') continue;  // glibc skips empty lines and comments
    if (blank(line[0]) || line[0] == ':' || line[0] == '+' || line[0] == '-') return std::nullopt;
    size_t name_end = line.find(':');
    if (name_end == std::string_view::npos) return std::nullopt;
    size_t pass_end = line.find(':', name_end + 1);
    if (pass_end == std::string_view::npos) return std::nullopt;
    size_t i = pass_end + 1;
    uint32_t u = 0, g = 0;
    if (!id_field(line, &i, &u) || !id_field(line, &i, &g)) return std::nullopt;
    if (u == uid) return Account{g, std::string(line.substr(0, name_end))};
  }
  return std::nullopt;  // not in the files: the sources after them may know it
}

std::optional<Account> account_of(uid_t uid) {
  struct stat st;
  bool no_nscd = ::lstat("/var/run/nscd/socket", &st) != 0 && errno == ENOENT;
  if (kGlibcParsesAsMirrored && no_nscd)
    if (auto conf = read_small_file("/etc/nsswitch.conf"); conf && passwd_files_first(*conf))
      if (auto text = read_small_file("/etc/passwd"))
        if (auto a = files_account(*text, uid)) return a;
  if (passwd* pw = ::getpwuid(uid)) return Account{pw->pw_gid, pw->pw_name};
  return std::nullopt;
}

}  // namespace exg::plan
