// Standalone mode: the sandboxes `exguardian mcp` holds itself. Each one is an
// `exguardian session` supervisor spawned and driven by the service's own
// registry (serve::Registry, serve::AgentConn: the same code `exguardian
// serve` uses), so an MCP sandbox is the same long-lived sandbox, on the same
// layers, with the same policy, audit log and cleanup. Tools run through the
// sandbox's agent (pid 1 inside it): nothing a tool call asks for runs on the host.
#pragma once
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "mcp/command_output.hpp"
#include "mcp/evidence_runs.hpp"
#include "mcp/sandboxes.hpp"
#include "serve/sandbox_registry.hpp"
#include "serve/templates.hpp"

namespace exg::mcp {

struct LocalOptions {
  std::string state_dir;                      // the registry's; audit logs under it too
  std::string exe;                            // this exguardian binary
  std::string layer = "process";              // the default layer
  std::string policy;                         // the operator's policy file (every sandbox; empty: the defaults)
  std::vector<std::string> allow_domains;     // the operator's (every sandbox)
  std::vector<std::string> workspace_roots;   // where a create_sandbox workspace may be (absolute, real paths)
  serve::Templates templates;
  bool lock_policy = false;                   // create_sandbox may not pick layer, policy, domains or workspace
  std::chrono::seconds sandbox_timeout{3600};
  size_t max_sandboxes = 16;
};

class LocalSandboxes : public Sandboxes {
 public:
  LocalSandboxes(boost::asio::io_context& io, serve::Registry& registry, LocalOptions opt);
  void call(ToolCallPtr c) override;
  void shutdown(std::function<void()> done) override;

  // A start_command process: its output kept until read_output takes it.
  struct Background : BackgroundOutput {
    uint64_t token = 0;
    uint64_t audit_from = 0;  // refusals after this offset not yet reported
  };
  struct Held {
    std::shared_ptr<serve::Sandbox> sb;
    std::string layer, template_name, policy, host_workspace;
    std::vector<std::string> allow_domains;
    std::map<int, std::shared_ptr<Background>> background;
  };

 private:
  boost::asio::io_context& io_;
  serve::Registry& registry_;
  LocalOptions opt_;
  std::map<std::string, std::shared_ptr<Held>> held_;
  EvidenceRuns evidence_;
  size_t creating_ = 0;

  template <class T>
  friend void dispatch_tool(T& s, const ToolCallPtr& c);
  // The sandbox a call names, running; else replies with the error and returns null.
  std::shared_ptr<Held> held(const ToolCallPtr& c);
  void prune();
  void create(ToolCallPtr c);
  void list(ToolCallPtr c);
  void destroy(ToolCallPtr c);
  // local_commands.cpp
  void run_command(ToolCallPtr c, std::shared_ptr<Held> h);
  void start_command(ToolCallPtr c, std::shared_ptr<Held> h);
  void read_output(ToolCallPtr c, std::shared_ptr<Held> h);
  // local_files.cpp
  void read_file(ToolCallPtr c, std::shared_ptr<Held> h);
  void write_file(ToolCallPtr c, std::shared_ptr<Held> h);
  void list_files(ToolCallPtr c, std::shared_ptr<Held> h);
  void stat_file(ToolCallPtr c, std::shared_ptr<Held> h);
  void remove_file(ToolCallPtr c, std::shared_ptr<Held> h);
  void evidence(ToolCallPtr c, std::shared_ptr<Held> h);
};

// An agent's failed reply as the model should read it: errno name, message, and what it means here.
std::string agent_failure(const std::string& what, const agent::Frame& reply);
// The agent's start request for run_command/start_command arguments.
nlohmann::json start_request(const nlohmann::json& args, bool with_stdin);

}  // namespace exg::mcp
