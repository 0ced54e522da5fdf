#include "agent/protocol.hpp"

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstring>
#include <set>

#include "util/json_parse.hpp"

namespace exg::agent {

namespace {

void put_u32(std::string& out, uint32_t v) {
  out.push_back(static_cast<char>(v >> 24));
  out.push_back(static_cast<char>(v >> 16));
  out.push_back(static_cast<char>(v >> 8));
  out.push_back(static_cast<char>(v));
}

uint32_t get_u32(const char* p) {
  auto b = reinterpret_cast<const unsigned char*>(p);
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
}

// Typed access to a request header's fields; every field read is marked, and
// what is left unread at the end is an unknown field.
class Fields {
 public:
  explicit Fields(const nlohmann::json& h) : h_(h) {}
  std::string error;

  bool has(const char* k) const { return h_.contains(k); }

  bool str(const char* k, std::string* out, bool required = false) {
    seen_.insert(k);
    auto it = h_.find(k);
    if (it == h_.end()) return !required || bad(std::string("missing field \"") + k + "\"");
    if (!it->is_string()) return bad(std::string("field \"") + k + "\" must be a string");
    const auto& v = it->get_ref<const std::string&>();
    if (v.size() > kMaxString) return bad(std::string("field \"") + k + "\" is longer than 64 KiB");
    if (v.find('\0') != std::string::npos) return bad(std::string("field \"") + k + "\" holds a NUL byte");
    *out = v;
    return true;
  }
  bool strings(const char* k, std::vector<std::string>* out, bool required = false) {
    seen_.insert(k);
    auto it = h_.find(k);
    if (it == h_.end()) return !required || bad(std::string("missing field \"") + k + "\"");
    if (!it->is_array()) return bad(std::string("field \"") + k + "\" must be an array of strings");
    if (it->size() > kMaxArgs) return bad(std::string("field \"") + k + "\" has more than 4096 entries");
    for (const auto& e : *it) {
      if (!e.is_string()) return bad(std::string("field \"") + k + "\" must be an array of strings");
      const auto& v = e.get_ref<const std::string&>();
      if (v.size() > kMaxString) return bad(std::string("an entry of \"") + k + "\" is longer than 64 KiB");
      if (v.find('\0') != std::string::npos) return bad(std::string("an entry of \"") + k + "\" holds a NUL byte");
      out->push_back(v);
    }
    return true;
  }
  // An object of NAME: "value" strings (write's metadata): names of HTTP token characters, values
  // printable ASCII, as E2B's SDK checks them; at most 64 of them.
  bool metadata(const char* k, std::optional<std::map<std::string, std::string>>* out) {
    seen_.insert(k);
    auto it = h_.find(k);
    if (it == h_.end()) return true;
    if (!it->is_object()) return bad(std::string("field \"") + k + "\" must be an object of strings");
    if (it->size() > 64) return bad(std::string("field \"") + k + "\" has more than 64 entries");
    auto token = [](unsigned char c) { return std::isalnum(c) || std::strchr("!#$%&'*+-.^_`|~", c); };
    std::map<std::string, std::string> m;
    for (const auto& [name, v] : it->items()) {
      if (name.empty() || name.size() > 200 || !std::all_of(name.begin(), name.end(), [&](char c) { return c && token(static_cast<unsigned char>(c)); }))
        return bad(std::string("a name of \"") + k + "\" is empty, too long or not an HTTP token");
      if (!v.is_string()) return bad(std::string("field \"") + k + "\" must be an object of strings");
      const auto& s = v.get_ref<const std::string&>();
      if (s.size() > 4096 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c <= 0x7e; }))
        return bad(std::string("a value of \"") + k + "\" is longer than 4 KiB or not printable ASCII");
      m[name] = s;
    }
    *out = std::move(m);
    return true;
  }
  bool flag(const char* k, bool* out) {
    seen_.insert(k);
    auto it = h_.find(k);
    if (it == h_.end()) return true;
    if (!it->is_boolean()) return bad(std::string("field \"") + k + "\" must be true or false");
    *out = it->get<bool>();
    return true;
  }
  template <typename T>
  bool num(const char* k, T* out, uint64_t lo, uint64_t hi, bool required = false) {
    seen_.insert(k);
    auto it = h_.find(k);
    if (it == h_.end()) return !required || bad(std::string("missing field \"") + k + "\"");
    if (!it->is_number_unsigned() && !(it->is_number_integer() && it->get<int64_t>() >= 0))
      return bad(std::string("field \"") + k + "\" must be a non-negative integer");
    uint64_t v = it->get<uint64_t>();
    if (v < lo || v > hi)
      return bad(std::string("field \"") + k + "\" out of range " + std::to_string(lo) + ".." + std::to_string(hi));
    *out = static_cast<T>(v);
    return true;
  }
  bool sig(const char* k, int* out) {
    seen_.insert(k);
    auto it = h_.find(k);
    if (it == h_.end()) return bad(std::string("missing field \"") + k + "\"");
    *out = signal_number(*it);
    return *out != 0 || bad(std::string("field \"") + k + "\": unknown signal");
  }
  bool rest() {
    for (auto it = h_.begin(); it != h_.end(); ++it)
      if (!seen_.count(it.key())) return bad("unknown field \"" + it.key() + "\"");
    return true;
  }

