// E2B's snapshots as files (snapshots.hpp): the store, and the copies its
// child processes make.
#include "serve/snapshots.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "sandbox/sweep.hpp"
#include "util/dir_fd.hpp"
#include "util/json_parse.hpp"
#include "util/unique_fd.hpp"

namespace exg::serve {

namespace {

namespace fs = std::filesystem;

// Deeper than this, a home is not copied (the copy recurses per level).
constexpr int kMaxDepth = 256;
constexpr int kDirFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// Copies the entries of src into dst, by fd, never following a link: files
// (set-id bits dropped), directories (mode kept), symlinks (as links). FIFOs,
// sockets and device nodes are not copied (nothing of them is content).
bool copy_children(int src, int dst, int depth, const std::string& rel, std::string* err) {
  if (depth > kMaxDepth) return *err = rel + ": deeper than " + std::to_string(kMaxDepth) + " directories", false;
  std::vector<std::string> names;
  if (!list_dir(src, [&](std::string_view n, unsigned char) { names.emplace_back(n); }))
    return *err = "list " + (rel.empty() ? "." : rel) + ": " + std::strerror(errno), false;
  std::sort(names.begin(), names.end());
  for (const auto& n : names) {
    const std::string r = rel.empty() ? n : rel + "/" + n;
    auto sys_fail = [&](const char* what) { return *err = std::string(what) + " " + r + ": " + std::strerror(errno), false; };
    struct stat st;
    if (::fstatat(src, n.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT) continue;  // removed meanwhile (the sandbox runs on)
      return sys_fail("stat");
    }
    if (S_ISLNK(st.st_mode)) {
      std::string target(PATH_MAX, '\0');
      ssize_t len = ::readlinkat(src, n.c_str(), target.data(), target.size());
      if (len < 0) return sys_fail("readlink");
      target.resize(static_cast<size_t>(len));
      if (::symlinkat(target.c_str(), dst, n.c_str()) != 0) return sys_fail("symlink");
    } else if (S_ISREG(st.st_mode)) {
      UniqueFd in(::openat(src, n.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
      if (!in) {
        if (errno == ENOENT) continue;
        return sys_fail("open");
      }
      struct stat now;
      if (::fstat(in.get(), &now) != 0 || !S_ISREG(now.st_mode)) continue;  // replaced meanwhile by something else
      UniqueFd out(::openat(dst, n.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
      if (!out) return sys_fail("create");
      if (!sandbox::copy_data(in.get(), out.get())) return sys_fail("copy");
      ::fchmod(out.get(), now.st_mode & 0777);
    } else if (S_ISDIR(st.st_mode)) {
      UniqueFd in(::openat(src, n.c_str(), kDirFlags));
      if (!in) {
        if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) continue;  // replaced meanwhile
        return sys_fail("open");
      }
      if (::mkdirat(dst, n.c_str(), 0700) != 0) return sys_fail("mkdir");
      UniqueFd out(::openat(dst, n.c_str(), kDirFlags));
      if (!out) return sys_fail("open the copy of");
      if (!copy_children(in.get(), out.get(), depth + 1, r, err)) return false;
      ::fchmod(out.get(), st.st_mode & 0777);
    }
  }
  return true;
}

bool chown_children(int dir, uid_t uid, gid_t gid, int depth, std::string* err) {
  if (depth > kMaxDepth + 1) return *err = "deeper than " + std::to_string(kMaxDepth) + " directories", false;
  std::vector<std::string> names;
  if (!list_dir(dir, [&](std::string_view n, unsigned char) { names.emplace_back(n); }))
    return *err = std::string("list: ") + std::strerror(errno), false;
  for (const auto& n : names) {
    if (::fchownat(dir, n.c_str(), uid, gid, AT_SYMLINK_NOFOLLOW) != 0) return *err = "chown " + n + ": " + std::strerror(errno), false;
    UniqueFd sub(::openat(dir, n.c_str(), kDirFlags));
    if (sub && !chown_children(sub.get(), uid, gid, depth + 1, err)) return false;
  }
  return true;
}

int64_t unix_ms(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

}  // namespace

nlohmann::json SnapshotRecord::to_json() const {
  nlohmann::json q = nlohmann::json::array();
  for (const auto& [path, why] : quarantined) q.push_back({path, why});
  return {{"snapshotID", id}, {"tenant", tenant}, {"sandboxID", sandbox}, {"templateID", template_name}, {"layer", layer},
          {"names", names}, {"createdMs", unix_ms(created)}, {"internal", internal}, {"quarantined", q}};
}

std::string snapshot_keeps(const std::string& layer) {
  std::string kept = "filesystem only: the sandbox's /home/user; not memory or processes (a sandbox made from it starts fresh)";
  if (layer == "microvm")
    kept += "; on the microVM layer too: qemu refuses to save a guest's memory while its 9p home is mounted, "
            "and a guest with processes has it mounted";
  return kept;
}

std::optional<SnapshotRecord> SnapshotRecord::from_json(const nlohmann::json& j) {
  try {
    SnapshotRecord r;
    r.id = j.at("snapshotID").get<std::string>();
    r.tenant = j.at("tenant").get<std::string>();
    r.sandbox = j.at("sandboxID").get<std::string>();
    r.template_name = j.at("templateID").get<std::string>();
    r.layer = j.value("layer", "");
    r.names = j.at("names").get<std::vector<std::string>>();
    r.created = std::chrono::system_clock::time_point(std::chrono::milliseconds(j.at("createdMs").get<int64_t>()));
    r.internal = j.value("internal", false);
    for (const auto& q : j.value("quarantined", nlohmann::json::array())) r.quarantined.emplace_back(q.at(0), q.at(1));
    return r;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

Result<void> SnapshotStore::open(const std::string& dir) {
  dir_ = dir;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return fail(Error::msg("create " + dir_, ec.message()));
  ::chmod(dir_.c_str(), 0700);
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    std::ifstream in(e.path() / "meta.json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto r = in.is_open() ? SnapshotRecord::from_json(parse_json(text)) : std::nullopt;
    // Half made (a server stopped while it copied), or a fork's: not a snapshot anyone can use.
    if (!r || r->internal || r->id != e.path().filename().string()) {
      fs::remove_all(e.path(), ec);
      continue;
    }
    by_id_[r->id] = std::move(*r);
  }
  return {};
}

Result<void> SnapshotStore::add(const SnapshotRecord& r) {
  std::string tmp = dir_of(r.id) + "/meta.json.tmp";
  {
    std::ofstream out(tmp);
    out << r.to_json().dump(2) << "\n";
    if (!out) return fail(Error::msg("write " + tmp, "failed"));
  }
  if (::rename(tmp.c_str(), (dir_of(r.id) + "/meta.json").c_str()) != 0) return fail(Error::sys("rename " + tmp));
  by_id_[r.id] = r;
  return {};
}

bool SnapshotStore::remove(const std::string& tenant, const std::string& id) {
  auto it = by_id_.find(id);
  if (it == by_id_.end() || it->second.tenant != tenant) return false;
  by_id_.erase(it);
  std::error_code ec;
  fs::remove_all(dir_of(id), ec);
  return true;
}

const SnapshotRecord* SnapshotStore::find(const std::string& tenant, const std::string& id_or_name) const {
  if (auto it = by_id_.find(id_or_name); it != by_id_.end()) return it->second.tenant == tenant ? &it->second : nullptr;
  const SnapshotRecord* best = nullptr;
  for (const auto& [id, r] : by_id_)
    if (r.tenant == tenant && !r.internal && std::find(r.names.begin(), r.names.end(), id_or_name) != r.names.end())
      if (!best || r.created > best->created) best = &r;
  return best;
}

std::vector<const SnapshotRecord*> SnapshotStore::list(const std::string& tenant, const std::string& sandbox,
                                                       const std::string& name) const {
  std::vector<const SnapshotRecord*> out;
  for (const auto& [id, r] : by_id_) {
    if (r.tenant != tenant || r.internal || (!sandbox.empty() && r.sandbox != sandbox)) continue;
    if (!name.empty() && id != name && std::find(r.names.begin(), r.names.end(), name) == r.names.end()) continue;
    out.push_back(&r);
  }
  std::sort(out.begin(), out.end(), [](auto* a, auto* b) { return a->created > b->created; });
  return out;
}

int take_snapshot_copy(const std::string& home, const std::string& snap_dir) {
  const std::string copy = snap_dir + "/home";
  auto refuse = [&](const std::string& why) {
    write_text(snap_dir + "/error.txt", why);
    return 1;
  };
  if (::mkdir(copy.c_str(), 0755) != 0) return refuse("mkdir " + copy + ": " + std::strerror(errno));
  // The sweep's "before": the empty copy. Every protected name the copy then holds is new to it.
  auto before = sandbox::snapshot_tree(copy, {}, {}, 1);
  if (!before) return refuse("sweep: " + before.error().str());
  UniqueFd src(::open(home.c_str(), kDirFlags));
  UniqueFd dst(::open(copy.c_str(), kDirFlags));
  if (!src || !dst) return refuse("open " + (src ? copy : home) + ": " + std::strerror(errno));
  std::string err;
  if (!copy_children(src.get(), dst.get(), 1, "", &err)) return refuse("copy of /home/user: " + err);
  sandbox::SweepOptions opt;
  opt.quarantine_dir = snap_dir + "/quarantine";
  auto planted = sandbox::sweep(copy, *before, opt);
  if (!planted) return refuse("sweep of the copy: " + planted.error().str());
  nlohmann::json list = nlohmann::json::array();
  for (const auto& p : *planted) {
    // Left in the copy, or not looked at: it would travel into every sandbox made from it.
    if (p.unchecked) return refuse("sweep of the copy: " + p.relpath + " could not be checked (" + p.why + ")");
    if (p.quarantined_to.empty()) return refuse("sweep of the copy: " + p.relpath + " (" + p.why + ") could not be quarantined");
    list.push_back({p.relpath, p.why});
  }
  write_text(snap_dir + "/planted.json", list.dump());
  return 0;
}

int seed_home_copy(const std::string& snapshot_home, const std::string& home) {
  const std::string err_file = fs::path(home).parent_path().string() + "/seed-error.txt";
  std::error_code ec;
  fs::create_directories(fs::path(home).parent_path(), ec);
  ::chmod(fs::path(home).parent_path().c_str(), 0700);
  if (::mkdir(home.c_str(), 0755) != 0 && errno != EEXIST) return write_text(err_file, "mkdir " + home + ": " + std::strerror(errno)), 1;
  UniqueFd src(::open(snapshot_home.c_str(), kDirFlags));
  UniqueFd dst(::open(home.c_str(), kDirFlags));
  if (!src || !dst) return write_text(err_file, "open " + (src ? home : snapshot_home) + ": " + std::strerror(errno)), 1;
  std::string err;
  if (!copy_children(src.get(), dst.get(), 1, "", &err)) return write_text(err_file, "copy of the snapshot: " + err), 1;
  return 0;
}

Result<void> chown_tree(const std::string& root, uid_t uid, gid_t gid) {
  UniqueFd fd(::open(root.c_str(), kDirFlags));
  if (!fd) return fail(Error::sys("open " + root));
  std::string err;
  if (!chown_children(fd.get(), uid, gid, 0, &err)) return fail(Error::msg("chown " + root, err));
  return {};
}

}  // namespace exg::serve
