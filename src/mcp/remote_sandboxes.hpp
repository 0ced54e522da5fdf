// Client mode (`exguardian mcp --server URL --api-key-file F`): the same
// tools, names, schemas and result shapes as standalone, carried out by a
// running `exguardian serve` over its E2B-compatible API: the control plane
// (POST/GET/DELETE /sandboxes, with the API key) creates, lists and destroys;
// each sandbox's envd (E2b-Sandbox-Id and its access token: Connect-RPC
// process.Process and filesystem.Filesystem, /files) runs commands and moves
// files. Nothing runs on this host: what the server cannot do is an error.
// The API key goes only to the control plane, never into a sandbox.
// This session sees only the sandboxes it created (tagged with its metadata),
// and destroys them when it ends.
#pragma once
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "mcp/command_output.hpp"
#include "mcp/sandboxes.hpp"
#include "mcp/serve_errors.hpp"
#include "mcp/serve_http.hpp"

namespace exg::mcp {

struct RemoteOptions {
  ServeEndpoint server;
  std::string api_key;
  std::vector<std::string> allow_domains;  // the operator's: every sandbox's network.allowOut
  bool lock_policy = false;                // create_sandbox may not add allow_domains
  std::chrono::seconds sandbox_timeout{3600};
  size_t max_sandboxes = 16;
};

class RemoteSandboxes : public Sandboxes {
 public:
  RemoteSandboxes(boost::asio::io_context& io, RemoteOptions opt);
  void call(ToolCallPtr c) override;
  void shutdown(std::function<void()> done) override;

  // A start_command process: its stream held open, its output kept until read_output takes it.
  struct Background : BackgroundOutput {
    HttpCallPtr stream;
  };
  // What a call that reports refusals is given: the refusals, and a note when they could not be had.
  using RefusalsDone = std::function<void(nlohmann::json refusals, std::string note)>;
  struct Held {
    std::string id, access_token, template_name, layer, home, created_at, expires_at;
    std::map<int, std::shared_ptr<Background>> background;
    // The sandbox's refusals are fetched from serve one call at a time, each from where the last
    // ended (audit_next), so that every refusal is reported once, by the first call to end after it.
    uint64_t audit_next = 0;
    bool fetching_refusals = false;
    std::deque<RefusalsDone> refusals_waiting;
  };
  using Reply = std::function<void(const HttpAnswer& a, const std::optional<std::string>& failure)>;

 private:
  boost::asio::io_context& io_;
  RemoteOptions opt_;
  ServeHttp http_;
  std::string session_tag_;  // the metadata value marking this session's sandboxes
  std::map<std::string, std::shared_ptr<Held>> held_;
  size_t creating_ = 0;

  template <class T>
  friend void dispatch_tool(T& s, const ToolCallPtr& c);
  // The sandbox a call names; else replies with the error and returns null.
  std::shared_ptr<Held> held(const ToolCallPtr& c);
  // A sandbox the server no longer has: dropped here, its streams closed.
  void forget(const std::string& id);
  // Requests: the control plane (API key), a sandbox's envd (its token), a unary Connect-RPC call.
  HttpCallPtr control(boost::beast::http::verb method, const std::string& target, const nlohmann::json* body, Reply done,
                      std::chrono::seconds deadline = std::chrono::seconds(120));
  HttpRequest envd_request(const Held& h, boost::beast::http::verb method, const std::string& target) const;
  HttpCallPtr envd(const std::shared_ptr<Held>& h, HttpRequest r, Reply done);
  void rpc(const std::shared_ptr<Held>& h, const std::string& method, const nlohmann::json& msg,
           std::function<void(const nlohmann::json& result, const std::optional<std::string>& failure)> done);
  void create(ToolCallPtr c);
  void describe(ToolCallPtr c, std::shared_ptr<Held> h);
  // The refusals recorded since the last call that took them (serve's GET /sandboxes/{id}/refusals).
  void take_refusals(const std::shared_ptr<Held>& h, RefusalsDone done);
  void fetch_refusals(const std::shared_ptr<Held>& h);
  void list(ToolCallPtr c);
  void destroy(ToolCallPtr c);
  // remote_commands.cpp
  void run_command(ToolCallPtr c, std::shared_ptr<Held> h);
  void start_command(ToolCallPtr c, std::shared_ptr<Held> h);
  void read_output(ToolCallPtr c, std::shared_ptr<Held> h);
  // process.Process/Start as a stream: its events to on_event, then done (the answer, and its failure if any).
  HttpCallPtr start_process(const std::shared_ptr<Held>& h, const nlohmann::json& args, std::optional<double> timeout_s,
                            std::function<void(const nlohmann::json& event)> on_event, Reply done);
  void signal(const std::shared_ptr<Held>& h, int pid);
  // remote_files.cpp
  void read_file(ToolCallPtr c, std::shared_ptr<Held> h);
  void write_file(ToolCallPtr c, std::shared_ptr<Held> h);
  void upload(ToolCallPtr c, std::shared_ptr<Held> h, std::shared_ptr<std::string> data, bool existed);
  void list_files(ToolCallPtr c, std::shared_ptr<Held> h);
  void stat_file(ToolCallPtr c, std::shared_ptr<Held> h);
  void remove_file(ToolCallPtr c, std::shared_ptr<Held> h);
  void evidence(ToolCallPtr c, std::shared_ptr<Held> h);
};

}  // namespace exg::mcp
