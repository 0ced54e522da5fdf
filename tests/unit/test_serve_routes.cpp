// serve's route table (src/serve/routes.hpp): one row per endpoint, each in
// the OpenAPI document, and paths matched by a plain scan that takes exactly
// what the table says.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/openapi.hpp"
#include "serve/routes.hpp"

namespace exg::serve {
namespace {

bool is_envd(const Route& r) { return r.auth == Auth::EnvdToken; }

// A path the pattern names, each {parameter} given a value.
std::string instance(const std::string& pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '{') {
      out += pattern[i];
      continue;
    }
    out += "abc_D-9";
    i = pattern.find('}', i);
  }
  return out;
}

// The control plane's routes and envd's (told apart by E2b-Sandbox-Id) are
// two tables in one: GET /health is one row of each.
TEST(ServeRoutes, NoMethodAndPatternTwice) {
  std::set<std::tuple<bool, http::verb, std::string>> seen;
  std::set<std::string> labels;
  for (const Route& r : route_table()) {
    EXPECT_TRUE(seen.insert({is_envd(r), r.method, r.pattern}).second) << r.label;
    EXPECT_TRUE(labels.insert(r.label).second) << r.label;
    EXPECT_TRUE(r.handler != nullptr) << r.label;
    EXPECT_FALSE(r.summary.empty()) << r.label;
    EXPECT_FALSE(r.answers.empty()) << r.label;
  }
  EXPECT_GE(seen.size(), 40u);
}

// No row hides another: a path of each row's pattern finds that row.
TEST(ServeRoutes, EachRowIsFoundByItsOwnPaths) {
  for (const Route& r : route_table()) {
    PathParams params;
    const Route* found = find_route(r.method, instance(r.pattern), is_envd(r), &params);
    ASSERT_NE(found, nullptr) << r.label;
    EXPECT_EQ(found, &r) << r.label << " is shadowed by " << found->label;
    if (r.pattern.find("{sandboxID}") != std::string::npos) {
      EXPECT_EQ(params["sandboxID"], "abc_D-9") << r.label;
    } else if (r.pattern.find("{templateID}") != std::string::npos) {
      EXPECT_EQ(params["templateID"], "abc_D-9") << r.label;  // DELETE /templates/{templateID}: a snapshot
    } else {
      EXPECT_TRUE(params.empty()) << r.label;
    }
  }
}

TEST(ServeRoutes, LabelsNameThePlaneMethodAndPattern) {
  PathParams params;
  const Route* pause = find_route(http::verb::post, "/sandboxes/x/pause", false, &params);
  ASSERT_NE(pause, nullptr);
  EXPECT_EQ(pause->label, "POST /sandboxes/{sandboxID}/pause");
  EXPECT_EQ(pause->auth, Auth::ApiKey);
  const Route* health = find_route(http::verb::get, "/health", false, &params);
  const Route* envd_health = find_route(http::verb::get, "/health", true, &params);
  ASSERT_TRUE(health && envd_health);
  EXPECT_EQ(health->label, "GET /health");
  EXPECT_EQ(health->auth, Auth::None);
  EXPECT_EQ(envd_health->label, "envd GET /health");
  EXPECT_EQ(envd_health->auth, Auth::EnvdToken);
  EXPECT_TRUE(health->handler != envd_health->handler);
  // One sandbox's routes are served under /v2 too, as the server always did.
  const Route* v2 = find_route(http::verb::post, "/v2/sandboxes/x/connect", false, &params);
  ASSERT_NE(v2, nullptr);
  EXPECT_EQ(v2->label, "POST /v2/sandboxes/{sandboxID}/connect");
  EXPECT_TRUE(v2->handler == find_route(http::verb::post, "/sandboxes/x/connect", false, &params)->handler);
  // A method the path does not have, or a route of the other plane, is no route.
  EXPECT_EQ(find_route(http::verb::delete_, "/sandboxes", false, &params), nullptr);
  EXPECT_EQ(find_route(http::verb::post, "/process.Process/Start", false, &params), nullptr);
  EXPECT_EQ(find_route(http::verb::post, "/process.Process/Nope", true, &params), nullptr);
  EXPECT_EQ(find_route(http::verb::get, "/openapi.json", true, &params), nullptr);
}

