#include "sandbox/git_index.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "util/unique_fd.hpp"

namespace exg::sandbox {

namespace {

uint32_t be32(const unsigned char* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }
uint16_t be16(const unsigned char* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }

std::string read_at(int dirfd, const char* name, size_t max, struct stat* st) {
  UniqueFd fd(::openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (!fd || ::fstat(fd.get(), st) != 0 || !S_ISREG(st->st_mode) || static_cast<size_t>(st->st_size) > max) return {};
  std::string s(static_cast<size_t>(st->st_size), '\0');
  size_t got = 0;
  while (got < s.size()) {
    ssize_t n = ::pread(fd.get(), s.data() + got, s.size() - got, static_cast<off_t>(got));
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  s.resize(got);
  return s;
}

}  // namespace

std::optional<std::vector<IndexEntry>> parse_git_index(std::string_view data, size_t hash_len) {
  const auto* d = reinterpret_cast<const unsigned char*>(data.data());
  size_t size = data.size();
  if (size < 12 + hash_len || std::memcmp(d, "DIRC", 4) != 0) return std::nullopt;
  uint32_t version = be32(d + 4), count = be32(d + 8);
  if (version < 2 || version > 4) return std::nullopt;
  size_t end = size - hash_len;  // the trailing checksum
  size_t off = 12;
  std::vector<IndexEntry> out;
  std::string prev;
  for (uint32_t i = 0; i < count; ++i) {
    size_t start = off;
    if (off + 40 + hash_len + 2 > end) return std::nullopt;
    IndexEntry e;
    e.mode = be32(d + off + 24);
    e.oid.assign(data.substr(off + 40, hash_len));
    uint16_t flags = be16(d + off + 40 + hash_len);
    off += 40 + hash_len + 2;
    if (flags & 0x4000) {  // extended flags (version 3 and later)
      if (version < 3 || off + 2 > end) return std::nullopt;
      off += 2;
    }
    if (version == 4) {
      // Prefix compression: drop N bytes of the previous path, then a NUL-terminated suffix.
      size_t strip = 0;
      unsigned char c;
      size_t k = 0;
      do {
        if (off >= end || k > 8) return std::nullopt;
        c = d[off++];
        strip = (k == 0) ? (c & 0x7f) : (((strip + 1) << 7) | (c & 0x7f));
        ++k;
      } while (c & 0x80);
      if (strip > prev.size()) return std::nullopt;
      size_t nul = data.find('\0', off);
      if (nul == std::string_view::npos || nul >= end) return std::nullopt;
      e.path = prev.substr(0, prev.size() - strip) + std::string(data.substr(off, nul - off));
      off = nul + 1;
    } else {
      size_t nul = data.find('\0', off);
      if (nul == std::string_view::npos || nul >= end) return std::nullopt;
      e.path.assign(data.substr(off, nul - off));
      // Entries are padded with 1-8 NULs to a multiple of 8 bytes.
      off = start + ((nul - start + 8) & ~size_t(7));
      if (off > end) return std::nullopt;
    }
    prev = e.path;
    out.push_back(std::move(e));
  }
  // Extensions: a split index ("link") keeps entries in another file.
  while (off + 8 <= end) {
    if (std::memcmp(d + off, "link", 4) == 0) return std::nullopt;
    size_t len = be32(d + off + 4);
    if (off + 8 + len > end) return std::nullopt;
    off += 8 + len;
  }
  return out;
}

StagedProtected staged_protected(int git_dir_fd, const plan::ProtectedPaths& pp) {
  StagedProtected s;
  struct stat st;
  if (::fstatat(git_dir_fd, "index", &st, AT_SYMLINK_NOFOLLOW) != 0) return s;
  s.present = true;
  s.dev = st.st_dev;
  s.ino = st.st_ino;
  s.ctime_ns = int64_t(st.st_ctim.tv_sec) * 1000000000 + st.st_ctim.tv_nsec;
  std::string data = read_at(git_dir_fd, "index", size_t(1) << 30, &st);
  // The object format: SHA-256 when the config says so (extensions.objectformat).
  struct stat cst;
  std::string config = read_at(git_dir_fd, "config", 1 << 20, &cst);
  size_t hash_len = config.find("sha256") != std::string::npos ? 32 : 20;
  auto entries = parse_git_index(data, hash_len);
  if (!entries && hash_len == 20) entries = parse_git_index(data, 32);
  if (!entries) return s;
  std::set<std::string> out;
  for (const auto& e : *entries) {
    bool is_dir = (e.mode & 0170000) == 0040000;  // a sparse index's directory entry
    auto m = pp.classify_path(e.path, is_dir, (e.mode & 0170000) == 0100000);
    if (m.kind != plan::ProtectMatch::Protected) continue;
    char mode[16];
    std::snprintf(mode, sizeof mode, "%06o ", e.mode);
    std::string hex;
    for (unsigned char c : e.oid) {
      static const char* k = "0123456789abcdef";
      hex += k[c >> 4];
      hex += k[c & 15];
    }
    out.insert(std::string(mode) + hex + " " + e.path);
  }
  s.entries = std::move(out);
  return s;
}

}  // namespace exg::sandbox
