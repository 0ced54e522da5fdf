#include "serve/openapi.hpp"

#include <nlohmann/json.hpp>

namespace exg::serve {

namespace {

nlohmann::json op(const char* summary, const nlohmann::json& responses, bool auth = true) {
  nlohmann::json o = {{"summary", summary}, {"responses", responses}};
  if (!auth) o["security"] = nlohmann::json::array();
  return o;
}

nlohmann::json ref(const char* name) { return {{"$ref", std::string("#/components/schemas/") + name}}; }

nlohmann::json json_body(const nlohmann::json& schema) { return {{"content", {{"application/json", {{"schema", schema}}}}}}; }

nlohmann::json err(const char* d) { return {{"description", d}, {"content", {{"application/json", {{"schema", ref("Error")}}}}}}; }

nlohmann::json build() {
  nlohmann::json errors = {{"400", err("Bad request: the message names the field")},
                           {"401", err("Missing or unknown X-API-KEY")},
                           {"404", err("No such sandbox (or another tenant's)")}};
  auto with = [&](nlohmann::json r) {
    for (auto& [k, v] : errors.items()) r[k] = v;
    return r;
  };
  nlohmann::json sandbox_out = {{"description", "The sandbox"}, {"content", {{"application/json", {{"schema", ref("Sandbox")}}}}}};
  nlohmann::json paths = {
      {"/health", {{"get", op("The server is up", {{"200", {{"description", "ok"}}}}, false)}}},
      {"/metrics", {{"get", op("Prometheus text: sandboxes, creates, command start latency, refusals, egress decisions per tenant, cgroup limits", {{"200", {{"description", "text/plain"}}}}, false)}}},
      {"/openapi.json", {{"get", op("This document", {{"200", {{"description", "application/json"}}}}, false)}}},
      {"/sandboxes",
       {{"post", op("Create a sandbox", with({{"201", sandbox_out}, {"429", err("A quota of the tenant or the server")},
                                               {"500", err("The sandbox did not start: the supervisor's reason")}}))},
        {"get", op("Running sandboxes of the tenant (?metadata=k%3Dv)", with({{"200", {{"description", "ListedSandbox[]"}}}}))}}},
      {"/v2/sandboxes",
       {{"post", op("Create a sandbox (as POST /sandboxes)", with({{"201", sandbox_out}, {"429", err("A quota")}}))},
        {"get", op("Sandboxes of the tenant: ?metadata, ?state=running,paused, ?limit, ?nextToken (X-Next-Token answers)",
                   with({{"200", {{"description", "ListedSandbox[]"}}}}))}}},
      {"/sandboxes/{sandboxID}",
       {{"get", op("One sandbox", with({{"200", {{"description", "SandboxDetail"}}}}))},
        {"delete", op("Kill it: every process, its cgroup and its files. Not E2B's: with ?refusals_since=N (a refusals answer's next) it answers 200 {refusals, next} with what it refused up to its end (planted files its end quarantined too)",
                      with({{"204", {{"description", "killed"}}}, {"200", {{"description", "killed: Refusals"}}}}))}}},
      {"/sandboxes/{sandboxID}/timeout", {{"post", op("Set its timeout from now {timeout: seconds}", with({{"204", {{"description", "set"}}}}))}}},
      {"/sandboxes/{sandboxID}/refreshes", {{"post", op("Extend its life {duration: seconds}", with({{"204", {{"description", "set"}}}}))}}},
      {"/sandboxes/{sandboxID}/pause", {{"post", op("Freeze its cgroup (processes and files kept)", with({{"204", {{"description", "paused"}}}, {"409", err("Already paused")}}))}}},
      {"/sandboxes/{sandboxID}/resume", {{"post", op("Thaw it", with({{"201", sandbox_out}, {"409", err("Not paused")}}))}}},
      {"/sandboxes/{sandboxID}/connect", {{"post", op("Connect (resumes a paused one)", with({{"200", sandbox_out}, {"201", sandbox_out}}))}}},
      {"/v2/sandboxes/{sandboxID}/connect", {{"post", op("Connect (resumes a paused one)", with({{"200", sandbox_out}, {"201", sandbox_out}}))}}},
      {"/sandboxes/{sandboxID}/metrics", {{"get", op("CPU and memory of its cgroup now", with({{"200", {{"description", "SandboxMetric[]"}}}}))}}},
      {"/sandboxes/{sandboxID}/refusals",
       {{"get", op("Not E2B's: what it refused (egress, DNS, syscalls, planted files, exfiltration) since ?since= (an earlier answer's next; 0 or absent: from its start), at most 100 listed: {refusals: [{event, summary, detail}], next}",
                   with({{"200", {{"description", "Refusals"}}}, {"400", err("since is not an offset this route answered")}}))}}},
      {"/sandboxes/{sandboxID}/network", {{"put", op("Replace the egress rules (allowOut, denyOut; an omitted list is cleared; rules set at create are kept, changing them is 400)", {{"204", {{"description", "Updated"}}}, {"400", err("Bad rules")}, {"404", err("Not found")}, {"409", err("No egress proxy, paused, or the template's policy fixes the rules")}})}}},
  };
  // envd, reached with the header E2b-Sandbox-Id (E2B_SANDBOX_URL pointing here) and X-Access-Token.
  nlohmann::json envd = {{"summary", "envd of the sandbox named by E2b-Sandbox-Id"}};
  for (const char* m : {"Start", "Connect"})
    paths[std::string("/process.Process/") + m] = {{"post", op("Connect-RPC server stream (application/connect+json)", {{"200", {{"description", "enveloped ProcessEvent messages, then the end-of-stream message"}}}})}};
  paths["/process.Process/StreamInput"] = {{"post", op("Connect-RPC client stream (application/connect+json): start, then data and keepalive messages; taken whole once the client ends it", {{"200", {{"description", "one empty message, then the end-of-stream message"}}}})}};
  for (const char* m : {"List", "SendInput", "SendSignal", "CloseStdin", "Update"})
    paths[std::string("/process.Process/") + m] = {{"post", op("Connect-RPC unary (application/json)", {{"200", {{"description", "the response message"}}}})}};
  paths["/filesystem.Filesystem/WatchDir"] = {{"post", op("Connect-RPC server stream", {{"200", {{"description", "enveloped WatchDirResponse messages"}}}})}};
  for (const char* m : {"Stat", "MakeDir", "Move", "ListDir", "Remove", "CreateWatcher", "GetWatcherEvents", "RemoveWatcher"})
    paths[std::string("/filesystem.Filesystem/") + m] = {{"post", op("Connect-RPC unary (application/json)", {{"200", {{"description", "the response message"}}}})}};
  paths["/files"] = {{"get", op("Download ?path= (envd)", {{"200", {{"description", "application/octet-stream"}}}, {"404", err("No such file")}})},
                     {"post", op("Upload ?path= (multipart/form-data or application/octet-stream; parents created)",
                                 {{"200", {{"description", "EntryInfo[] {name, type, path}"}}}, {"413", err("Larger than --max-upload")}})}};
  paths["/envs"] = {{"get", op("The sandbox's envVars (envd)", {{"200", {{"description", "object"}}}})}};

  nlohmann::json schemas = {
      {"Error", {{"type", "object"}, {"required", {"code", "message"}}, {"properties", {{"code", {{"type", "integer"}}}, {"message", {{"type", "string"}}}}}}},
      {"NewSandbox",
       {{"type", "object"},
        {"properties",
         {{"templateID", {{"type", "string"}}}, {"timeout", {{"type", "integer"}, {"minimum", 1}}},
          {"metadata", {{"type", "object"}, {"additionalProperties", {{"type", "string"}}}}},
          {"envVars", {{"type", "object"}, {"additionalProperties", {{"type", "string"}}}}},
          {"secure", {{"type", "boolean"}, {"description", "true (also when absent): every envd call needs the envdAccessToken; false: no token is made and the sandbox's id alone reaches its envd"}}},
          {"allow_internet_access", {{"type", "boolean"}}},
          {"network", {{"type", "object"}, {"properties", {{"allowOut", {{"type", "array"}, {"items", {{"type", "string"}}}}}, {"denyOut", {{"type", "array"}, {"items", {{"type", "string"}}}}},
              {"rules", {{"type", "object"}, {"description", "host (exact or *.domain, also in allowOut) -> [{transform: {headers: {name: value}}}]: the sandbox's proxy sets the headers on HTTPS requests to the host; the values never enter the sandbox"},
                         {"additionalProperties", {{"type", "array"}, {"items", ref("NetworkRule")}}}}}}}}}}}}},
      {"NetworkRule",
       {{"type", "object"},
        {"properties", {{"transform", {{"type", "object"}, {"properties", {{"headers", {{"type", "object"}, {"additionalProperties", {{"type", "string"}}}}}}}}}}}}},
      {"Sandbox",
       {{"type", "object"},
        {"required", {"templateID", "sandboxID", "clientID", "envdVersion"}},
        {"properties", {{"templateID", {{"type", "string"}}}, {"sandboxID", {{"type", "string"}}}, {"clientID", {{"type", "string"}}},
                        {"envdVersion", {{"type", "string"}}},
                        {"envdAccessToken", {{"type", "string"}, {"description", "X-Access-Token of envd calls; absent when created with secure false"}}}}}}},
  };
  paths["/sandboxes"]["post"]["requestBody"] = json_body(ref("NewSandbox"));
  paths["/v2/sandboxes"]["post"]["requestBody"] = json_body(ref("NewSandbox"));
  return {{"openapi", "3.0.0"},
          {"info", {{"title", "exguardian serve"}, {"version", "0.1.0"},
                    {"description", "E2B's sandbox API (control plane and envd) as ExGuardian serves it; see docs/serve.md"}}},
          {"components", {{"schemas", schemas}, {"securitySchemes", {{"ApiKeyAuth", {{"type", "apiKey"}, {"in", "header"}, {"name", "X-API-KEY"}}}}}}},
          {"security", nlohmann::json::array({{{"ApiKeyAuth", nlohmann::json::array()}}})},
          {"paths", paths}};
}

}  // namespace

const std::string& openapi_document() {
  static const std::string doc = build().dump(2) + "\n";
  return doc;
}

}  // namespace exg::serve
