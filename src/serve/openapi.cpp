#include "serve/openapi.hpp"

#include <nlohmann/json.hpp>

#include "serve/routes.hpp"

namespace exg::serve {

namespace {

nlohmann::json ref(const char* name) { return {{"$ref", std::string("#/components/schemas/") + name}}; }

nlohmann::json json_body(const nlohmann::json& schema) { return {{"content", {{"application/json", {{"schema", schema}}}}}}; }

nlohmann::json answer(const AnswerDoc& a) {
  nlohmann::json r = {{"description", a.description}};
  if (a.schema) r["content"] = {{"application/json", {{"schema", ref(a.schema)}}}};
  return r;
}

// A route's operation: its own answers, then those every route of its kind
// has, its parameters (the pattern's, envd's header) and who may call it.
nlohmann::json operation(const Route& r) {
  nlohmann::json responses = nlohmann::json::object();
  for (const AnswerDoc& a : r.answers) responses[a.status] = answer(a);
  auto otherwise = [&](const AnswerDoc& a) {
    if (!responses.contains(a.status)) responses[a.status] = answer(a);
  };
  nlohmann::json params = nlohmann::json::array();
  for (size_t at = r.pattern.find('{'); at != std::string::npos; at = r.pattern.find('{', at + 1)) {
    std::string name = r.pattern.substr(at + 1, r.pattern.find('}', at) - at - 1);
    params.push_back({{"name", name}, {"in", "path"}, {"required", true}, {"schema", {{"type", "string"}, {"pattern", "^[A-Za-z0-9_-]{1,64}$"}}}});
  }
  nlohmann::json o = {{"summary", r.summary}};
  switch (r.auth) {
    case Auth::None: o["security"] = nlohmann::json::array(); break;
    case Auth::ApiKey:
      otherwise({"400", "Bad request: the message names the field", "Error"});
      otherwise({"401", "Missing or unknown X-API-KEY", "Error"});
      if (!params.empty()) otherwise({"404", "No such sandbox (or another tenant's)", "Error"});
      break;
    case Auth::EnvdToken:
      o["security"] = nlohmann::json::array({{{"AccessToken", nlohmann::json::array()}}, {{"ApiKeyAuth", nlohmann::json::array()}}});
      params.push_back({{"name", "E2b-Sandbox-Id"}, {"in", "header"}, {"required", true}, {"schema", {{"type", "string"}}}});
      otherwise({"502", "No such sandbox, not the caller's, paused, or another port than envd's (49983): one answer for all", "Error"});
      break;
  }
  if (!params.empty()) o["parameters"] = params;
  o["responses"] = responses;
  if (r.body_schema) o["requestBody"] = json_body(ref(r.body_schema));
  return o;
}

nlohmann::json build() {
  // envd's routes (a request with E2b-Sandbox-Id) after the others: where both
  // have a method and path (GET /health, /metrics), envd's is x-envd of the other's.
  nlohmann::json paths = nlohmann::json::object();
  for (bool envd : {false, true})
    for (const Route& r : route_table()) {
      if ((r.auth == Auth::EnvdToken) != envd) continue;
      nlohmann::json& at = paths[r.pattern][operation_key(r.method)];
      if (at.is_null()) at = operation(r);
      else at[kEnvdVariant] = operation(r);
    }
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
          {"autoPause", {{"type", "boolean"}, {"description", "the timeout pauses it (kept --pause-ttl-hours) instead of killing it"}}},
          {"autoPauseMemory", {{"type", "boolean"}, {"description", "true (default): the timeout's pause keeps its memory while the server runs, its files across a restart; false: its files only, its processes end, connect boots it again"}}},
          {"autoResume", {{"type", "object"}, {"properties", {{"enabled", {{"type", "boolean"}, {"description", "with autoPause: a request for the paused sandbox (envd or a port, with its credentials) resumes it"}}}}}}},
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
                        {"envdAccessToken", {{"type", "string"}, {"description", "X-Access-Token of envd calls; absent when created with secure false"}}},
                        {"trafficAccessToken", {{"type", "string"}, {"description", "E2B-Traffic-Access-Token: reaches the sandbox's other ports (E2b-Sandbox-Port), not its envd; absent when created with secure false"}}}}}}},
  };
  return {{"openapi", "3.0.0"},
          {"info", {{"title", "exguardian serve"}, {"version", "0.1.0"},
                    {"description", "E2B's sandbox API (control plane and envd) as ExGuardian serves it; see docs/serve.md"}}},
          {"components", {{"schemas", schemas}, {"securitySchemes", {{"ApiKeyAuth", {{"type", "apiKey"}, {"in", "header"}, {"name", "X-API-KEY"}}},
                                                    {"AccessToken", {{"type", "apiKey"}, {"in", "header"}, {"name", "X-Access-Token"}}}}}}},
          {"security", nlohmann::json::array({{{"ApiKeyAuth", nlohmann::json::array()}}})},
          {"paths", paths}};
}

}  // namespace

const std::string& openapi_document() {
  static const std::string doc = build().dump(2) + "\n";
  return doc;
}

}  // namespace exg::serve