 private:
  const nlohmann::json& h_;
  std::set<std::string> seen_{"op"};
  bool bad(std::string e) {
    if (error.empty()) error = std::move(e);
    return false;
  }
};

struct OpName {
  const char* name;
  Op op;
};
constexpr OpName kOps[] = {
    {"start", Op::Start},     {"input", Op::Input},       {"close_stdin", Op::CloseStdin},
    {"signal", Op::Signal},   {"resize", Op::Resize},     {"list", Op::List},
    {"attach", Op::Attach},   {"stat", Op::Stat},         {"list_dir", Op::ListDir},
    {"read", Op::Read},       {"write", Op::Write},       {"mkdir", Op::Mkdir},
    {"remove", Op::Remove},   {"rename", Op::Rename},     {"watch", Op::Watch},
    {"unwatch", Op::Unwatch}, {"shutdown", Op::Shutdown},
};

struct SigName {
  const char* name;
  int sig;
};
constexpr SigName kSignals[] = {{"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
                                {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"PIPE", SIGPIPE}, {"ALRM", SIGALRM},
                                {"TERM", SIGTERM}, {"CONT", SIGCONT}, {"STOP", SIGSTOP}, {"TSTP", SIGTSTP},
                                {"WINCH", SIGWINCH}};

constexpr int kMaxPid = 4194304;  // PID_MAX_LIMIT

}  // namespace

std::string encode(const Frame& f) {
  std::string header = f.header.is_object() ? f.header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                                            : std::string("{}");
  std::string out;
  out.reserve(kPrefixBytes + kFixedBytes + header.size() + f.payload.size());
  put_u32(out, static_cast<uint32_t>(kFixedBytes + header.size() + f.payload.size()));
  out.push_back(static_cast<char>(f.kind));
  put_u32(out, f.id);
  put_u32(out, static_cast<uint32_t>(header.size()));
  out += header;
  out += f.payload;
  return out;
}

void FrameReader::feed(const char* data, size_t n) {
  if (skip_ > 0) {
    size_t drop = static_cast<size_t>(std::min<uint64_t>(skip_, n));
    skip_ -= drop;
    data += drop;
    n -= drop;
  }
  if (pos_ > 0 && pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  }
  buf_.append(data, n);
}

