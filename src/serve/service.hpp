// The E2B-compatible service: routes each request to the control plane
// (E2B's REST API: sandboxes, authenticated by a tenant's X-API-KEY) or to
// one sandbox's envd (the requests the SDK sends to E2B_SANDBOX_URL with the
// header E2b-Sandbox-Id: Connect-RPC process.Process and
// filesystem.Filesystem, /files, /envs, /health), which this server answers
// through the sandbox's agent. Which handler answers what is the route table
// (routes.cpp); the handlers live in one file per part: control_routes.cpp,
// envd_process.cpp, envd_filesystem.cpp, envd_files.cpp.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>

#include "serve/connect_rpc.hpp"
#include "serve/file_signature.hpp"
#include "serve/http_server.hpp"
#include "serve/metrics.hpp"
#include "serve/routes.hpp"
#include "serve/sandbox_registry.hpp"
#include "serve/templates.hpp"
#include "serve/tenants.hpp"

namespace exg::serve {

// The envd version we answer as: the SDK gates features on it (0.5.7: stdin
// close, octet-stream uploads; 0.6.2: file metadata; 0.6.3: a watch event's
// entry info; 0.6.4: watches on network mounts allowed).
inline constexpr const char* kEnvdVersion = "0.6.4";
// What a stream open when its sandbox ends says (Unavailable): the SDK's
// words for it, which E2B's own tests look for.
inline constexpr const char* kSandboxEnded = "the sandbox was killed or reached its end of life";
// envd's port: E2b-Sandbox-Port names it (or none); another port is a port of the sandbox (port_proxy.cpp).
inline constexpr const char* kEnvdPort = "49983";

struct ServiceOptions {
  size_t max_sandboxes = 1000;  // over all tenants
  size_t max_download = 256 * 1024 * 1024;
  size_t max_upload = 100 * 1024 * 1024;  // also a gzip upload once decompressed (--max-upload-mib)
  bool verbose = false;
  bool cgroup_limits = true;  // false: --no-cgroup-limits, reported by /health and /metrics
  // --domain: the sandboxes' domain (E2B's `domain`): a Host `PORT-ID.DOMAIN` reaches that port
  // of that sandbox (sandbox_host.hpp), and creates answer it so the SDK's getHost names it. "": none.
  std::string domain;
};

// One request on its way to its route's handler: what the dispatcher found out
// before it (the route, the path's parameters, the tenant, the sandbox).
struct Call {
  Request& req;
  ExchangePtr ex;
  const Route& route;  // route.label is what its answers are counted as
  std::string path, query;
  PathParams params;
  const Tenant* tenant = nullptr;  // Auth::ApiKey: whose key it was
  std::shared_ptr<Sandbox> sb;     // a {sandboxID} of the tenant's, or envd's sandbox
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
  // An answer counted in /metrics that went out another way (a stream's head).
  void count(const std::string& route, unsigned status);

 private:
  boost::asio::io_context& io_;
  Tenants tenants_;
  Templates templates_;
  Registry& registry_;
  ServiceOptions opt_;
  Metrics metrics_;
  std::map<std::string, size_t> snapshots_taking_;  // per tenant: snapshots on their way (its quota counts them)

  friend std::vector<Route> route_rows();  // routes.cpp

  void route(Request& req, ExchangePtr ex);
  // The checks before a route's handler, by its kind; a request no route has answered as before the table.
  void control(Request& req, ExchangePtr ex, const Route* r, Call call);
  // `id` and `port`: from E2b-Sandbox-Id and E2b-Sandbox-Port, or from a Host `PORT-ID.DOMAIN`.
  void envd(Request& req, ExchangePtr ex, const Route* r, Call call, const std::string& id, const std::string& port);
  void no_control_route(Request& req, ExchangePtr ex, const Tenant& t, const std::string& path);
  // The tenant's sandbox of that id, if it is up (running or paused).
  std::shared_ptr<Sandbox> tenants_sandbox(const Tenant& t, const std::string& id) const;
  void no_envd_route(Request& req, ExchangePtr ex, const std::shared_ptr<Sandbox>& sb, const std::string& path);
  // A signed /files URL without E2b-Sandbox-Id (file_signature.hpp): the sandbox whose token signed it.
  void signed_files(Request& req, ExchangePtr ex, const Route& r, const std::string& path, const std::string& query);
  static std::optional<SignedFileUrl> signed_file_url(const Request& req, const std::string& query);
  // A paused sandbox with autoResume, reached by one allowed to: resumed (the error answer when that failed).
  std::optional<Response> auto_resume(const std::shared_ptr<Sandbox>& sb);

