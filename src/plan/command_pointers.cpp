#include "plan/command_pointers.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <array>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "plan/git_pointers.hpp"
#include "util/json_parse.hpp"
#include "util/unique_fd.hpp"

namespace exg::plan {

namespace {

constexpr size_t kMaxFile = 256 * 1024;
constexpr size_t kMaxPaths = 256;

std::string read_capped(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW));
  if (!fd) return {};
  struct stat st;
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || static_cast<size_t>(st.st_size) > kMaxFile) return {};
  std::string s(static_cast<size_t>(st.st_size), '\0');
  ssize_t n = ::pread(fd.get(), s.data(), s.size(), 0);
  s.resize(n < 0 ? 0 : static_cast<size_t>(n));
  return s;
}

std::string base_name(const std::string& p) { return p.substr(p.rfind('/') + 1); }

// A string member of a JSON object, or "" (no exceptions for odd types).
std::string str_field(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return {};
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool script_suffix(std::string_view w) {
  static const std::array<std::string_view, 14> kSuffixes = {".sh",  ".bash", ".zsh", ".py", ".js", ".mjs", ".cjs",
                                                             ".ts",  ".rb",   ".pl",  ".lua", ".php", ".ps1", ".exe"};
  return std::any_of(kSuffixes.begin(), kSuffixes.end(), [&](auto s) { return w.ends_with(s); });
}

// One word of command text as a relative or absolute path, or "" when it is
// not one (a flag, a URL, a wildcard, an unknown variable).
std::string path_word(std::string w) {
  if (w.starts_with("!")) w.erase(0, 1);  // a git alias's shell command
  for (const char* v : {"${workspaceFolder}/", "${workspaceRoot}/", "${CLAUDE_PROJECT_DIR}/", "$CLAUDE_PROJECT_DIR/",
                        "${PWD}/", "$PWD/", "${fileWorkspaceFolder}/", "${projectRoot}/", "$PROJECT_DIR/",
                        "${PROJECT_DIR}/", "${GIT_DIR}/../", "$(pwd)/", "$(git rev-parse --show-toplevel)/"})
    if (w.starts_with(v)) w = "./" + w.substr(std::string_view(v).size());
  while (!w.empty() && (w.back() == '.' || w.back() == ':' || w.back() == '\\')) {
    if (w == "." || w == "..") break;
    w.pop_back();
  }
  if (w.empty() || w.size() > 1024 || w[0] == '-' || w == "." || w == "..") return {};
  if (w.find("://") != std::string::npos || w.find_first_of("$*?`{}<>|&;=@%") != std::string::npos) return {};
  if (w.find('/') == std::string::npos && w.find('.') == std::string::npos) return {};
  return w;
}

// The separators between words: whitespace, quotes and the punctuation of
// JSON, TOML, YAML and shell.
bool separator(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '"' || c == '\'' || c == ',' || c == '(' ||
         c == ')' || c == '[' || c == ']' || c == ';' || c == '`';
}

void add_paths(std::string_view text, const std::vector<std::string>& bases, const std::string& home,
               std::set<std::string>& out, bool dirs_too = false) {
  size_t i = 0;
  while (i < text.size() && out.size() < kMaxPaths) {
    while (i < text.size() && separator(text[i])) ++i;
    size_t j = i;
    while (j < text.size() && !separator(text[j])) ++j;
    std::string w = path_word(std::string(text.substr(i, j - i)));
    i = j;
    if (w.empty()) continue;
    for (const auto& b : bases) {
      std::string p = resolve_lexically(b, w, home);
      struct stat st;
      if (::stat(p.c_str(), &st) == 0) {
        if (S_ISREG(st.st_mode) || (dirs_too && S_ISDIR(st.st_mode))) out.insert(p);
      } else if (w.find('/') != std::string::npos && script_suffix(w)) {
        out.insert(p);
      }
    }
  }
}

// JSON with comments and trailing commas (VS Code's JSONC).
nlohmann::json parse_jsonc(const std::string& text) {
  std::string t;
  t.reserve(text.size());
  bool in_str = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_str) {
      t += c;
      if (c == '\\' && i + 1 < text.size()) t += text[++i];
      else if (c == '"') in_str = false;
      continue;
    }
    if (c == '"') in_str = true;
    if (c == ',') {
      size_t k = i + 1;
      while (k < text.size() && std::isspace(static_cast<unsigned char>(text[k]))) ++k;
      if (k < text.size() && (text[k] == '}' || text[k] == ']')) continue;
    }
    t += c;
  }
  return parse_json(t, nullptr, /*comments=*/true);
}

