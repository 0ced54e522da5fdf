#include "microvm/snapshot.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <thread>

#include "microvm/vmm.hpp"
#include "policy/policy.hpp"

namespace exg::microvm {

namespace {

constexpr char kFormat[] = "exg-microvm-template 1";
constexpr int kSaveTimeoutMs = 120000, kRestoreTimeoutMs = 60000;
constexpr char kFdName[] = "exg-template";
// A partial save this old is no save in progress (one is bounded at kSaveTimeoutMs).
constexpr int64_t kPartialSaveAgeSec = 600;
constexpr size_t kKeyChars = 64;  // hex SHA-256

bool is_key(std::string_view s) {
  return s.size() == kKeyChars && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// Owned by root or by us, not writable by group or others.
bool safe_owner_mode(const struct stat& st) {
  return (st.st_uid == 0 || st.st_uid == ::geteuid()) && (st.st_mode & 022) == 0;
}

bool safe_dir(const std::string& d) {
  struct stat st;
  return ::lstat(d.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && safe_owner_mode(st);
}

std::string identity_of(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return path + " missing\n";
  return path + " " + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + " " + std::to_string(st.st_size) +
         " " + std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + "\n";
}

// mkdir -p with mode 0755, each new directory ours.
bool make_dirs(const std::string& d) {
  for (size_t at = 1; at <= d.size(); ++at) {
    if (at != d.size() && d[at] != '/') continue;
    std::string p = d.substr(0, at);
    if (::mkdir(p.c_str(), 0755) != 0 && errno != EEXIST) return false;
  }
  return true;
}

}  // namespace

bool snapshots_enabled() {
  const char* e = std::getenv("EXG_MICROVM_SNAPSHOT");
  return !(e && (std::string(e) == "off" || std::string(e) == "0"));
}

Result<std::string> template_key(const GuestImage& img, const std::vector<std::string>& argv) {
  std::string text = std::string(kFormat) + "\n" + identity_of(kQemuBinary) + identity_of(img.kernel) +
                     identity_of(img.initramfs);
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == "-name" || argv[i] == "-incoming") {
      ++i;
      continue;
    }
    text += argv[i] + "\n";
  }
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(ctx);
    return fail(Error::msg("microvm: template key", "SHA-256 unavailable"));
  }
  EVP_DigestUpdate(ctx, text.data(), text.size());
  // The initramfs's content (2 MB: cheap); the 64 MB kernel by its identity above.
  int fd = ::open(img.initramfs.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    EVP_MD_CTX_free(ctx);
    return fail(Error::sys("microvm: open " + img.initramfs));
  }
  char buf[1 << 16];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) EVP_DigestUpdate(ctx, buf, static_cast<size_t>(n));
  ::close(fd);
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_DigestFinal_ex(ctx, md, &len);
  EVP_MD_CTX_free(ctx);
  static const char hex[] = "0123456789abcdef";
  std::string key;
  for (unsigned i = 0; i < len; ++i) key += hex[md[i] >> 4], key += hex[md[i] & 15];
  return key;
}

std::string template_write_dir() {
  if (const char* e = std::getenv("EXG_MICROVM_SNAPSHOT_DIR"); e && *e) return e;
  if (::geteuid() == 0) return "/var/cache/exguardian/microvm";
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x == '/') return std::string(x) + "/exguardian/microvm";
  if (const char* h = std::getenv("HOME"); h && *h == '/') return std::string(h) + "/.cache/exguardian/microvm";
  return "";
}

std::vector<std::string> template_read_dirs() {
  if (const char* e = std::getenv("EXG_MICROVM_SNAPSHOT_DIR"); e && *e) return {e};
  // An ordinary user's own first: where a root template that does not restore
  // for it was replaced by its own (launch.cpp boots cold and saves there).
  std::vector<std::string> d;
  if (::geteuid() != 0) {
    std::string w = template_write_dir();
    if (!w.empty()) d.push_back(w);
  }
  d.push_back("/var/cache/exguardian/microvm");
  return d;
}

