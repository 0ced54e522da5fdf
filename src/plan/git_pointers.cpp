#include "plan/git_pointers.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdlib>

#include "plan/command_pointers.hpp"
#include "plan/protected_names.hpp"
#include "util/unique_fd.hpp"

namespace exg::plan {

namespace {

std::string lower(std::string_view s) {
  std::string r(s);
  for (auto& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

// A value: quotes removed, escapes read, an unquoted # or ; ends it.
std::string value_of(std::string_view v) {
  std::string out, pending_space;
  bool quoted = false;
  size_t i = 0;
  while (i < v.size() && (v[i] == ' ' || v[i] == '\t')) ++i;
  for (; i < v.size(); ++i) {
    char c = v[i];
    if (!quoted && (c == '#' || c == ';')) break;
    if (c == '"') {
      quoted = !quoted;
      continue;
    }
    if (c == '\\' && i + 1 < v.size()) {
      char n = v[++i];
      out += pending_space;
      pending_space.clear();
      out += n == 'n' ? '\n' : n == 't' ? '\t' : n == 'b' ? '\b' : n;
      continue;
    }
    if (!quoted && (c == ' ' || c == '\t')) {
      pending_space += c;
      continue;
    }
    out += pending_space;
    pending_space.clear();
    out += c;
  }
  return out;
}

std::string read_small(const std::string& path, size_t max = 1 << 20) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!fd) return {};
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return {};
  std::string s(std::min<size_t>(static_cast<size_t>(st.st_size), max), '\0');
  ssize_t n = ::pread(fd.get(), s.data(), s.size(), 0);
  s.resize(n < 0 ? 0 : static_cast<size_t>(n));
  return s;
}

std::string dirname_of(const std::string& p) {
  auto s = p.rfind('/');
  if (s == std::string::npos) return ".";
  return s == 0 ? "/" : p.substr(0, s);
}

// Whether section.key holds a command git runs (section: lower-case name,
// ".<subsection>" kept as written; sec_name: the name alone).
bool command_key(const std::string& section, const std::string& sec_name, const std::string& key,
                 const std::string& value) {
  if (section == "core") {
    if (key == "fsmonitor") {
      std::string v = lower(value);  // booleans choose the built-in daemon or none
      return !(v == "true" || v == "false" || v == "yes" || v == "no" || v == "on" || v == "off" || v == "1" ||
               v == "0");
    }
    return key == "sshcommand" || key == "pager" || key == "editor" || key == "askpass" || key == "gitproxy";
  }
  bool sub = section.size() > sec_name.size();
  if (section == "sequence") return key == "editor";
  if (sec_name == "diff") return (section == "diff" && key == "external") || (sub && (key == "command" || key == "textconv"));
  if (sec_name == "merge") return sub && key == "driver";
  if (sec_name == "filter") return sub && (key == "clean" || key == "smudge" || key == "process");
  if (section == "pager") return true;
  if (section == "interactive") return key == "difffilter";
  if (sec_name == "gpg") return key == "program";
  if (sec_name == "credential") return key == "helper";
  if (section == "alias") return value.starts_with("!");
  if (sec_name == "mergetool" || sec_name == "difftool") return sub && key == "cmd";
  if (section == "web" || section == "browser") return key == "browser" || key == "cmd";
  return false;
}

}  // namespace

GitConfigPointers git_config_pointers(std::string_view text) {
  GitConfigPointers out;
  // Join continuation lines first (a backslash at the end of a line).
  std::string joined;
  joined.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == '\n') {
      ++i;
      continue;
    }
    joined += text[i];
  }
  std::string section;  // lower-case section name, subsection kept as written after a '.'
  size_t i = 0;
  while (i < joined.size()) {
    size_t j = joined.find('\n', i);
    if (j == std::string::npos) j = joined.size();
    std::string_view line(joined.data() + i, j - i);
    i = j + 1;
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line[0] == '[') {
      auto close = line.find(']');
      if (close == std::string_view::npos) continue;
      std::string_view head = line.substr(1, close - 1);
      auto q = head.find('"');
      if (q != std::string_view::npos) section = lower(trim(head.substr(0, q))) + "." + std::string(head.substr(q));
      else section = lower(trim(head));
      line.remove_prefix(close + 1);  // "[core] hooksPath = x" is one line to git too
      while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
      if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    }
    auto eq = line.find('=');
    std::string key = lower(trim(line.substr(0, eq)));
    std::string value = eq == std::string_view::npos ? std::string() : value_of(line.substr(eq + 1));
    std::string sec_name = section.substr(0, section.find('.'));
    if (section == "core" && key == "hookspath" && !value.empty()) out.hooks_paths.push_back(value);
    if ((section == "include" || sec_name == "includeif") && key == "path" && !value.empty())
      out.include_paths.push_back(value);
    if (!value.empty() && command_key(section, sec_name, key, value)) out.commands.push_back(value);
  }
  return out;
}