  // ---- the handlers (route_table()) ----
  // service.cpp: no key
  void health(Call& c);
  void openapi(Call& c);
  void server_metrics(Call& c);
  // control_routes.cpp
  void create_sandbox(Call& c);
  void list_sandboxes(Call& c);
  void get_sandbox(Call& c);
  void kill_sandbox(Call& c);
  void set_timeout(Call& c);
  void refresh_timeout(Call& c);
  void pause_sandbox(Call& c);
  void resume_sandbox(Call& c);
  void connect_sandbox(Call& c);
  void sandbox_metrics(Call& c);
  void update_network(Call& c);
  void refusals(Call& c);
  // snapshot_routes.cpp
  void create_snapshot(Call& c);
  void list_snapshots(Call& c);
  void delete_snapshot(Call& c);
  void fork_sandbox(Call& c);
  // envd_files.cpp
  void files_get(Call& c);
  void files_post(Call& c);
  bool files_user_refused(Call& c);
  void envd_health(Call& c);
  void envd_envs(Call& c);
  void envd_metrics(Call& c);
  // envd_process.cpp, envd_filesystem.cpp: the method is the path's last segment
  void process_call(Call& c);
  void stream_input(Call& c);
  void filesystem_call(Call& c);
  // port_proxy.cpp: a request for another port of the sandbox (E2b-Sandbox-Port), relayed to that
  // port inside the sandbox's own network namespace by a process started there.
  void port_proxy(Call& c, const std::string& port);

  void new_timeout(Call& c, bool set);
  void resume_or_connect(Call& c, bool connect);
  void revive_sandbox(Call& c, int64_t timeout_s);
  nlohmann::json sandbox_json(const Sandbox& sb, bool detail) const;
  nlohmann::json created_json(const Sandbox& sb) const;
  std::optional<Response> check_quota(const Tenant& t, const Template& tmpl) const;
  // Registry::pause_check: "" when the tenant's pausedDiskMB holds the sandbox's home too (its size noted), else why not.
  std::string pause_refusal(Sandbox& sb) const;

  // An envd RPC's error: a stream's end message when the client asked for a stream, else a unary error.
  void rpc_fail(Request& req, ExchangePtr& ex, const std::string& route, bool streaming, const rpc::RpcError& e);
  // The RPC's request message; a bad one, or the wrong kind of call for `method`, is answered here.
  std::optional<nlohmann::json> rpc_message(Request& req, ExchangePtr& ex, const std::string& route,
                                            const std::string& method, bool streaming);
  // `route`: the label its answers are counted as (an unknown method's is no_envd_route's).
  void process_rpc(Request& req, ExchangePtr ex, const std::shared_ptr<Sandbox>& sb, const std::string& method, const std::string& route);
  void filesystem_rpc(Request& req, ExchangePtr ex, const std::shared_ptr<Sandbox>& sb, const std::string& method, const std::string& route);

 public:
  // The E2B user a request acts as: "" when acceptable (the sandbox's one
  // user), else the error to answer with. From Authorization: Basic (RPC) or ?username= (files).
  // The message of an endpoint this server does not offer (501).
  static std::string not_served(const std::string& what);
  static std::optional<std::string> user_error(const Request& req, const std::string& query_user, const Sandbox& sb);
  // A path of the request -> the absolute path inside the sandbox (relative ones start at the home).
  static std::string absolute_path(const Sandbox& sb, const std::string& p);
};

// Query string helpers.
std::optional<std::string> query_param(const std::string& query, const std::string& name);
std::string url_decode(const std::string& s);

}  // namespace exg::serve
