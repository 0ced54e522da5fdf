#include "serve/routes.hpp"

#include <algorithm>
#include <cctype>

#include "serve/control_requests.hpp"
#include "serve/service.hpp"

namespace exg::serve {

namespace {

constexpr size_t kMaxParam = 64;

bool param_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-'; }

std::string label_of(const Route& r) {
  return std::string(r.auth == Auth::EnvdToken ? "envd " : "") + std::string(http::to_string(r.method)) + " " + r.pattern;
}

}  // namespace

// The rows as written (a friend of Service: the handlers are its own).
// Answers every route of a kind has (401, 404 for a {sandboxID}, envd's 502)
// are added by openapi.cpp.
std::vector<Route> route_rows() {
  using V = http::verb;
  const AnswerDoc sandbox_out{"201", "The sandbox", "Sandbox"};
  const AnswerDoc unary{"200", "the response message"};
  std::vector<Route> t = {
      // ---- no key ----
      {V::get, "/health", Auth::None, &Service::health, "The server is up", {{"200", "ok"}}},
      {V::get, "/metrics", Auth::None, &Service::server_metrics,
       "Prometheus text: sandboxes, creates, command start latency, refusals, egress decisions per tenant, cgroup limits",
       {{"200", "text/plain"}}},
      {V::get, "/openapi.json", Auth::None, &Service::openapi, "This document", {{"200", "application/json"}}},
      // ---- the control plane: a tenant's X-API-KEY ----
      {V::post, "/sandboxes", Auth::ApiKey, &Service::create_sandbox, "Create a sandbox",
       {sandbox_out, {"429", "A quota of the tenant or the server", "Error"}, {"500", "The sandbox did not start: the supervisor's reason", "Error"}},
       "NewSandbox"},
      {V::get, "/sandboxes", Auth::ApiKey, &Service::list_sandboxes, "Running sandboxes of the tenant (?metadata=k%3Dv)",
       {{"200", "ListedSandbox[]"}}},
      {V::post, "/v2/sandboxes", Auth::ApiKey, &Service::create_sandbox, "Create a sandbox (as POST /sandboxes)",
       {sandbox_out, {"429", "A quota", "Error"}, {"500", "The sandbox did not start: the supervisor's reason", "Error"}},
       "NewSandbox"},
      {V::get, "/v2/sandboxes", Auth::ApiKey, &Service::list_sandboxes,
       "Sandboxes of the tenant, newest first: ?order=asc|desc, ?metadata, ?state=running,paused, ?startedAfter (RFC 3339), ?template, "
       "?limit, ?nextToken (X-Next-Token answers)",
       {{"200", "ListedSandbox[]"}}},
      {V::get, "/sandboxes/{sandboxID}", Auth::ApiKey, &Service::get_sandbox, "One sandbox", {{"200", "SandboxDetail"}}},
      {V::delete_, "/sandboxes/{sandboxID}", Auth::ApiKey, &Service::kill_sandbox,
       "Kill it: every process, its cgroup and its files. Not E2B's: with ?refusals_since=N (a refusals answer's next) it answers 200 "
       "{refusals, next} with what it refused up to its end (planted files its end quarantined too)",
       {{"204", "killed"}, {"200", "killed: Refusals"}}},
      {V::post, "/sandboxes/{sandboxID}/timeout", Auth::ApiKey, &Service::set_timeout, "Set its timeout from now {timeout: seconds}",
       {{"204", "set"}}},
      {V::post, "/sandboxes/{sandboxID}/refreshes", Auth::ApiKey, &Service::refresh_timeout, "Extend its life {duration: seconds}",
       {{"204", "set"}}},
      {V::post, "/sandboxes/{sandboxID}/pause", Auth::ApiKey, &Service::pause_sandbox, "Freeze its cgroup (processes and files kept); {memory: false}: its files only, its processes end (connect boots it again)",
       {{"204", "paused"}, {"400", "A body other than {memory?: boolean}", "Error"},
        {"409", "Already paused, being paused, no cgroups (--no-cgroup-limits; a pause with memory), or network.rules (a pause without)", "Error"},
        {"500", "It could not be frozen (thawed again: it runs on), or its files could not be kept apart", "Error"}}},
      {V::post, "/sandboxes/{sandboxID}/resume", Auth::ApiKey, &Service::resume_sandbox, "Thaw it",
       {sandbox_out, {"409", "Not paused", "Error"}}},
      {V::post, "/sandboxes/{sandboxID}/connect", Auth::ApiKey, &Service::connect_sandbox, "Connect (resumes a paused one)",
       {{"200", "The sandbox", "Sandbox"}, sandbox_out}},
      {V::get, "/sandboxes/{sandboxID}/metrics", Auth::ApiKey, &Service::sandbox_metrics, "CPU and memory of its cgroup now; ?start, ?end (unix seconds): "
       "that sample when the range holds now, else none (no history is kept)",
       {{"200", "SandboxMetric[]"}}},
      {V::get, "/sandboxes/{sandboxID}/refusals", Auth::ApiKey, &Service::refusals,
       "Not E2B's: what it refused (egress, DNS, syscalls, planted files, exfiltration) since ?since= (an earlier answer's next; 0 or "
       "absent: from its start), at most 100 listed: {refusals: [{event, summary, detail}], next}",
       {{"200", "Refusals"}, {"400", "since is not an offset this route answered", "Error"}}},
      {V::put, "/sandboxes/{sandboxID}/network", Auth::ApiKey, &Service::update_network,
       "Replace the egress rules (allowOut, denyOut; an omitted list is cleared; rules set at create are kept, changing them is 400)",
       {{"204", "Updated"}, {"400", "Bad rules", "Error"}, {"409", "No egress proxy, paused, or the template's policy fixes the rules", "Error"}}},
      {V::post, "/sandboxes/{sandboxID}/snapshots", Auth::ApiKey, &Service::create_snapshot,
       "E2B's snapshot {name?}: filesystem only (its /home/user; not memory or processes), the copy swept of planted files "
       "first (not E2B's: kept, quarantined); its snapshotID is a templateID for a create",
       {{"201", "{snapshotID, names, kept, quarantined: [{path, why}]}"}, {"500", "No snapshot taken: why", "Error"}}},
      {V::get, "/snapshots", Auth::ApiKey, &Service::list_snapshots,
       "The tenant's snapshots, newest first: ?sandboxID, ?name, ?limit, ?nextToken (X-Next-Token answers)",
       {{"200", "[{snapshotID, names, ...}]"}}},
      {V::delete_, "/templates/{templateID}", Auth::ApiKey, &Service::delete_snapshot,
       "Delete a snapshot (the SDK's deleteSnapshot); a template of the templates file: 501",
       {{"204", "deleted"}, {"404", "No such snapshot", "Error"}}},
      {V::post, "/sandboxes/{sandboxID}/fork", Auth::ApiKey, &Service::fork_sandbox,
       "E2B's fork {timeout (default 15 s), count (1..100)}: one snapshot (as /snapshots: filesystem only, swept), then count "
       "sandboxes made from it",
       {{"201", "[{sandbox: Sandbox} | {error: Error}]"}, {"409", "network.rules are not kept", "Error"}}},
      // ---- envd: E2b-Sandbox-Id names the sandbox ----
      {V::get, "/health", Auth::EnvdToken, &Service::envd_health, "envd's health", {{"204", "up"}}},
      {V::get, "/metrics", Auth::EnvdToken, &Service::envd_metrics, "The sandbox's CPU and memory now (envd)", {{"200", "Metrics"}}},
      {V::get, "/envs", Auth::EnvdToken, &Service::envd_envs, "The sandbox's envVars (envd)", {{"200", "object"}}},
      {V::get, "/files", Auth::EnvdToken, &Service::files_get, "Download ?path= (envd)",
       {{"200", "application/octet-stream"}, {"404", "No such file", "Error"}}},
      {V::post, "/files", Auth::EnvdToken, &Service::files_post,
       "Upload ?path= (multipart/form-data or application/octet-stream; parents created)",
       {{"200", "EntryInfo[] {name, type, path}"}, {"413", "Larger than --max-upload", "Error"}}},
  };
  for (auto& r : t)
    if (r.handler == &Service::fork_sandbox)
      r.body_check = [](const std::string& body, int64_t max_timeout_s) -> std::optional<std::string> {
        auto f = parse_fork_body(body, max_timeout_s);
        if (!f) return f.error().message;
        return std::nullopt;
      };
  for (const char* m : {"Start", "Connect"})
    t.push_back({V::post, std::string("/process.Process/") + m, Auth::EnvdToken, &Service::process_call,
                 "Connect-RPC server stream (application/connect+json)",
                 {{"200", "enveloped ProcessEvent messages, then the end-of-stream message"}}});
  t.push_back({V::post, "/process.Process/StreamInput", Auth::EnvdToken, &Service::stream_input,
               "Connect-RPC client stream (application/connect+json): start, then data and keepalive messages; taken whole once the "
               "client ends it",
               {{"200", "one empty message, then the end-of-stream message"}}});
  for (const char* m : {"List", "SendInput", "SendSignal", "CloseStdin", "Update"})
    t.push_back({V::post, std::string("/process.Process/") + m, Auth::EnvdToken, &Service::process_call,
                 "Connect-RPC unary (application/json)", {unary}});
  t.push_back({V::post, "/filesystem.Filesystem/WatchDir", Auth::EnvdToken, &Service::filesystem_call, "Connect-RPC server stream",
               {{"200", "enveloped WatchDirResponse messages"}}});
  for (const char* m : {"Stat", "MakeDir", "Move", "ListDir", "Remove", "CreateWatcher", "GetWatcherEvents", "RemoveWatcher"})
    t.push_back({V::post, std::string("/filesystem.Filesystem/") + m, Auth::EnvdToken, &Service::filesystem_call,
                 "Connect-RPC unary (application/json)", {unary}});
  return t;
}

bool match_pattern(std::string_view pattern, std::string_view path, PathParams* params) {
  PathParams found;
  while (!pattern.empty()) {
    if (pattern[0] != '/' || path.empty() || path[0] != '/') return false;
    pattern.remove_prefix(1), path.remove_prefix(1);
    std::string_view want = pattern.substr(0, pattern.find('/'));
    std::string_view got = path.substr(0, path.find('/'));
    pattern.remove_prefix(want.size()), path.remove_prefix(got.size());
    if (want.size() > 2 && want.front() == '{' && want.back() == '}') {
      if (got.empty() || got.size() > kMaxParam || !std::all_of(got.begin(), got.end(), param_char)) return false;
      found.emplace(want.substr(1, want.size() - 2), got);
    } else if (want != got) {
      return false;
    }
  }
  if (!path.empty()) return false;
  if (params) *params = std::move(found);
  return true;
}

std::string operation_key(http::verb method) {
  std::string key(http::to_string(method));
  for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return key;
}

const std::vector<Route>& route_table() {
  static const std::vector<Route> table = [] {
    std::vector<Route> t = route_rows();
    // One sandbox's routes answer under /v2 too (E2B's SDK calls
    // /v2/sandboxes/{sandboxID}/connect; the server has always taken /v2 for each).
    size_t n = t.size();
    for (size_t i = 0; i < n; ++i)
      if (t[i].auth == Auth::ApiKey && t[i].pattern.starts_with("/sandboxes/")) {
        Route v2 = t[i];
        v2.pattern = "/v2" + v2.pattern;
        t.push_back(std::move(v2));
      }
    for (auto& r : t) r.label = label_of(r);
    return t;
  }();
  return table;
}

const Route* find_route(http::verb method, std::string_view path, bool envd, PathParams* params) {
  for (const Route& r : route_table())
    if (r.method == method && (r.auth == Auth::EnvdToken) == envd && match_pattern(r.pattern, path, params)) return &r;
  return nullptr;
}

}  // namespace exg::serve