TEST(ServeRoutes, PatternsTakeParametersAndRefuseNearMisses) {
  PathParams p;
  ASSERT_TRUE(match_pattern("/sandboxes/{sandboxID}/pause", "/sandboxes/abc_D-9/pause", &p));
  EXPECT_EQ(p.size(), 1u);
  EXPECT_EQ(p["sandboxID"], "abc_D-9");
  ASSERT_TRUE(match_pattern("/sandboxes/{sandboxID}", "/sandboxes/" + std::string(64, 'a'), &p));
  EXPECT_EQ(p["sandboxID"], std::string(64, 'a'));
  EXPECT_TRUE(match_pattern("/health", "/health", &p));
  EXPECT_TRUE(p.empty());
  for (const std::string& bad : std::vector<std::string>{"/sandboxes/abc/pause/", "/sandboxes/abc/pause/x", "/sandboxes//pause", "/sandboxes/a%2Fb/pause",
                          "/sandboxes/a%2fb/pause", "/sandboxes/a/b/pause", "/sandboxes/a.b/pause", "/sandboxes/abc/Pause",
                          "/sandboxes/abc/pause?x", "sandboxes/abc/pause", "/sandboxes/abc", "/sandboxes/abc/", "", "/",
                          "//sandboxes/abc/pause", "/v2/sandboxes/abc/pause", "/sandboxes/" + std::string(65, 'a') + "/pause"}) {
    p = {{"untouched", "yes"}};
    EXPECT_FALSE(match_pattern("/sandboxes/{sandboxID}/pause", bad, &p)) << bad;
    EXPECT_EQ(p.size(), 1u) << bad << ": a refused path leaves the parameters alone";
  }
  EXPECT_FALSE(match_pattern("/health", "/health/", &p));
  EXPECT_FALSE(match_pattern("/health", "/healthz", &p));
  EXPECT_FALSE(match_pattern("/files", "/files/x", &p));
  EXPECT_FALSE(match_pattern("/process.Process/Start", "/process.Process/Start/", &p));
  // A path far longer than the header limit: a scan, no recursion per character.
  EXPECT_FALSE(match_pattern("/sandboxes/{sandboxID}/pause", "/sandboxes/a/" + std::string(1 << 20, 'a'), &p));
  EXPECT_FALSE(match_pattern("/sandboxes/{sandboxID}", "/sandboxes/" + std::string(1 << 20, 'a'), &p));
}

// The document is written from the table: each row one operation, and no
// operation without its row.
TEST(ServeRoutes, EveryRouteIsInTheOpenApiDocument) {
  auto doc = nlohmann::json::parse(openapi_document());
  const auto& paths = doc.at("paths");
  size_t rows = 0;
  for (const Route& r : route_table()) {
    ++rows;
    ASSERT_TRUE(paths.contains(r.pattern)) << r.label;
    std::string method = operation_key(r.method);
    ASSERT_TRUE(paths[r.pattern].contains(method)) << r.label;
    nlohmann::json op = paths[r.pattern][method];
    // GET /health and /metrics of envd are the control plane's operation's x-envd.
    if (is_envd(r) && op.contains(kEnvdVariant)) {
      op = op[kEnvdVariant];
    }
    EXPECT_EQ(op.at("summary"), r.summary) << r.label;
    for (const AnswerDoc& a : r.answers) EXPECT_TRUE(op.at("responses").contains(a.status)) << r.label << " " << a.status;
    if (r.auth == Auth::None) {
      EXPECT_EQ(op.at("security"), nlohmann::json::array()) << r.label;
    }
    if (r.auth == Auth::ApiKey) {
      EXPECT_TRUE(op.at("responses").contains("401")) << r.label;
    }
    if (is_envd(r)) {
      EXPECT_TRUE(op.at("responses").contains("502")) << r.label;
    }
    if (r.pattern.find("{sandboxID}") != std::string::npos) {
      EXPECT_EQ(op.at("parameters").at(0).at("name"), "sandboxID") << r.label;
    }
  }
  size_t ops = 0;
  for (const auto& [path, methods] : paths.items())
    for (const auto& [method, op] : methods.items()) ops += 1 + op.contains(kEnvdVariant);
  EXPECT_EQ(ops, rows);
  // Every schema an operation names is in the components.
  std::string text = openapi_document();
  for (size_t at = text.find("#/components/schemas/"); at != std::string::npos; at = text.find("#/components/schemas/", at + 1)) {
    size_t from = at + 21;
    std::string name = text.substr(from, text.find('"', from) - from);
    EXPECT_TRUE(doc["components"]["schemas"].contains(name)) << name;
  }
}

}  // namespace
}  // namespace exg::serve
