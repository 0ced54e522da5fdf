// read_file, write_file, list_files, stat_file, remove_file over serve's envd:
// /files to download and upload, filesystem.Filesystem Stat, ListDir and
// Remove; all inside the sandbox, as its user. What envd lacks is made of
// what it has, with the same results as standalone: the parent checked when
// make_parents is not asked, an append as download + upload, a new file's mode
// by chmod inside the sandbox, a directory's emptiness checked before a
// removal that is not recursive.
#include <ctime>

#include "mcp/remote_sandboxes.hpp"
#include "mcp/tool_arguments.hpp"
#include "serve/connect_rpc.hpp"

namespace exg::mcp {

namespace {

namespace http = boost::beast::http;
using Failure = std::optional<std::string>;

std::string type_of(const nlohmann::json& entry) {
  std::string t = entry.value("type", "");
  if (t == "FILE_TYPE_FILE") return "file";
  if (t == "FILE_TYPE_DIRECTORY") return "dir";
  if (t == "FILE_TYPE_SYMLINK") return "symlink";
  return "other";  // envd names no other kind (fifo, socket, device)
}

// "2026-01-02T03:04:05.123Z" -> seconds since the epoch (0 when unreadable).
int64_t epoch_of(const std::string& rfc3339) {
  std::tm tm{};
  const char* end = ::strptime(rfc3339.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  return end ? static_cast<int64_t>(::timegm(&tm)) : 0;
}

// envd's owner name -> the id it stands for, when it says ("user" is the sandbox's uid, which envd does not give).
std::optional<unsigned> id_of(const std::string& name) {
  if (name == "root") return 0u;
  if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos && name.size() < 10) return static_cast<unsigned>(std::stoul(name));
  return std::nullopt;
}

}  // namespace

void RemoteSandboxes::read_file(ToolCallPtr c, std::shared_ptr<Held> h) {
  std::string path = c->args["path"].get<std::string>();
  uint64_t offset = c->args.value("offset", uint64_t{0});
  uint64_t length = c->args.value("length", static_cast<uint64_t>(kMaxReadBytes));
  std::string want = c->args.value("encoding", "utf8");
  // envd downloads whole files (up to the server's limit): the range is cut here.
  envd(h, envd_request(*h, http::verb::get, "/files?path=" + query_escape(path)),
       [c, path, offset, length, want](const HttpAnswer& a, const Failure& failure) {
         if (failure) return c->reply(ToolOutcome::error("read_file " + path + ": " + *failure));
         uint64_t size = a.body.size(), from = std::min(offset, size);
         std::string bytes = a.body.substr(from, length);
         bool b64 = want == "base64" || !is_utf8(bytes);
         c->reply(ToolOutcome::ok({{"path", path}, {"content", b64 ? serve::rpc::base64_encode(bytes) : bytes},
                                   {"encoding", b64 ? "base64" : "utf8"}, {"size", size}, {"offset", offset},
                                   {"bytes", bytes.size()}, {"eof", from + bytes.size() >= size}}));
       });
}

void RemoteSandboxes::write_file(ToolCallPtr c, std::shared_ptr<Held> h) {
  std::string path = c->args["path"].get<std::string>();
  auto data = std::make_shared<std::string>(content_bytes(c->args));
  bool append = c->args.value("append", false);
  std::string parent = parent_path(path);
  // Whether the file is there decides an append's start and whether mode applies (a new file's).
  auto after_parent = [this, c, h, path, data, append] {
    rpc(h, "filesystem.Filesystem/Stat", {{"path", path}}, [this, c, h, path, data, append](const nlohmann::json&, const Failure& missing) {
      bool existed = !missing;
      if (!append || !existed) return upload(c, h, data, existed);
      envd(h, envd_request(*h, http::verb::get, "/files?path=" + query_escape(path)),
           [this, c, h, path, data](const HttpAnswer& a, const Failure& failure) {
             if (failure) return c->reply(ToolOutcome::error("write_file " + path + ": append: reading it: " + *failure));
             if (a.body.size() + data->size() > kMaxWriteBytes * 4)
               return c->reply(ToolOutcome::error("write_file " + path + ": append: the file would pass " +
                                                  std::to_string(kMaxWriteBytes * 4 >> 20) + " MiB, more than client mode appends to"));
             upload(c, h, std::make_shared<std::string>(a.body + *data), true);
           });
    });
  };
  // The server makes parents always; standalone makes them only when asked.
  if (c->args.value("make_parents", false) || parent.empty() || parent == "/") return after_parent();
  rpc(h, "filesystem.Filesystem/Stat", {{"path", parent}}, [c, path, parent, after_parent](const nlohmann::json& r, const Failure& failure) {
    if (failure) return c->reply(ToolOutcome::error("write_file " + path + ": its directory " + parent + ": " + *failure + " (make_parents: true creates it)"));
    if (type_of(r.value("entry", nlohmann::json::object())) != "dir")
      return c->reply(ToolOutcome::error("write_file " + path + ": " + parent + " is not a directory (ENOTDIR)"));
    after_parent();
  });
}

void RemoteSandboxes::upload(ToolCallPtr c, std::shared_ptr<Held> h, std::shared_ptr<std::string> data, bool existed) {
  std::string path = c->args["path"].get<std::string>();
  uint64_t written = content_bytes(c->args).size();
  HttpRequest r = envd_request(*h, http::verb::post, "/files?path=" + query_escape(path));
  r.content_type = "application/octet-stream";
  r.body = std::move(*data);
  envd(h, std::move(r), [this, c, h, path, written, existed](const HttpAnswer&, const Failure& failure) {
    if (failure) return c->reply(ToolOutcome::error("write_file " + path + ": " + *failure));
    nlohmann::json done = {{"path", path}, {"bytes", written}};
    if (!c->args.contains("mode") || existed) return c->reply(ToolOutcome::ok(done));
    // envd's upload takes no mode: chmod inside the sandbox, as its user.
    std::string mode = c->args["mode"].get<std::string>();
    auto status = std::make_shared<int>(-1);
    start_process(h, {{"argv", {"chmod", mode, path}}}, 30.0,
                  [status](const nlohmann::json& ev) {
                    if (auto e = ev.find("end"); e != ev.end()) *status = e->value("exited", false) ? e->value("exitCode", -1) : -1;
                  },
                  [c, path, mode, done, status](const HttpAnswer&, const Failure& failure) {
                    if (*status == 0) return c->reply(ToolOutcome::ok(done));
                    c->reply(ToolOutcome::error("write_file " + path + ": written, but chmod " + mode + " inside the sandbox failed" +
                                                (failure ? ": " + *failure : " (exit status " + std::to_string(*status) + ")")));
                  });
  });
}

void RemoteSandboxes::list_files(ToolCallPtr c, std::shared_ptr<Held> h) {
  std::string path = c->args.value("path", ".");
  rpc(h, "filesystem.Filesystem/ListDir", {{"path", path}, {"depth", 1}}, [c, path](const nlohmann::json& r, const Failure& failure) {
    if (failure) return c->reply(ToolOutcome::error("list_files " + path + ": " + *failure));
    nlohmann::json entries = nlohmann::json::array();
    for (auto& e : r.value("entries", nlohmann::json::array()))
      entries.push_back({{"name", e.value("name", "")}, {"type", type_of(e)}, {"size", e.value("size", uint64_t{0})},
                         {"mode", mode_text(e.value("mode", 0u))}});
    std::sort(entries.begin(), entries.end(), [](const nlohmann::json& a, const nlohmann::json& b) { return a["name"] < b["name"]; });
    // serve lists at most 10000 entries.
    c->reply(ToolOutcome::ok({{"path", path}, {"entries", entries}, {"truncated", entries.size() >= 10000}}));
  });
}

void RemoteSandboxes::stat_file(ToolCallPtr c, std::shared_ptr<Held> h) {
  std::string path = c->args["path"].get<std::string>();
  rpc(h, "filesystem.Filesystem/Stat", {{"path", path}}, [c, path](const nlohmann::json& r, const Failure& failure) {
    if (failure) return c->reply(ToolOutcome::error("stat_file " + path + ": " + *failure));
    nlohmann::json e = r.value("entry", nlohmann::json::object());
    nlohmann::json out = {{"path", path}, {"type", type_of(e)}, {"size", e.value("size", uint64_t{0})},
                          {"mode", mode_text(e.value("mode", 0u))}, {"mtime", epoch_of(e.value("modifiedTime", ""))}};
    if (auto uid = id_of(e.value("owner", ""))) out["uid"] = *uid;
    if (auto gid = id_of(e.value("group", ""))) out["gid"] = *gid;
    if (e.contains("symlinkTarget")) out["target"] = e["symlinkTarget"];
    c->reply(ToolOutcome::ok(out));
  });
}

void RemoteSandboxes::remove_file(ToolCallPtr c, std::shared_ptr<Held> h) {
  std::string path = c->args["path"].get<std::string>();
  auto remove = [this, c, h, path] {
    rpc(h, "filesystem.Filesystem/Remove", {{"path", path}}, [c, path](const nlohmann::json&, const Failure& failure) {
      if (failure) return c->reply(ToolOutcome::error("remove_file " + path + ": " + *failure));
      c->reply(ToolOutcome::ok({{"path", path}, {"removed", true}}));
    });
  };
  if (c->args.value("recursive", false)) return remove();
  // envd's Remove is always recursive: a directory must be found empty first, as standalone's rmdir wants it.
  rpc(h, "filesystem.Filesystem/Stat", {{"path", path}}, [this, c, h, path, remove](const nlohmann::json& st, const Failure& failure) {
    if (failure) return c->reply(ToolOutcome::error("remove_file " + path + ": " + *failure));
    if (type_of(st.value("entry", nlohmann::json::object())) != "dir") return remove();
    rpc(h, "filesystem.Filesystem/ListDir", {{"path", path}, {"depth", 1}}, [c, path, remove](const nlohmann::json& r, const Failure& failure) {
      if (failure) return c->reply(ToolOutcome::error("remove_file " + path + ": " + *failure));
      if (!r.value("entries", nlohmann::json::array()).empty())
        return c->reply(ToolOutcome::error("remove_file " + path + ": ENOTEMPTY: the directory is not empty (recursive: true removes it "
                                           "and everything in it)"));
      remove();
    });
  });
}

}  // namespace exg::mcp
