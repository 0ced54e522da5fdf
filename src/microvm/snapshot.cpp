#include "microvm/snapshot.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "microvm/vmm.hpp"

namespace exg::microvm {

namespace {

constexpr char kFormat[] = "exg-microvm-template 1";
constexpr int kSaveTimeoutMs = 120000, kRestoreTimeoutMs = 60000;
constexpr char kFdName[] = "exg-template";

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
    return final_path;
  }();
  if (!result && out) ::unlink(tmp.c_str());
  auto cont = qmp.execute("cont");
  if (!cont) return fail(cont.error());
  return result;
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
