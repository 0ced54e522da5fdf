#include "mcp/tool_catalog.hpp"

#include "util/layer_kind.hpp"

namespace exg::mcp {

namespace {

using nlohmann::json;

json str(const std::string& d, size_t max = 65536) { return {{"type", "string"}, {"description", d}, {"maxLength", max}}; }
json nonempty(const std::string& d, size_t max = 65536) {
  return {{"type", "string"}, {"description", d}, {"minLength", 1}, {"maxLength", max}};
}
json integer(const std::string& d, int64_t lo, int64_t hi) { return {{"type", "integer"}, {"description", d}, {"minimum", lo}, {"maximum", hi}}; }
json number(const std::string& d, double lo, double hi) { return {{"type", "number"}, {"description", d}, {"minimum", lo}, {"maximum", hi}}; }
json boolean(const std::string& d) { return {{"type", "boolean"}, {"description", d}}; }
json strings(const std::string& d, size_t max_items = 4096) {
  return {{"type", "array"}, {"description", d}, {"items", {{"type", "string"}, {"maxLength", 65536}}}, {"maxItems", max_items}};
}
json object(json props, std::vector<std::string> required) {
  return {{"type", "object"}, {"properties", std::move(props)}, {"required", std::move(required)}, {"additionalProperties", false}};
}
json out(json props, std::vector<std::string> required) {
  return {{"type", "object"}, {"properties", std::move(props)}, {"required", std::move(required)}};
}

json sandbox_id() { return nonempty("The sandbox, as create_sandbox returned it", 64); }

// What a sandbox refused while the call ran: the agent sees why something failed.
json refusals() {
  return {{"type", "array"},
          {"description", "What the sandbox refused during this call (egress denied, syscalls refused, planted files quarantined, ...): "
                          "its audit log's lines"},
          {"items", {{"type", "object"},
                     {"properties", {{"event", {{"type", "string"}}}, {"summary", {{"type", "string"}}}}},
                     {"required", {"event", "summary"}}}}};
}

json command_props(bool run) {
  json p = {
      {"sandbox_id", sandbox_id()},
      {"command", nonempty("A shell command line, run with /bin/sh -c (give this or argv)")},
      {"argv", {{"type", "array"}, {"description", "The program and its arguments, no shell (give this or command)"},
                {"items", {{"type", "string"}, {"maxLength", 65536}}}, {"minItems", 1}, {"maxItems", 4096}}},
      {"cwd", nonempty("Working directory inside the sandbox (default: its workspace)", 4096)},
      {"env", {{"type", "object"}, {"description", "Environment variables to add, NAME: value"},
               {"additionalProperties", {{"type", "string"}, {"maxLength", 65536}}}}},
      {"stdin", str("Bytes given to the command's standard input (then closed); default: none", 1024 * 1024)},
  };
  if (run) {
    p["timeout_seconds"] = number("Kill the command after this many seconds (default 45; for longer runs also raise the client's request timeout, or use start_command)", 0.1, kMaxCommandTimeoutS);
    p["max_output_bytes"] = integer("Keep at most this many bytes of stdout and of stderr each (default 65536); the rest is counted and "
                                    "noted as truncated", 0, static_cast<int64_t>(kMaxMaxOutput));
  }
  return p;
}

json exit_props() {
  return {{"exit_code", {{"type", {"integer", "null"}}, {"description", "The exit status (128+N after signal N); null while running"}}},
          {"signal", {{"type", {"integer", "null"}}, {"description", "The signal that ended it, if one did"}}}};
}

// The layer names the schema offers: util/layer_kind.hpp's table, not a copy of it.
std::vector<std::string> layer_names() {
  std::vector<std::string> out;
  for (auto n : layer::all_names()) out.emplace_back(n);
  return out;
}

std::vector<ToolDef> build() {
  std::vector<ToolDef> t;
  t.push_back({"create_sandbox", "Create a sandbox",
               "Create an isolated ExGuardian sandbox that lives across calls and return its sandbox_id. Commands and file operations "
               "of the other tools run inside it, never on the host. Defaults: no network, the workspace writable and everything "
               "else read-only, credentials unreadable, limits on memory, processes and CPU.",
               object({{"layer", {{"type", "string"}, {"enum", layer_names()},
                                  {"description", "Isolation layer (default: the server's, usually process)"}}},
                       {"template", nonempty("A template of the server's --templates file (layer, root filesystem, policy, resources)", 64)},
                       {"policy", nonempty("An ExGuardian or sandbox-runtime policy file on the host", 4096)},
                       {"workspace", nonempty("A host directory to mount as the sandbox's writable workspace (under one of the server's "
                                              "--workspace-root directories); default: a fresh empty one, removed with the sandbox", 4096)},
                       {"allow_domains", strings("Domains the sandbox may reach through its egress proxy (example.com, *.example.com)", 256)},
                       {"memory_mb", integer("Memory limit in MiB (default 512)", 16, 1024 * 1024)},
                       {"cpus", number("CPU limit in cores (default 1)", 0.01, 1024)},
                       {"pids", integer("Process limit (default 256)", 8, 1000000)},
                       {"timeout_seconds", integer("Destroy the sandbox after this many seconds (default: the server's --sandbox-timeout)", 1, 7 * 86400)}},
                      {}),
               out({{"sandbox_id", {{"type", "string"}}},
                    {"layer", {{"type", "string"}}},
                    {"template", {{"type", "string"}}},
                    {"workspace", {{"type", "string"}, {"description", "The workspace's path inside the sandbox (its working directory)"}}},
                    {"host_workspace", {{"type", {"string", "null"}}, {"description", "The host directory mounted, if one was asked for"}}},
                    {"expires_at", {{"type", "string"}}}},
                   {"sandbox_id", "layer", "workspace", "expires_at"})});
  json run_out = out({{"exit_code", {{"type", "integer"}, {"description", "The exit status (128+N when signal N ended it)"}}},
                      {"signal", {{"type", {"integer", "null"}}}},
                      {"timed_out", {{"type", "boolean"}}},
                      {"stdout", {{"type", "string"}}},
                      {"stderr", {{"type", "string"}}},
                      {"stdout_bytes", {{"type", "integer"}, {"description", "All the bytes it wrote, kept or not"}}},
                      {"stderr_bytes", {{"type", "integer"}}},
                      {"stdout_truncated", {{"type", "boolean"}}},
                      {"stderr_truncated", {{"type", "boolean"}}},
                      {"duration_ms", {{"type", "integer"}}},
                      {"note", {{"type", "string"}}},
                      {"refusals", refusals()}},
                     {"exit_code", "timed_out", "stdout", "stderr", "stdout_truncated", "stderr_truncated", "refusals"});
  t.push_back({"run_command", "Run a command",
               "Run a command in a sandbox and wait for it: its exit status, stdout and stderr (separately, truncated with a note past "
               "max_output_bytes) and what the sandbox refused meanwhile (egress, syscalls). Killed when timeout_seconds passes.",
               object(command_props(true), {"sandbox_id"}), run_out});
  t.push_back({"start_command", "Start a background command",
               "Start a command in a sandbox without waiting (a server, a long build); read its output later with read_output.",
               object(command_props(false), {"sandbox_id"}),
               out({{"pid", {{"type", "integer"}}}}, {"pid"})});
  json ro = exit_props();
  ro["pid"] = {{"type", "integer"}};
  ro["running"] = {{"type", "boolean"}};
  ro["stdout"] = {{"type", "string"}};
  ro["stderr"] = {{"type", "string"}};
  ro["dropped_bytes"] = {{"type", "integer"}, {"description", "Output lost because more than 1 MiB per stream waited unread"}};
  ro["refusals"] = refusals();
  t.push_back({"read_output", "Read a background command's output",
               "The output a start_command process wrote since the last read_output, whether it still runs, and its exit status. "
               "wait_seconds waits for it to end first (returning earlier when it does).",
               object({{"sandbox_id", sandbox_id()},
                       {"pid", integer("The pid start_command returned", 1, 4194304)},
                       {"wait_seconds", number("Wait up to this long for the process to exit (default 0)", 0, 600)},
                       {"kill", boolean("Kill the process first (SIGKILL)")}},
                      {"sandbox_id", "pid"}),
               out(ro, {"pid", "running", "stdout", "stderr", "exit_code", "refusals"})});
  json encoding = {{"type", "string"}, {"enum", {"utf8", "base64"}}, {"description", "How content is encoded (default utf8)"}};
  t.push_back({"read_file", "Read a file",
               "Read a file inside the sandbox (as the sandbox's user: what its commands could read). Content that is not UTF-8 comes "
               "back base64-encoded.",
               object({{"sandbox_id", sandbox_id()},
                       {"path", nonempty("Path inside the sandbox (relative: from its workspace)", 4096)},
                       {"offset", integer("Byte offset to start at (default 0)", 0, INT64_MAX)},
                       {"length", integer("At most this many bytes (default and most: 1048576)", 0, static_cast<int64_t>(kMaxReadBytes))},
                       {"encoding", encoding}},
                      {"sandbox_id", "path"}),
               out({{"path", {{"type", "string"}}}, {"content", {{"type", "string"}}}, {"encoding", {{"type", "string"}}},
                    {"size", {{"type", "integer"}}}, {"offset", {{"type", "integer"}}}, {"bytes", {{"type", "integer"}}},
                    {"eof", {{"type", "boolean"}}}},
                   {"path", "content", "encoding", "size", "bytes", "eof"})});
  t.push_back({"write_file", "Write a file",
               "Write (replace, or append to) a file inside the sandbox, as its user: only where the sandbox may write.",
               object({{"sandbox_id", sandbox_id()},
                       {"path", nonempty("Path inside the sandbox (relative: from its workspace)", 4096)},
                       {"content", str("The file's new content", kMaxWriteBytes * 2)},
                       {"encoding", encoding},
                       {"append", boolean("Append instead of replacing")},
                       {"mode", {{"type", "string"}, {"description", "Permissions of a new file, octal (\"0644\", \"0755\")"}, {"maxLength", 5}}},
                       {"make_parents", boolean("Create missing parent directories")}},
                      {"sandbox_id", "path", "content"}),
               out({{"path", {{"type", "string"}}}, {"bytes", {{"type", "integer"}}}}, {"path", "bytes"})});
  json entry = {{"type", "object"},
                {"properties", {{"name", {{"type", "string"}}}, {"type", {{"type", "string"}}}, {"size", {{"type", "integer"}}},
                                {"mode", {{"type", "string"}}}}}};
  t.push_back({"list_files", "List a directory",
               "The entries of a directory inside the sandbox: name, type (file, dir, symlink, ...), size and mode.",
               object({{"sandbox_id", sandbox_id()}, {"path", nonempty("Directory inside the sandbox (default: its workspace)", 4096)}},
                      {"sandbox_id"}),
               out({{"path", {{"type", "string"}}}, {"entries", {{"type", "array"}, {"items", entry}}}, {"truncated", {{"type", "boolean"}}}},
                   {"path", "entries", "truncated"})});
  t.push_back({"stat_file", "Describe a file",
               "Type, size, mode, owner and modification time of a path inside the sandbox (a final symlink is not followed).",
               object({{"sandbox_id", sandbox_id()}, {"path", nonempty("Path inside the sandbox", 4096)}}, {"sandbox_id", "path"}),
               out({{"path", {{"type", "string"}}}, {"type", {{"type", "string"}}}, {"size", {{"type", "integer"}}},
                    {"mode", {{"type", "string"}}}, {"uid", {{"type", "integer"}}}, {"gid", {{"type", "integer"}}},
                    {"mtime", {{"type", "integer"}}}, {"target", {{"type", "string"}}}},
                   {"path", "type", "size", "mode"})});
  t.push_back({"remove_file", "Remove a file",
               "Remove a file, or a directory (empty, unless recursive) inside the sandbox.",
               object({{"sandbox_id", sandbox_id()}, {"path", nonempty("Path inside the sandbox", 4096)},
                       {"recursive", boolean("Remove a directory and everything in it (a symlink is removed, never followed)")}},
                      {"sandbox_id", "path"}),
               out({{"path", {{"type", "string"}}}, {"removed", {{"type", "boolean"}}}}, {"path", "removed"})});
  json sb = {{"type", "object"},
             {"properties", {{"sandbox_id", {{"type", "string"}}}, {"layer", {{"type", "string"}}}, {"template", {{"type", "string"}}},
                             {"workspace", {{"type", "string"}}}, {"created_at", {{"type", "string"}}}, {"expires_at", {{"type", "string"}}},
                             {"background_commands", {{"type", "array"}, {"items", {{"type", "integer"}}}}}}}};
  t.push_back({"list_sandboxes", "List sandboxes", "The sandboxes this server holds.", object(json::object(), {}),
               out({{"sandboxes", {{"type", "array"}, {"items", sb}}}}, {"sandboxes"})});
  t.push_back({"destroy_sandbox", "Destroy a sandbox",
               "End a sandbox: every process in it is killed and everything it held on the host is removed (a host workspace stays, "
               "with files planted in protected places quarantined). Reports what was refused at the end.",
               object({{"sandbox_id", sandbox_id()}}, {"sandbox_id"}),
               out({{"sandbox_id", {{"type", "string"}}}, {"destroyed", {{"type", "boolean"}}}, {"refusals", refusals()}},
                   {"sandbox_id", "destroyed", "refusals"})});
  json probe = {{"type", "object"},
                {"properties", {{"id", {{"type", "string"}}}, {"category", {{"type", "string"}}}, {"verdict", {{"type", "string"}}},
                                {"evidence", {{"type", "string"}}}}}};
  t.push_back({"evidence", "Escape-test evidence",
               "Run ExGuardian's escape test (the sandbox attacks itself: filesystem, processes, network, kernel surface) for this "
               "sandbox's layer and policy, in fresh sandboxes of the same kind, and return the report: what held and what did not. "
               "Takes about a minute; the result is kept for later calls with the same layer and policy.",
               object({{"sandbox_id", sandbox_id()}}, {"sandbox_id"}),
               out({{"layer", {{"type", "string"}}}, {"policy", {{"type", {"string", "null"}}}}, {"passed", {{"type", "boolean"}}},
                    {"summary", {{"type", "string"}}},
                    {"counts", {{"type", "object"}}},
                    {"probes", {{"type", "array"}, {"items", probe}}},
                    {"warnings", {{"type", "array"}, {"items", {{"type", "string"}}}}}},
                   {"layer", "passed", "summary", "counts", "probes"})});
  return t;
}

}  // namespace

const std::vector<ToolDef>& tool_catalog() {
  static const std::vector<ToolDef> all = build();
  return all;
}

const ToolDef* find_tool(const std::string& name) {
  for (const auto& t : tool_catalog())
    if (t.name == name) return &t;
  return nullptr;
}

nlohmann::json tool_json(const ToolDef& t) {
  return {{"name", t.name}, {"title", t.title}, {"description", t.description}, {"inputSchema", t.input_schema}, {"outputSchema", t.output_schema}};
}

}  // namespace exg::mcp
