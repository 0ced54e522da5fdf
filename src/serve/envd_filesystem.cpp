// envd's filesystem.Filesystem service (spec/envd/filesystem/filesystem.proto)
// over the sandbox's agent. Every path is resolved by the agent inside the
// sandbox, as its user: `..`, absolute paths and planted symlinks reach only
// what a command of that sandbox could reach.
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <map>

#include "serve/service.hpp"

namespace exg::serve {

namespace {

using rpc::Code;
using rpc::RpcError;

constexpr size_t kMaxListed = 10000;
constexpr size_t kMaxWatcherEvents = 10000;
constexpr size_t kMaxWatchers = 32;

std::string base_name(const std::string& p) {
  std::string s = p;
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  auto sl = s.rfind('/');
  return sl == std::string::npos ? s : s.substr(sl + 1);
}

std::string parent_of(const std::string& p) {
  auto sl = p.rfind('/');
  if (sl == std::string::npos || sl == 0) return "/";
  return p.substr(0, sl);
}

std::string permissions(const std::string& type, uint32_t mode) {
  std::string s = type == "dir" ? "d" : type == "symlink" ? "L" : "-";
  const char* rwx = "rwxrwxrwx";
  for (int i = 0; i < 9; ++i) s += (mode & (0400u >> i)) ? rwx[i] : '-';
  return s;
}

const char* file_type(const std::string& t) {
  if (t == "file") return "FILE_TYPE_FILE";
  if (t == "dir") return "FILE_TYPE_DIRECTORY";
  if (t == "symlink") return "FILE_TYPE_SYMLINK";
  return "FILE_TYPE_UNSPECIFIED";
}

std::string owner_name(const Sandbox& sb, unsigned id, bool group) {
  if (id == (group ? sb.gid : sb.uid)) return "user";
  if (id == 0) return "root";
  return std::to_string(id);
}

// An agent stat reply -> EntryInfo.
nlohmann::json entry_info(const Sandbox& sb, const std::string& path, const nlohmann::json& st) {
  std::string type = st.value("type", "");
  uint32_t mode = st.value("mode", 0u);
  nlohmann::json e = {
      {"name", base_name(path)},
      {"type", file_type(type)},
      {"path", path},
      {"size", st.value("size", 0ull)},
      {"mode", mode & 07777},
      {"permissions", permissions(type, mode)},
      {"owner", owner_name(sb, st.value("uid", 0u), false)},
      {"group", owner_name(sb, st.value("gid", 0u), true)},
      {"modifiedTime", rpc::rfc3339(st.value("mtime", 0ll))},
  };
  // envd answers the link resolved (filepath.EvalSymlinks): absolute, every link followed.
  if (type == "symlink") e["symlinkTarget"] = st.value("resolved", st.value("target", ""));
  // envd 0.6.2's file metadata: the file's user.e2b.* attributes (the agent reads them).
  if (auto md = st.find("metadata"); md != st.end() && md->is_object() && !md->empty()) e["metadata"] = *md;
  return e;
}

RpcError agent_error(const agent::Frame& r, const std::string& path) {
  std::string e = reply_errno(r);
  Code c = rpc::code_of_errno(e);
  if (c == Code::NotFound) return {c, "path " + path + " not found"};
  return {c, path + ": " + reply_error_text(r)};
}

std::optional<std::string> path_field(const nlohmann::json& msg, const char* name, RpcError* err) {
  const nlohmann::json* p = rpc::field(msg, name);
  if (!p || !p->is_string() || p->get<std::string>().empty()) {
    *err = {Code::InvalidArgument, std::string(name) + ": expected a path"};
    return std::nullopt;
  }
  if (p->get<std::string>().find('\0') != std::string::npos || p->get<std::string>().size() > 4096) {
    *err = {Code::InvalidArgument, std::string(name) + ": not a usable path"};
    return std::nullopt;
  }
  return p->get<std::string>();
}

// inotify names (the agent's) -> E2B's event type.
const char* event_type(const nlohmann::json& mask) {
  auto has = [&](const char* m) { return std::find(mask.begin(), mask.end(), m) != mask.end(); };
  if (has("create") || has("moved_to")) return "EVENT_TYPE_CREATE";
  if (has("delete")) return "EVENT_TYPE_REMOVE";
  if (has("moved_from")) return "EVENT_TYPE_RENAME";
  if (has("modify") || has("close_write")) return "EVENT_TYPE_WRITE";
  if (has("attrib")) return "EVENT_TYPE_CHMOD";
  return nullptr;
}

// Lists a directory, then every entry's stat (pipelined), to `depth` levels.
struct Lister : std::enable_shared_from_this<Lister> {
  std::shared_ptr<Sandbox> sb;
  std::function<void(std::optional<RpcError>, nlohmann::json)> done;
  nlohmann::json entries = nlohmann::json::array();
  size_t outstanding = 0;
  std::optional<RpcError> error;
  bool finished = false;

