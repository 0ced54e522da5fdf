// Where `exguardian mcp` carries its tools out: sandboxes it holds itself
// (LocalSandboxes, standalone) or those of a running `exguardian serve`
// (RemoteSandboxes, --server). Either takes every tool call (a ToolRunner)
// and, when the session ends, destroys every sandbox it created.
#pragma once
#include <functional>
#include <string>

#include "mcp/server.hpp"

namespace exg::mcp {

class Sandboxes : public ToolRunner {
 public:
  // Ends every sandbox of this session (the client went away); `done` when all are gone.
  virtual void shutdown(std::function<void()> done) = 0;
};

// A tool call to the method of an implementation that does it, the same for
// both: T has create, list and destroy, held(c) (the sandbox the call names,
// or null after replying with the error) and one method per tool inside a
// sandbox. Calls reach a method only with arguments that fit the tool's schema.
template <class T>
void dispatch_tool(T& s, const ToolCallPtr& c) {
  const std::string& n = c->name;
  if (n == "create_sandbox") return s.create(c);
  if (n == "list_sandboxes") return s.list(c);
  if (n == "destroy_sandbox") return s.destroy(c);
  auto h = s.held(c);
  if (!h) return;
  if (n == "run_command") return s.run_command(c, h);
  if (n == "start_command") return s.start_command(c, h);
  if (n == "read_output") return s.read_output(c, h);
  if (n == "read_file") return s.read_file(c, h);
  if (n == "write_file") return s.write_file(c, h);
  if (n == "list_files") return s.list_files(c, h);
  if (n == "stat_file") return s.stat_file(c, h);
  if (n == "remove_file") return s.remove_file(c, h);
  if (n == "evidence") return s.evidence(c, h);
  c->reply(ToolOutcome::error(n + ": no such tool here"));
}

// The error for a sandbox_id this session does not hold.
inline std::string no_such_sandbox(const std::string& id) {
  return "sandbox_id " + id + ": no such sandbox here (list_sandboxes shows them; one ends at its timeout or destroy_sandbox)";
}

}  // namespace exg::mcp