FrameReader::Item FrameReader::next() {
  Item item;
  if (skip_ > 0) return item;
  auto compact = [this] {
    if (pos_ > 65536 && pos_ * 2 > buf_.size()) {
      buf_.erase(0, pos_);
      pos_ = 0;
    }
  };
  size_t avail = buf_.size() - pos_;
  if (avail < kPrefixBytes) return item;
  const char* p = buf_.data() + pos_;
  uint32_t len = get_u32(p);
  if (len < kFixedBytes) {
    // Too short to hold kind, id and header length: drop the prefix and what it claims.
    uint32_t id = 0;
    size_t have = avail - kPrefixBytes;
    size_t take = std::min<size_t>(have, len);
    pos_ += kPrefixBytes + take;
    skip_ = len - take;
    item.error = FrameError{id, "frame of " + std::to_string(len) + " bytes is shorter than its fixed part (9)"};
    compact();
    return item;
  }
  if (len > kMaxFrame) {
    // Never buffered: what has arrived is dropped, the rest skipped as it comes.
    uint32_t id = avail >= kPrefixBytes + 5 ? get_u32(p + 5) : 0;
    size_t have = avail - kPrefixBytes;
    pos_ += kPrefixBytes + std::min<size_t>(have, len);
    skip_ = len > have ? len - have : 0;
    item.error = FrameError{id, "frame of " + std::to_string(len) + " bytes is larger than the limit (" +
                                    std::to_string(kMaxFrame) + ")"};
    compact();
    return item;
  }
  if (avail < kPrefixBytes + len) return item;
  const char* body = p + kPrefixBytes;
  pos_ += kPrefixBytes + len;
  uint8_t kind = static_cast<uint8_t>(body[0]);
  uint32_t id = get_u32(body + 1);
  uint32_t hlen = get_u32(body + 5);
  auto bad = [&](std::string what) {
    item.error = FrameError{id, std::move(what)};
    compact();
    return item;
  };
  if (kind != 'Q' && kind != 'R' && kind != 'E') return bad("unknown frame kind " + std::to_string(kind));
  if (hlen > kMaxHeader) return bad("header of " + std::to_string(hlen) + " bytes is larger than the limit (65536)");
  if (hlen > len - kFixedBytes) return bad("header length " + std::to_string(hlen) + " runs past the frame");
  if (len - kFixedBytes - hlen > kMaxPayload) return bad("payload larger than the limit (1 MiB)");
  std::string_view htext(body + kFixedBytes, hlen);
  // Tighter than parse_json's bound: a header nests a few levels at most.
  if (json_depth(htext, kMaxJsonDepth) > kMaxJsonDepth) return bad("header nested deeper than 8 levels");
  auto header = nlohmann::json::parse(htext.begin(), htext.end(), nullptr, false);
  if (header.is_discarded()) return bad("header is not valid JSON");
  if (!header.is_object()) return bad("header is not a JSON object");
  Frame f;
  f.kind = static_cast<Kind>(kind);
  f.id = id;
  f.header = std::move(header);
  f.payload.assign(body + kFixedBytes + hlen, len - kFixedBytes - hlen);
  item.frame = std::move(f);
  compact();
  return item;
}

const char* to_string(Op op) {
  for (const auto& o : kOps)
    if (o.op == op) return o.name;
  return "?";
}

int signal_number(const nlohmann::json& v) {
  if (v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() > 0)) {
    int64_t n = v.get<int64_t>();
    return n >= 1 && n <= 64 ? static_cast<int>(n) : 0;
  }
  if (!v.is_string()) return 0;
  std::string s = v.get<std::string>();
  if (s.rfind("SIG", 0) == 0) s.erase(0, 3);
  for (const auto& n : kSignals)
    if (s == n.name) return n.sig;
  return 0;
}