  void list(const std::string& dir, unsigned depth, bool top) {
    ++outstanding;
    auto self = shared_from_this();
    sb->agent->call(agent::request::list_dir(dir), {}, [self, dir, depth, top](const agent::Frame& r) {
      if (!r.header.value("ok", false)) {
        if (top) self->error = agent_error(r, dir);
      } else {
        for (auto& e : r.header.value("entries", nlohmann::json::array())) {
          if (self->entries.size() + self->outstanding >= kMaxListed) break;
          std::string path = (dir == "/" ? "" : dir) + "/" + e.value("name", "");
          self->stat(path, depth > 1 && e.value("type", "") == "dir" ? depth - 1 : 0);
        }
      }
      self->settle();
    });
  }

  void stat(const std::string& path, unsigned deeper) {
    ++outstanding;
    auto self = shared_from_this();
    sb->agent->call(agent::request::stat(path), {}, [self, path, deeper](const agent::Frame& r) {
      // An entry gone between the listing and its stat is left out.
      if (r.header.value("ok", false)) {
        self->entries.push_back(entry_info(*self->sb, path, r.header));
        if (deeper) self->list(path, deeper, false);
      }
      self->settle();
    });
  }

  void settle() {
    if (--outstanding > 0 || finished) return;
    finished = true;
    done(error, std::move(entries));
  }
};

// A WatchDir stream: the agent's watch events as FilesystemEvents. A
// recursive one watches every directory below too (one agent watch each, at
// most kMaxWatches a sandbox: a larger tree is resource_exhausted), and each
// directory created later; an event's name is relative to the watched root
// ("sub/file.txt"), as envd's.
struct WatchStream : std::enable_shared_from_this<WatchStream> {
  std::shared_ptr<Sandbox> sb;
  rpc::ServerStream stream;
  std::string root;
  bool recursive = false;
  // envd 0.6.3's includeEntry: each event carries the path's EntryInfo when it
  // still exists (a stat through the agent; every event of the stream then
  // waits for its own, so they keep their order).
  bool include_entry = false;
  std::map<int, std::pair<std::string, uint64_t>> watches;  // agent watch -> (prefix, subscription)
  boost::asio::steady_timer keepalive;
  bool done = false;
  WatchStream(boost::asio::io_context& io, std::shared_ptr<Sandbox> s, ExchangePtr ex)
      : sb(std::move(s)), stream(std::move(ex)), keepalive(io) {}

