// The E2B-compatible service: routes each request to the control plane
// (E2B's REST API: sandboxes, authenticated by a tenant's X-API-KEY) or to
// one sandbox's envd (the requests the SDK sends to E2B_SANDBOX_URL with the
// header E2b-Sandbox-Id: Connect-RPC process.Process and
// filesystem.Filesystem, /files, /envs, /health), which this server answers
// through the sandbox's agent. The handlers live in one file per part:
// control_routes.cpp, envd_process.cpp, envd_filesystem.cpp, envd_files.cpp.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>

#include "serve/connect_rpc.hpp"
#include "serve/http_server.hpp"
#include "serve/metrics.hpp"
#include "serve/sandbox_registry.hpp"
#include "serve/templates.hpp"
#include "serve/tenants.hpp"

namespace exg::serve {

// The envd version we answer as: the SDK gates features on it (0.5.7: stdin
// close, octet-stream uploads; below 0.6.2: no file metadata, which we do not keep).
inline constexpr const char* kEnvdVersion = "0.5.7";

struct ServiceOptions {
  size_t max_sandboxes = 1000;  // over all tenants
  size_t max_download = 256 * 1024 * 1024;
  bool verbose = false;
  bool cgroup_limits = true;  // false: --no-cgroup-limits, reported by /health and /metrics
};

class Service {
 public:
  Service(boost::asio::io_context& io, Tenants tenants, Templates templates, Registry& registry, ServiceOptions opt);
  void handle(Request& req, ExchangePtr ex);
  const Metrics& metrics() const { return metrics_; }

  // ---- shared by the handlers ----
  // E2B's error body {"code": N, "message": "..."} with that status.
  static Response api_error(http::status st, const std::string& message);
  void reply(ExchangePtr& ex, const std::string& route, Response r);

 private:
  boost::asio::io_context& io_;
  Tenants tenants_;
  Templates templates_;
  Registry& registry_;
  ServiceOptions opt_;
  Metrics metrics_;

  void route(Request& req, ExchangePtr ex);
  // control_routes.cpp
  void control(Request& req, ExchangePtr ex, const std::string& path, const std::string& query);
  void create_sandbox(Request& req, ExchangePtr ex, const Tenant& t);
  void update_network(Request& req, ExchangePtr ex, std::shared_ptr<Sandbox> sb);
  void list_sandboxes(Request& req, ExchangePtr ex, const Tenant& t, const std::string& query, bool v2);
  void refusals(ExchangePtr ex, const Sandbox& sb, const std::string& query);
  nlohmann::json sandbox_json(const Sandbox& sb, bool detail) const;
  static nlohmann::json created_json(const Sandbox& sb);
  std::optional<Response> check_quota(const Tenant& t, const Template& tmpl) const;

  // envd_*.cpp: a request for one sandbox, already authorised.
  void envd(Request& req, ExchangePtr ex, const std::shared_ptr<Sandbox>& sb, const std::string& path, const std::string& query);
  // An envd RPC's error: a stream's end message when the client asked for a stream, else a unary error.
  void rpc_fail(Request& req, ExchangePtr& ex, const std::string& route, bool streaming, const rpc::RpcError& e);
  // The RPC's request message; a bad one, or the wrong kind of call for `method`, is answered here.
  std::optional<nlohmann::json> rpc_message(Request& req, ExchangePtr& ex, const std::string& route,
                                            const std::string& method, bool streaming);
  void process_rpc(Request& req, ExchangePtr ex, const std::shared_ptr<Sandbox>& sb, const std::string& method);
  void stream_input(Request& req, ExchangePtr ex, const std::shared_ptr<Sandbox>& sb);
  void filesystem_rpc(Request& req, ExchangePtr ex, const std::shared_ptr<Sandbox>& sb, const std::string& method);
  void files_get(Request& req, ExchangePtr ex, const std::shared_ptr<Sandbox>& sb, const std::string& query);
  void files_post(Request& req, ExchangePtr ex, const std::shared_ptr<Sandbox>& sb, const std::string& query);

 public:
  // The E2B user a request acts as: "" when acceptable (the sandbox's one
  // user), else the error to answer with. From Authorization: Basic (RPC) or ?username= (files).
  static std::optional<std::string> user_error(const Request& req, const std::string& query_user, const Sandbox& sb);
  // A path of the request -> the absolute path inside the sandbox (relative ones start at the home).
  static std::string absolute_path(const Sandbox& sb, const std::string& p);
};

// Query string helpers.
std::optional<std::string> query_param(const std::string& query, const std::string& name);
std::string url_decode(const std::string& s);

}  // namespace exg::serve
