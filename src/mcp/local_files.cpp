// read_file, write_file, list_files, stat_file, remove_file: each one agent
// request (a write: one per MiB), done inside the sandbox as its user.
#include "mcp/local_sandboxes.hpp"
#include "mcp/tool_arguments.hpp"
#include "serve/connect_rpc.hpp"

namespace exg::mcp {

namespace {

// Writes `data` from `offset` in chunks the agent takes (1 MiB a frame).
void write_chunks(std::shared_ptr<serve::AgentConn> agent, ToolCallPtr c, std::string path, std::shared_ptr<std::string> data,
                  size_t offset, bool append, uint32_t mode) {
  size_t n = std::min(data->size() - offset, agent::kMaxPayload);
  auto h = agent::request::write(path, {.append = append || offset > 0, .mode = mode});
  agent->call(h, data->substr(offset, n), [agent, c, path, data, offset, n, append, mode](const agent::Frame& r) {
    if (!r.header.value("ok", false)) return c->reply(ToolOutcome::error(agent_failure("write_file " + path, r)));
    if (offset + n < data->size()) return write_chunks(agent, c, path, data, offset + n, append, mode);
    c->reply(ToolOutcome::ok({{"path", path}, {"bytes", data->size()}}));
  });
}

}  // namespace

void LocalSandboxes::read_file(ToolCallPtr c, std::shared_ptr<Held> h) {
  std::string path = c->args["path"].get<std::string>();
  auto req = agent::request::read(path, c->args.value("offset", uint64_t{0}),
                                  c->args.value("length", static_cast<uint64_t>(kMaxReadBytes)));
  std::string want = c->args.value("encoding", "utf8");
  h->sb->agent->call(req, {}, [c, path, want](const agent::Frame& r) {
    if (!r.header.value("ok", false)) return c->reply(ToolOutcome::error(agent_failure("read_file " + path, r)));
    bool b64 = want == "base64" || !is_utf8(r.payload);
    nlohmann::json out = {{"path", path}, {"content", b64 ? serve::rpc::base64_encode(r.payload) : r.payload},
                          {"encoding", b64 ? "base64" : "utf8"}, {"size", r.header.value("size", uint64_t{0})},
                          {"offset", r.header.value("offset", uint64_t{0})}, {"bytes", r.payload.size()},
                          {"eof", r.header.value("eof", true)}};
    c->reply(ToolOutcome::ok(out));
  });
}

void LocalSandboxes::write_file(ToolCallPtr c, std::shared_ptr<Held> h) {
  std::string path = c->args["path"].get<std::string>();
  auto data = std::make_shared<std::string>(content_bytes(c->args));
  bool append = c->args.value("append", false);
  uint32_t mode = c->args.contains("mode") ? octal_mode(c->args["mode"].get<std::string>()) : 0;
  auto agent = h->sb->agent;
  std::string parent = parent_path(path);
  if (!c->args.value("make_parents", false) || parent.empty() || parent == "/") return write_chunks(agent, c, path, data, 0, append, mode);
  agent->call(agent::request::mkdir(parent, /*parents=*/true), {}, [agent, c, path, data, append, mode, parent](const agent::Frame& r) {
    if (!r.header.value("ok", false) && serve::reply_errno(r) != "EEXIST")
      return c->reply(ToolOutcome::error(agent_failure("write_file: make_parents " + parent, r)));
    write_chunks(agent, c, path, data, 0, append, mode);
  });
}

void LocalSandboxes::list_files(ToolCallPtr c, std::shared_ptr<Held> h) {
  std::string path = c->args.value("path", ".");
  h->sb->agent->call(agent::request::list_dir(path), {}, [c, path](const agent::Frame& r) {
    if (!r.header.value("ok", false)) return c->reply(ToolOutcome::error(agent_failure("list_files " + path, r)));
    nlohmann::json entries = nlohmann::json::array();
    for (auto& e : r.header.value("entries", nlohmann::json::array()))
      entries.push_back({{"name", e.value("name", "")}, {"type", e.value("type", "")}, {"size", e.value("size", uint64_t{0})},
                         {"mode", mode_text(e.value("mode", 0u))}});
    c->reply(ToolOutcome::ok({{"path", path}, {"entries", entries}, {"truncated", r.header.value("truncated", false)}}));
  });
}

void LocalSandboxes::stat_file(ToolCallPtr c, std::shared_ptr<Held> h) {
  std::string path = c->args["path"].get<std::string>();
  h->sb->agent->call(agent::request::stat(path), {}, [c, path](const agent::Frame& r) {
    if (!r.header.value("ok", false)) return c->reply(ToolOutcome::error(agent_failure("stat_file " + path, r)));
    nlohmann::json out = {{"path", path}, {"type", r.header.value("type", "")}, {"size", r.header.value("size", uint64_t{0})},
                          {"mode", mode_text(r.header.value("mode", 0u))}, {"uid", r.header.value("uid", 0u)},
                          {"gid", r.header.value("gid", 0u)}, {"mtime", r.header.value("mtime", int64_t{0})}};
    if (r.header.contains("target")) out["target"] = r.header["target"];
    c->reply(ToolOutcome::ok(out));
  });
}

void LocalSandboxes::remove_file(ToolCallPtr c, std::shared_ptr<Held> h) {
  std::string path = c->args["path"].get<std::string>();
  h->sb->agent->call(agent::request::remove(path, c->args.value("recursive", false)), {},
                     [c, path](const agent::Frame& r) {
                       if (!r.header.value("ok", false)) return c->reply(ToolOutcome::error(agent_failure("remove_file " + path, r)));
                       c->reply(ToolOutcome::ok({{"path", path}, {"removed", true}}));
                     });
}

}  // namespace exg::mcp