// VS Code tasks that run on opening the folder, with the tasks they depend on.
void folder_open_tasks(const nlohmann::json& tasks, const std::vector<std::string>& bases, const std::string& home,
                       std::set<std::string>& out) {
  if (!tasks.is_array()) return;
  std::set<std::string> wanted;
  std::function<void(const nlohmann::json&)> want = [&](const nlohmann::json& t) {
    std::string label = str_field(t, "label");
    if (!wanted.insert(label.empty() ? t.dump() : label).second) return;
    add_paths(t.dump(), bases, home, out);
    auto deps = t.find("dependsOn");
    if (deps == t.end()) return;
    std::vector<std::string> names;
    if (deps->is_string()) names.push_back(deps->get<std::string>());
    if (deps->is_array())
      for (const auto& d : *deps)
        if (d.is_string()) names.push_back(d.get<std::string>());
    for (const auto& n : names)
      for (const auto& u : tasks)
        if (str_field(u, "label") == n) want(u);
  };
  for (const auto& t : tasks) {
    if (!t.is_object()) continue;
    auto ro = t.find("runOptions");
    if (ro != t.end() && str_field(*ro, "runOn") == "folderOpen") want(t);
  }
}

std::vector<std::string> bases_with(const std::vector<std::string>& bases, const std::string& dir) {
  std::vector<std::string> b = bases;
  if (std::find(b.begin(), b.end(), dir) == b.end()) b.insert(b.begin(), dir);
  return b;
}

}  // namespace

std::vector<std::string> command_paths(std::string_view text, const std::vector<std::string>& bases,
                                       const std::string& home) {
  std::set<std::string> out;
  add_paths(text, bases, home, out);
  return {out.begin(), out.end()};
}

std::vector<std::string> protected_file_pointers(const std::string& path, const std::vector<std::string>& bases,
                                                 const std::string& home) {
  std::string text = read_capped(path);
  if (text.empty()) return {};
  std::string name = base_name(path);
  std::string dir = path.substr(0, path.rfind('/'));
  std::string parent = base_name(dir);
  std::set<std::string> out;
  auto b = bases_with(bases, dir);
  if (parent == ".vscode" && name == "launch.json") return {};  // debug configurations: run when the user starts one
  // Prose and IDE state name project files without running them (a command's
  // markdown, a rule, .idea's recently opened files): not followed.
  for (const char* prose : {".md", ".mdc", ".txt", ".rst", ".html", ".xml", ".iml"})
    if (name.ends_with(prose)) return {};
  if (path.find("/.idea/") != std::string::npos) return {};
  if ((parent == ".vscode" && name == "tasks.json") || name.ends_with(".code-workspace")) {
    auto j = parse_jsonc(text);
    if (j.is_discarded() || !j.is_object()) {
      add_paths(text, b, home, out);  // unreadable as JSON: everything it names
    } else if (name.ends_with(".code-workspace")) {
      if (auto t = j.find("tasks"); t != j.end() && t->is_object() && t->contains("tasks"))
        folder_open_tasks((*t)["tasks"], b, home, out);
      if (auto s = j.find("settings"); s != j.end()) add_paths(s->dump(), b, home, out);
    } else if (auto t = j.find("tasks"); t != j.end()) {
      folder_open_tasks(*t, b, home, out);
    }
    return {out.begin(), out.end()};
  }
  add_paths(text, b, home, out);
  if (name == ".envrc" || name.starts_with(".envrc.")) {
    // What direnv's stdlib reads without naming it, and PATH_add's directories
    // (their executables come first on the user's PATH after cd).
    size_t i = 0;
    while (i < text.size()) {
      size_t j = text.find('\n', i);
      if (j == std::string::npos) j = text.size();
      std::string line = text.substr(i, j - i);
      i = j + 1;
      while (!line.empty() && (line[0] == ' ' || line[0] == '\t')) line.erase(0, 1);
      auto first = line.substr(0, line.find_first_of(" \t"));
      std::string rest = line.size() > first.size() ? line.substr(first.size()) : std::string();
      auto named = [&](std::initializer_list<const char*> files) {
        for (const char* f : files) out.insert(resolve_lexically(dir, f, home));
      };
      if ((first == "dotenv" || first == "dotenv_if_exists") && rest.find_first_not_of(" \t") == std::string::npos)
        named({".env"});
      if (first == "use" && rest.find("flake") != std::string::npos) named({"flake.nix", "flake.lock"});
      if (first == "use" && rest.find("nix") != std::string::npos && rest.find("flake") == std::string::npos)
        named({"shell.nix", "default.nix"});
      if (first == "use" && rest.find("devenv") != std::string::npos)
        named({"devenv.nix", "devenv.yaml", "devenv.lock", "devenv.local.nix"});
      if (first == "PATH_add" || first == "path_add" || first == "PATH_add_if_exists") {
        std::set<std::string> dirs;
        add_paths(rest, {dir}, home, dirs, true);
        // a bare directory name ("PATH_add bin") is a path here
        for (size_t k = 0; k < rest.size();) {
          while (k < rest.size() && separator(rest[k])) ++k;
          size_t e = k;
          while (e < rest.size() && !separator(rest[e])) ++e;
          std::string w = rest.substr(k, e - k);
          k = e;
          struct stat st;
          std::string p = resolve_lexically(dir, w, home);
          if (!w.empty() && w.find_first_of("$*?`") == std::string::npos && ::stat(p.c_str(), &st) == 0 &&
              S_ISDIR(st.st_mode))
            dirs.insert(p);
        }
        out.insert(dirs.begin(), dirs.end());
      }
    }
  }
  return {out.begin(), out.end()};
}

}  // namespace exg::plan