std::string resolve_lexically(const std::string& base, std::string_view p, const std::string& home) {
  std::string full;
  if (p.starts_with("~/") && !home.empty()) full = home + std::string(p.substr(1));
  else if (!p.empty() && p[0] == '/') full = std::string(p);
  else full = base + "/" + std::string(p);
  std::vector<std::string_view> out;
  for (auto c : split_components(full)) {
    if (c == ".") continue;
    if (c == "..") {
      if (!out.empty()) out.pop_back();
      continue;
    }
    out.push_back(c);
  }
  std::string r;
  for (auto c : out) r += "/" + std::string(c);
  return r.empty() ? "/" : r;
}

std::vector<std::string> git_dir_pointers(const std::string& gd, const std::string& home) {
  std::vector<std::string> out;
  // Where hooks run: the working tree's top (a .git directory's parent; a
  // linked worktree's, read from its gitdir file) or, bare, the git directory.
  std::vector<std::string> run_dirs;
  std::string base = gd.substr(gd.rfind('/') + 1);
  if (base == ".git") run_dirs.push_back(dirname_of(gd));
  else run_dirs.push_back(gd);
  if (auto g = trim(read_small(gd + "/gitdir", PATH_MAX)); !g.empty())
    run_dirs.push_back(dirname_of(resolve_lexically(gd, g, home)));
  std::vector<std::string> configs = user_git_configs(home);
  for (const char* own : {"/config", "/config.worktree"}) configs.push_back(gd + own);
  if (auto c = trim(read_small(gd + "/commondir", PATH_MAX)); !c.empty())
    configs.push_back(resolve_lexically(gd, c, home) + "/config");
  for (size_t k = 0; k < configs.size() && k < 32; ++k) {
    auto p = git_config_pointers(read_small(configs[k]));
    for (const auto& h : p.hooks_paths)
      for (const auto& r : run_dirs) out.push_back(resolve_lexically(r, h, home));
    // Commands run with the working tree's top as their directory (hooks
    // and fsmonitor; the rest from wherever git runs, the top in practice).
    for (const auto& c : p.commands)
      for (const auto& f : command_paths(c, run_dirs, home)) out.push_back(f);
    for (const auto& inc : p.include_paths) {
      auto f = resolve_lexically(dirname_of(configs[k]), inc, home);
      out.push_back(f);
      configs.push_back(f);  // an included file may include more
    }
  }
  // Symlinked hooks (in hooks/ and in every hooksPath directory): their
  // targets; hook scripts: the files they name.
  std::vector<std::string> hook_dirs = {gd + "/hooks"};
  for (const auto& p : out) hook_dirs.push_back(p);  // (readlink: a linked hooksPath or included config too)
  for (const auto& hd : hook_dirs) {
    char buf[PATH_MAX];
    ssize_t n = ::readlink(hd.c_str(), buf, sizeof buf);
    if (n > 0) out.push_back(resolve_lexically(dirname_of(hd), std::string_view(buf, static_cast<size_t>(n)), home));
    DIR* d = ::opendir(hd.c_str());
    if (!d) continue;
    size_t scripts = 0;
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      if (e->d_type == DT_REG && !name.ends_with(".sample") && ++scripts <= 64) {
        for (const auto& f : protected_file_pointers(hd + "/" + name, run_dirs, home)) out.push_back(f);
        continue;
      }
      if (e->d_type != DT_LNK && e->d_type != DT_UNKNOWN) continue;
      n = ::readlinkat(::dirfd(d), e->d_name, buf, sizeof buf);
      if (n > 0) out.push_back(resolve_lexically(hd, std::string_view(buf, static_cast<size_t>(n)), home));
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<std::string> user_git_configs(const std::string& home) {
  std::vector<std::string> out;
  const char* sys = std::getenv("GIT_CONFIG_SYSTEM");
  out.push_back(sys && *sys ? sys : "/etc/gitconfig");
  if (const char* g = std::getenv("GIT_CONFIG_GLOBAL"); g && *g) {
    out.push_back(g);
    return out;
  }
  const char* x = std::getenv("XDG_CONFIG_HOME");
  if (x && *x == '/') out.push_back(std::string(x) + "/git/config");
  else if (!home.empty()) out.push_back(home + "/.config/git/config");
  if (!home.empty()) out.push_back(home + "/.gitconfig");
  return out;
}

std::vector<std::string> user_git_relative_names(const std::string& home) {
  std::vector<std::string> out;
  auto relative = [&](std::string v) {
    while (v.starts_with("./")) v.erase(0, 2);
    if (v.empty() || v[0] == '/' || v[0] == '~' || v.starts_with("../") || v.find("/../") != std::string::npos ||
        v.find_first_of("$`*?[") != std::string::npos)
      return;
    while (v.size() > 1 && v.back() == '/') v.pop_back();
    out.push_back(v);
  };
  // A repository-relative path resolves against "/@repo" here, and what
  // stays under it is what every repository would have.
  const std::string top = "/@repo";
  std::vector<std::string> configs = user_git_configs(home);
  for (size_t k = 0; k < configs.size() && k < 32; ++k) {
    auto p = git_config_pointers(read_small(configs[k]));
    for (const auto& h : p.hooks_paths) relative(h);
    for (const auto& c : p.commands)
      for (const auto& f : command_paths(c, {top}, home))
        if (f.starts_with(top + "/")) relative(f.substr(top.size() + 1));
    for (const auto& inc : p.include_paths) configs.push_back(resolve_lexically(dirname_of(configs[k]), inc, home));
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace exg::plan