  void run(int watch) {
    auto self = shared_from_this();
    add(watch, "");
    stream.exchange().on_close = [self] { self->finish(std::nullopt, false); };
    stream.send({{"start", nlohmann::json::object()}});
    if (recursive) descend("");
    tick();
  }
  void add(int watch, const std::string& prefix) {
    std::weak_ptr<WatchStream> weak = shared_from_this();
    uint64_t token = sb->agent->subscribe_watch(watch, [weak, watch](const agent::Frame& f) {
      if (auto self = weak.lock()) self->on_event(watch, f);
    });
    watches[watch] = {prefix, token};
  }
  // Watches every directory below root/prefix (prefix "" or ending in '/').
  void descend(const std::string& prefix) {
    auto self = shared_from_this();
    std::string dir = root + (prefix.empty() ? "" : "/" + prefix.substr(0, prefix.size() - 1));
    sb->agent->call(agent::request::list_dir(dir), {}, [self, prefix](const agent::Frame& r) {
      if (self->done || !r.header.value("ok", false)) return;
      for (auto& e : r.header.value("entries", nlohmann::json::array()))
        if (e.value("type", "") == "dir") self->watch_dir(prefix + e.value("name", "") + "/");
    });
  }
  void watch_dir(const std::string& prefix) {
    auto self = shared_from_this();
    std::string dir = root + "/" + prefix.substr(0, prefix.size() - 1);
    sb->agent->call(agent::request::watch(dir), {}, [self, prefix](const agent::Frame& r) {
      if (self->done) return;
      if (!r.header.value("ok", false)) {
        if (reply_errno(r) == "ENOSPC")
          self->finish(RpcError{Code::ResourceExhausted, "recursive watch: more directories than the sandbox's " +
                                                             std::to_string(agent::kMaxWatches) + " watches"}, true);
        return;  // gone meanwhile: nothing to watch
      }
      int w = r.header.value("watch", 0);
      if (self->watches.count(w)) return;
      self->add(w, prefix);
      self->descend(prefix);
    });
  }
  void tick() {
    keepalive.expires_after(std::chrono::seconds(20));
    keepalive.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec || self->done) return;
      self->stream.send({{"keepalive", nlohmann::json::object()}});
      self->tick();
    });
  }
  void on_event(int watch, const agent::Frame& f) {
    if (done) return;
    if (f.header.value("event", "") == "closed") return finish(RpcError{Code::Unavailable, kSandboxEnded}, true);
    auto it = watches.find(watch);
    if (it == watches.end()) return;
    const std::string prefix = it->second.first;
    auto mask = f.header.value("mask", nlohmann::json::array());
    auto has = [&](const char* m) { return std::find(mask.begin(), mask.end(), m) != mask.end(); };
    if (has("ignored") || has("delete_self")) {
      if (prefix.empty()) return finish(RpcError{Code::NotFound, "the watched directory is gone"}, true);
      sb->agent->unsubscribe(it->second.second);
      watches.erase(it);
      return;
    }
    const char* type = event_type(mask);
    if (!type) return;
    const std::string name = prefix + f.header.value("name", "");
    if (recursive && has("isdir") && (has("create") || has("moved_to"))) watch_dir(name + "/");
    nlohmann::json event = {{"name", name}, {"type", type}};
    if (!include_entry) return stream.send({{"filesystem", std::move(event)}});
    const std::string path = root + "/" + name;
    sb->agent->call(agent::request::stat(path), {}, [self = shared_from_this(), path, event](const agent::Frame& r) mutable {
      if (self->done) return;
      if (r.header.value("ok", false)) event["entry"] = entry_info(*self->sb, path, r.header);
      self->stream.send({{"filesystem", std::move(event)}});
    });
  }
  void finish(const std::optional<RpcError>& err, bool send_end) {
    if (done) return;
    done = true;
    keepalive.cancel();
    if (sb->agent)
      for (auto& [w, pt] : watches) {
        sb->agent->unsubscribe(pt.second);
        sb->agent->call(agent::request::unwatch(w), {}, [](const agent::Frame&) {});
      }
    watches.clear();
    stream.exchange().on_close = nullptr;
    if (send_end) stream.end(err);
  }
};

}  // namespace

// The method is the path's last segment (/filesystem.Filesystem/Stat).
void Service::filesystem_call(Call& c) { filesystem_rpc(c.req, c.ex, c.sb, c.path.substr(c.path.rfind('/') + 1), c.route.label); }