std::optional<Request> parse_request(const Frame& f, std::string* error) {
  auto bad = [&](std::string e) -> std::optional<Request> {
    *error = std::move(e);
    return std::nullopt;
  };
  if (f.kind != Kind::Request) return bad("not a request frame");
  if (f.id == 0) return bad("request id 0 (ids start at 1)");
  auto op_it = f.header.find("op");
  if (op_it == f.header.end() || !op_it->is_string()) return bad("missing field \"op\" (a string)");
  Request r;
  r.id = f.id;
  const auto& name = op_it->get_ref<const std::string&>();
  bool known = false;
  for (const auto& o : kOps)
    if (name == o.name) r.op = o.op, known = true;
  if (!known) return bad("unknown op \"" + name.substr(0, 64) + "\"");
  Fields x(f.header);
  bool ok = true;
  bool takes_payload = r.op == Op::Input || r.op == Op::Write;
  if (!takes_payload && !f.payload.empty()) return bad(std::string("op \"") + to_string(r.op) + "\" takes no payload");
  switch (r.op) {
    case Op::Start: {
      std::string user;
      ok = x.strings("argv", &r.argv, true) && x.strings("env", &r.env) && x.str("cwd", &r.cwd) &&
           x.flag("pty", &r.pty) && x.num("rows", &r.rows, 1, 1000) && x.num("cols", &r.cols, 1, 1000) &&
           x.flag("stdin", &r.stdin_open) && x.str("user", &user);
      if (ok && r.argv.empty()) return bad("field \"argv\" is empty");
      if (ok && r.argv[0].empty()) return bad("field \"argv\": the program is empty");
      for (const auto& e : r.env)
        if (ok && (e.find('=') == std::string::npos || e.front() == '='))
          return bad("field \"env\": \"" + e.substr(0, 64) + "\" is not NAME=VALUE");
      if (ok && x.has("user")) r.user = user;
      break;
    }
    case Op::Input:
      ok = x.num("pid", &r.pid, 1, kMaxPid, true);
      r.data = f.payload;
      break;
    case Op::CloseStdin:
    case Op::Attach:
      ok = x.num("pid", &r.pid, 1, kMaxPid, true);
      break;
    case Op::Signal:
      ok = x.num("pid", &r.pid, 1, kMaxPid, true) && x.sig("signal", &r.signal) && x.flag("group", &r.group);
      break;
    case Op::Resize:
      ok = x.num("pid", &r.pid, 1, kMaxPid, true) && x.num("rows", &r.rows, 1, 1000, true) &&
           x.num("cols", &r.cols, 1, 1000, true);
      break;
    case Op::List:
    case Op::Shutdown:
      break;
    case Op::Stat:
    case Op::ListDir:
    case Op::Watch:
      ok = x.str("path", &r.path, true);
      break;
    case Op::Read:
      ok = x.str("path", &r.path, true) && x.num("offset", &r.offset, 0, uint64_t{1} << 62) &&
           x.num("length", &r.length, 0, kMaxPayload);
      break;
    case Op::Write:
      ok = x.str("path", &r.path, true) && x.flag("append", &r.append) && x.flag("exclusive", &r.exclusive) &&
           x.num("mode", &r.mode, 0, 07777);
      ok = ok && x.num("offset", &r.offset, 0, uint64_t{1} << 62) && x.metadata("metadata", &r.metadata);
      // At an offset or appended: into the file as it is; else it is replaced.
      if (ok && (x.has("offset") || r.append)) r.truncate = false;
      if (ok && r.metadata && !r.truncate) return bad("write: \"metadata\" goes with a write that replaces the file");
      if (ok && r.append && x.has("offset")) return bad("write: \"append\" and \"offset\" exclude each other");
      r.data = f.payload;
      break;
    case Op::Mkdir:
      ok = x.str("path", &r.path, true) && x.flag("parents", &r.parents) && x.num("mode", &r.mode, 0, 07777);
      break;
    case Op::Remove:
      ok = x.str("path", &r.path, true) && x.flag("recursive", &r.recursive);
      break;
    case Op::Rename:
      ok = x.str("path", &r.path, true) && x.str("to", &r.to, true);
      break;
    case Op::Unwatch:
      ok = x.num("watch", &r.watch, 1, 1u << 30, true);
      break;
  }
  if (ok) ok = x.rest();
  if (!ok) return bad(std::string(to_string(r.op)) + ": " + x.error);
  if ((r.op == Op::Stat || r.op == Op::ListDir || r.op == Op::Watch || r.op == Op::Read || r.op == Op::Write ||
       r.op == Op::Mkdir || r.op == Op::Remove || r.op == Op::Rename) &&
      r.path.empty())
    return bad(std::string(to_string(r.op)) + ": field \"path\" is empty");
  if (r.op == Op::Rename && r.to.empty()) return bad("rename: field \"to\" is empty");
  return r;
}