std::optional<Template> find_template(const std::string& key) {
  for (const auto& d : template_read_dirs()) {
    if (!safe_dir(d)) continue;
    std::string p = d + "/" + key + ".state";
    UniqueFd fd(::open(p.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    struct stat st;
    if (!fd || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode) || !safe_owner_mode(st) || st.st_size == 0) continue;
    // Its mtime says when it was last used: the pruning removes the least recently used first.
    // (Only its owner may set it: a user's use of root's template leaves it as it was.)
    ::futimens(fd.get(), nullptr);
    return Template{p, std::move(fd)};
  }
  return std::nullopt;
}

Result<std::string> save_template(Qmp& qmp, const std::string& key) {
  std::string dir = template_write_dir();
  if (dir.empty()) return fail(Error::msg("microvm: template", "no cache directory (no HOME)"));
  if (!make_dirs(dir)) return fail(Error::sys("microvm: template: mkdir " + dir));
  if (!safe_dir(dir))
    return fail(Error::msg("microvm: template: " + dir, "not a directory owned by root or by us and writable by no one else"));
  auto limit = template_cache_limit();
  if (!limit) return fail(limit.error());
  auto stopped = qmp.execute("stop");
  if (!stopped) return fail(stopped.error());
  std::string tmp = dir + "/." + key + ".XXXXXX";
  UniqueFd out(::mkostemp(tmp.data(), O_CLOEXEC));
  auto result = [&]() -> Result<std::string> {
    if (!out) return fail(Error::sys("microvm: template: create " + tmp));
    if (::fchmod(out.get(), 0644) != 0) return fail(Error::sys("microvm: template: chmod " + tmp));
    auto g = qmp.execute("getfd", {{"fdname", kFdName}}, out.get());
    if (!g) return fail(g.error());
    auto m = qmp.execute("migrate", {{"uri", std::string("fd:") + kFdName}});
    if (!m) return fail(m.error());
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(kSaveTimeoutMs);
    for (;;) {
      auto q = qmp.execute("query-migrate");
      if (!q) return fail(q.error());
      std::string st = q->value("status", "");
      if (st == "completed") break;
      if (st == "failed" || st == "cancelled")
        return fail(Error::msg("microvm: template: qemu's migrate", q->value("error-desc", st)));
      if (std::chrono::steady_clock::now() > until) return fail(Error::msg("microvm: template", "save timed out"));
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::string final_path = dir + "/" + key + ".state";
    if (::fsync(out.get()) != 0 || ::rename(tmp.c_str(), final_path.c_str()) != 0)
      return fail(Error::sys("microvm: template: rename into " + final_path));
    // Each new configuration adds a template: the directory stays within its bound.
    prune_templates(dir, *limit, key + ".state");
    return final_path;
  }();
  if (!result && out) ::unlink(tmp.c_str());
  auto cont = qmp.execute("cont");
  if (!cont) return fail(cont.error());
  return result;
}

Result<uint64_t> template_cache_limit() {
  const char* e = std::getenv("EXG_MICROVM_SNAPSHOT_MAX");
  if (!e || !*e) return kDefaultTemplateCacheBytes;
  auto size = policy::parse_size(e);
  if (!size) return fail(Error::msg(std::string("EXG_MICROVM_SNAPSHOT_MAX=") + e, size.error().message));
  return *size;
}

std::vector<std::string> templates_to_prune(std::vector<CachedTemplate> files, uint64_t limit,
                                            const std::string& keep, int64_t now_sec) {
  std::vector<std::string> out;
  uint64_t total = 0;
  std::vector<CachedTemplate> kept;
  for (auto& f : files) {
    if (f.partial && f.name != keep && now_sec - f.used_sec > kPartialSaveAgeSec) out.push_back(f.name);
    else total += f.bytes, kept.push_back(std::move(f));
  }
  // Least recently used first; a tie by name, so that the choice does not depend on listing order.
  std::sort(kept.begin(), kept.end(), [](const CachedTemplate& a, const CachedTemplate& b) {
    return a.used_sec != b.used_sec ? a.used_sec < b.used_sec : a.name < b.name;
  });
  for (const auto& f : kept) {
    if (total <= limit) break;
    if (f.name == keep || f.partial) continue;  // (a partial save still young may be in progress)
    out.push_back(f.name);
    total -= f.bytes;
  }
  return out;
}

std::vector<CachedTemplate> list_templates(const std::string& dir) {
  std::vector<CachedTemplate> out;
  UniqueFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dfd) return out;
  DIR* d = ::fdopendir(::dup(dfd.get()));
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    std::string_view n = e->d_name;
    CachedTemplate t;
    if (n.size() == kKeyChars + 6 && n.ends_with(".state") && is_key(n.substr(0, kKeyChars))) {
      t.partial = false;
    } else if (n.size() == 1 + kKeyChars + 7 && n[0] == '.' && is_key(n.substr(1, kKeyChars)) && n[1 + kKeyChars] == '.') {
      t.partial = true;  // mkostemp's ".<key>.XXXXXX"
    } else {
      continue;
    }
    struct stat st;
    if (::fstatat(dfd.get(), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    t.name = std::string(n);
    t.bytes = static_cast<uint64_t>(st.st_size);
    t.used_sec = st.st_mtim.tv_sec;
    out.push_back(std::move(t));
  }
  ::closedir(d);
  return out;
}

std::vector<std::string> prune_templates(const std::string& dir, uint64_t limit, const std::string& keep) {
  std::vector<std::string> removed;
  UniqueFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dfd) return removed;
  for (const auto& name : templates_to_prune(list_templates(dir), limit, keep, ::time(nullptr)))
    if (::unlinkat(dfd.get(), name.c_str(), 0) == 0) removed.push_back(name);
  return removed;
}

Result<void> restore_template(Qmp& qmp, int tmpl_fd) {
  auto g = qmp.execute("getfd", {{"fdname", kFdName}}, tmpl_fd);
  if (!g) return fail(g.error());
  auto m = qmp.execute("migrate-incoming", {{"uri", std::string("fd:") + kFdName}});
  if (!m) return fail(m.error());
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(kRestoreTimeoutMs);
  for (;;) {
    auto q = qmp.execute("query-status");
    if (!q) return fail(q.error());
    std::string st = q->value("status", "");
    if (st == "paused" || st == "running") break;  // the template was saved stopped: it loads paused
    if (st != "inmigrate") {
      auto mig = qmp.execute("query-migrate");
      std::string why = mig ? mig->value("error-desc", st) : st;
      return fail(Error::msg("microvm: restore from the template", why));
    }
    if (std::chrono::steady_clock::now() > until) return fail(Error::msg("microvm: restore", "timed out"));
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  auto c = qmp.execute("cont");
  if (!c) return fail(c.error());
  return {};
}

}  // namespace exg::microvm