void Service::filesystem_rpc(Request& req, ExchangePtr ex, const std::shared_ptr<Sandbox>& sb, const std::string& method,
                             const std::string& route) {
  bool streaming = method == "WatchDir";
  auto fail_with = [&](const RpcError& e) { rpc_fail(req, ex, route, streaming, e); };
  auto msg = rpc_message(req, ex, route, method, streaming);
  if (!msg) return;
  RpcError err{};  // for the field readers below
  if (auto ue = user_error(req, "", *sb)) return fail_with({Code::PermissionDenied, *ue});
  auto ok = [this, ex, route](nlohmann::json m) mutable { reply(ex, route, rpc::unary_ok(m)); };
  auto bad = [this, ex, route](const RpcError& e) mutable { reply(ex, route, rpc::unary_error(e)); };
  auto stat_then = [sb, ok, bad](const std::string& path) mutable {
    sb->agent->call(agent::request::stat(path), {}, [sb, path, ok, bad](const agent::Frame& r) mutable {
      if (!r.header.value("ok", false)) return bad(agent_error(r, path));
      ok({{"entry", entry_info(*sb, path, r.header)}});
    });
  };

  if (method == "Stat") {
    auto p = path_field(*msg, "path", &err);
    if (!p) return fail_with(err);
    return stat_then(absolute_path(*sb, *p));
  }
  if (method == "MakeDir") {
    auto p = path_field(*msg, "path", &err);
    if (!p) return fail_with(err);
    std::string path = absolute_path(*sb, *p);
    sb->agent->call(agent::request::stat(path), {}, [sb, path, ok, bad, stat_then](const agent::Frame& r) mutable {
      if (r.header.value("ok", false)) return bad({Code::AlreadyExists, "path " + path + " already exists"});
      sb->agent->call(agent::request::mkdir(path, /*parents=*/true), {}, [path, bad, stat_then](const agent::Frame& m) mutable {
        if (!m.header.value("ok", false)) return bad(agent_error(m, path));
        stat_then(path);
      });
    });
    return;
  }
  if (method == "Move") {
    auto from = path_field(*msg, "source", &err);
    if (!from) return fail_with(err);
    auto to = path_field(*msg, "destination", &err);
    if (!to) return fail_with(err);
    std::string src = absolute_path(*sb, *from), dst = absolute_path(*sb, *to);
    sb->agent->call(agent::request::mkdir(parent_of(dst), /*parents=*/true), {}, [sb, src, dst, bad, stat_then](const agent::Frame&) mutable {
      sb->agent->call(agent::request::rename(src, dst), {}, [src, dst, bad, stat_then](const agent::Frame& r) mutable {
        if (!r.header.value("ok", false)) return bad(agent_error(r, src));
        stat_then(dst);
      });
    });
    return;
  }
  if (method == "Remove") {
    auto p = path_field(*msg, "path", &err);
    if (!p) return fail_with(err);
    std::string path = absolute_path(*sb, *p);
    sb->agent->call(agent::request::remove(path, /*recursive=*/true), {}, [path, ok, bad](const agent::Frame& r) mutable {
      // envd's os.RemoveAll: a path that is not there is removed already.
      if (!r.header.value("ok", false) && reply_errno(r) != "ENOENT") return bad(agent_error(r, path));
      ok(nlohmann::json::object());
    });
    return;
  }
  if (method == "ListDir") {
    auto p = path_field(*msg, "path", &err);
    if (!p) return fail_with(err);
    unsigned depth = 1;
    if (const auto* d = rpc::field(*msg, "depth")) {
      if (!d->is_number_unsigned() || d->get<uint64_t>() > 64) return fail_with({Code::InvalidArgument, "depth: expected 1..64"});
      depth = std::max(1u, d->get<unsigned>());
    }
    std::string path = absolute_path(*sb, *p);
    // A path that is not a directory is not_found/invalid_argument before any listing.
    sb->agent->call(agent::request::stat(path), {}, [sb, path, depth, ok, bad](const agent::Frame& r) mutable {
      if (!r.header.value("ok", false)) return bad(agent_error(r, path));
      if (r.header.value("type", "") != "dir") return bad({Code::InvalidArgument, "path " + path + " is not a directory"});
      auto l = std::make_shared<Lister>();
      l->sb = sb;
      l->done = [ok, bad](std::optional<RpcError> e, nlohmann::json entries) mutable {
        if (e) return bad(*e);
        // envd lists in path order (its walk is lexical); the stats answer in any.
        std::sort(entries.begin(), entries.end(),
                  [](const nlohmann::json& a, const nlohmann::json& b) { return a["path"].get_ref<const std::string&>() < b["path"].get_ref<const std::string&>(); });
        ok({{"entries", std::move(entries)}});
      };
      ++l->outstanding;  // held until the top listing is issued
      l->list(path, depth, true);
      l->settle();
    });
    return;
  }
  if (method == "WatchDir" || method == "CreateWatcher") {
    auto p = path_field(*msg, "path", &err);
    if (!p) return fail_with(err);
    const auto* rec = rpc::field(*msg, "recursive");
    const bool recursive = rec && rec->is_boolean() && rec->get<bool>();
    // allowNetworkMounts (envd 0.6.4) lifts envd's refusal to watch a network mount; nothing here refuses one.
    const auto* inc = rpc::field(*msg, "includeEntry");
    const bool include_entry = inc && inc->is_boolean() && inc->get<bool>();
    if (recursive && method == "CreateWatcher")
      return fail_with({Code::Unimplemented, "recursive watchers (CreateWatcher) are not served here: WatchDir is"});
    if (method == "CreateWatcher" && sb->watchers.size() >= kMaxWatchers)
      return fail_with({Code::ResourceExhausted, "at most " + std::to_string(kMaxWatchers) + " watchers a sandbox"});
    std::string path = absolute_path(*sb, *p);
    sb->agent->call(agent::request::watch(path), {}, [this, ex, sb, path, method, route, recursive, include_entry](const agent::Frame& r) mutable {
      if (method == "WatchDir") {
        metrics_.count_request(route, 200);
        if (!r.header.value("ok", false)) {
          rpc::ServerStream s(ex);
          s.end(agent_error(r, path));
          return;
        }
        auto ws = std::make_shared<WatchStream>(io_, sb, ex);
        ws->root = path;
        ws->recursive = recursive;
        ws->include_entry = include_entry;
        ws->run(r.header.value("watch", 0));
        return;
      }
      if (!r.header.value("ok", false)) return reply(ex, route, rpc::unary_error(agent_error(r, path)));
      std::string id = "w" + std::to_string(sb->next_watcher++);
      Watcher& w = sb->watchers[id];
      w.agent_watch = r.header.value("watch", 0);
      w.path = path;
      std::weak_ptr<Sandbox> weak = sb;
      w.token = sb->agent->subscribe_watch(w.agent_watch, [weak, id](const agent::Frame& f) {
        auto s = weak.lock();
        if (!s) return;
        auto it = s->watchers.find(id);
        if (it == s->watchers.end()) return;
        const char* type = event_type(f.header.value("mask", nlohmann::json::array()));
        if (!type) return;
        if (it->second.events.size() >= kMaxWatcherEvents) {
          it->second.overflow = true;
          return;
        }
        it->second.events.push_back({{"name", f.header.value("name", "")}, {"type", type}});
      });
      reply(ex, route, rpc::unary_ok({{"watcherId", id}}));
    });
    return;
  }
  if (method == "GetWatcherEvents" || method == "RemoveWatcher") {
    const nlohmann::json* id = rpc::field(*msg, "watcherId", "watcher_id");
    if (!id || !id->is_string()) return fail_with({Code::InvalidArgument, "watcherId: expected a string"});
    auto it = sb->watchers.find(id->get<std::string>());
    if (it == sb->watchers.end()) return fail_with({Code::NotFound, "watcher " + id->get<std::string>() + " not found"});
    if (method == "GetWatcherEvents") {
      if (it->second.overflow) {
        it->second.overflow = false;
        it->second.events.clear();
        return fail_with({Code::ResourceExhausted, "more than " + std::to_string(kMaxWatcherEvents) + " events waited: some were lost"});
      }
      nlohmann::json events = std::move(it->second.events);
      it->second.events.clear();
      if (events.is_null()) events = nlohmann::json::array();
      return reply(ex, route, rpc::unary_ok({{"events", events}}));
    }
    sb->agent->unsubscribe(it->second.token);
    sb->agent->call(agent::request::unwatch(it->second.agent_watch), {}, [](const agent::Frame&) {});
    sb->watchers.erase(it);
    return reply(ex, route, rpc::unary_ok(nlohmann::json::object()));
  }
  fail_with({Code::Unimplemented, "filesystem.Filesystem/" + method + ": no such method"});
}

}  // namespace exg::serve