namespace request {

namespace {
nlohmann::json op(Op o) { return {{"op", to_string(o)}}; }
nlohmann::json with_pid(Op o, int pid) {
  auto h = op(o);
  h["pid"] = pid;
  return h;
}
nlohmann::json with_path(Op o, const std::string& path) {
  auto h = op(o);
  h["path"] = path;
  return h;
}
}  // namespace

nlohmann::json start(const Start& s) {
  auto h = op(Op::Start);
  h["argv"] = s.argv;
  if (s.env) h["env"] = *s.env;
  if (s.cwd) h["cwd"] = *s.cwd;
  if (s.user) h["user"] = *s.user;
  if (s.pty) h["pty"] = true;
  if (s.rows) h["rows"] = *s.rows;
  if (s.cols) h["cols"] = *s.cols;
  h["stdin"] = s.stdin_open;
  return h;
}

nlohmann::json input(int pid) { return with_pid(Op::Input, pid); }
nlohmann::json close_stdin(int pid) { return with_pid(Op::CloseStdin, pid); }

nlohmann::json signal(int pid, int sig, bool group) {
  auto h = with_pid(Op::Signal, pid);
  h["signal"] = sig;
  if (group) h["group"] = true;
  return h;
}

nlohmann::json signal(int pid, std::string_view name, bool group) {
  auto h = with_pid(Op::Signal, pid);
  h["signal"] = std::string(name);
  if (group) h["group"] = true;
  return h;
}

nlohmann::json resize(int pid, unsigned rows, unsigned cols) {
  auto h = with_pid(Op::Resize, pid);
  h["rows"] = rows;
  h["cols"] = cols;
  return h;
}

nlohmann::json list() { return op(Op::List); }
nlohmann::json attach(int pid) { return with_pid(Op::Attach, pid); }
nlohmann::json stat(const std::string& path) { return with_path(Op::Stat, path); }
nlohmann::json list_dir(const std::string& path) { return with_path(Op::ListDir, path); }

nlohmann::json read(const std::string& path, uint64_t offset, std::optional<uint64_t> length) {
  auto h = with_path(Op::Read, path);
  h["offset"] = offset;
  if (length) h["length"] = *length;
  return h;
}

nlohmann::json write(const std::string& path, const Write& w) {
  auto h = with_path(Op::Write, path);
  if (w.append) h["append"] = true;
  if (w.exclusive) h["exclusive"] = true;
  if (w.offset) h["offset"] = *w.offset;
  if (w.mode) h["mode"] = w.mode;
  if (w.metadata) h["metadata"] = *w.metadata;
  return h;
}

nlohmann::json mkdir(const std::string& path, bool parents, uint32_t mode) {
  auto h = with_path(Op::Mkdir, path);
  h["parents"] = parents;
  if (mode) h["mode"] = mode;
  return h;
}

nlohmann::json remove(const std::string& path, bool recursive) {
  auto h = with_path(Op::Remove, path);
  h["recursive"] = recursive;
  return h;
}

nlohmann::json rename(const std::string& path, const std::string& to) {
  auto h = with_path(Op::Rename, path);
  h["to"] = to;
  return h;
}

nlohmann::json watch(const std::string& path) { return with_path(Op::Watch, path); }

nlohmann::json unwatch(int watch) {
  auto h = op(Op::Unwatch);
  h["watch"] = watch;
  return h;
}

nlohmann::json shutdown() { return op(Op::Shutdown); }

nlohmann::json audit_tags(const std::map<std::string, std::string>& tags) {
  return {{"op", kAuditTags}, {"tags", tags}};
}

nlohmann::json set_network(const std::vector<std::string>& allow, const std::vector<std::string>& deny) {
  return {{"op", kSetNetwork}, {"allow", allow}, {"deny", deny}};
}

}  // namespace request

Frame reply_ok(uint32_t id, nlohmann::json header, std::string payload) {
  header["ok"] = true;
  return Frame{Kind::Reply, id, std::move(header), std::move(payload)};
}

Frame reply_error(uint32_t id, int err, const std::string& message) {
  return Frame{Kind::Reply, id,
               {{"ok", false}, {"errno", err}, {"error", errno_name(err)}, {"message", message.substr(0, 4096)}},
               {}};
}

Frame event(nlohmann::json header, std::string payload) {
  return Frame{Kind::Event, 0, std::move(header), std::move(payload)};
}

std::string errno_name(int err) {
  struct N {
    int e;
    const char* n;
  };
  static constexpr N kNames[] = {
      {EPERM, "EPERM"},   {ENOENT, "ENOENT"},   {ESRCH, "ESRCH"},   {EINTR, "EINTR"},     {EIO, "EIO"},
      {E2BIG, "E2BIG"},   {EBADF, "EBADF"},     {EAGAIN, "EAGAIN"}, {ENOMEM, "ENOMEM"},   {EACCES, "EACCES"},
      {EBUSY, "EBUSY"},   {EEXIST, "EEXIST"},   {EXDEV, "EXDEV"},   {ENOTDIR, "ENOTDIR"}, {EISDIR, "EISDIR"},
      {EINVAL, "EINVAL"}, {EMFILE, "EMFILE"},   {EFBIG, "EFBIG"},   {ENOSPC, "ENOSPC"},   {EROFS, "EROFS"},
      {EPIPE, "EPIPE"},   {ENAMETOOLONG, "ENAMETOOLONG"},           {ENOTEMPTY, "ENOTEMPTY"},
      {ELOOP, "ELOOP"},   {ENOSYS, "ENOSYS"},   {ENOTTY, "ENOTTY"}, {EDQUOT, "EDQUOT"},   {ENXIO, "ENXIO"},
      {ETXTBSY, "ETXTBSY"}, {EOVERFLOW, "EOVERFLOW"},
  };
  for (const auto& n : kNames)
    if (n.e == err) return n.n;
  return "E" + std::to_string(err);
}

}  // namespace exg::agent
