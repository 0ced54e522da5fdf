// E2B's code interpreter (@e2b/code-interpreter) for sandboxes of a template
// with "codeInterpreter" (code-interpreter-v1 is built in): a small server,
// Python's standard library only, started INSIDE the sandbox when it is
// created, listening on 127.0.0.1:49999 of the sandbox's own network
// namespace, as the sandbox's user, in its cgroup (counted by its limits).
// It speaks the code interpreter's protocol: POST /execute streams
// newline-delimited JSON (number_of_executions, stdout, stderr, result with
// text and whatever _repr_html_/_repr_png_/... the value offers, error with
// name, value and traceback, keepalive, end_of_execution); /contexts create,
// list, DELETE /contexts/ID, POST /contexts/ID/restart. Each context is a
// kernel process of its own (a persistent namespace: Python, exec() of the
// cell and eval() of its last expression; or JavaScript, node's vm), interrupted
// (SIGINT) when the caller goes away. serve reaches it as any port of the sandbox (port_proxy.cpp).
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace exg::serve {

struct Sandbox;

inline constexpr char kCodeInterpreterPort[] = "49999";
// Where the sandbox gets the server's program (its own /tmp: no other sandbox sees it).
inline constexpr char kCodeInterpreterPath[] = "/tmp/.exg-code-interpreter.py";

// The server's program (Python 3).
const char* code_interpreter_program();

// Writes the program into the sandbox and starts it there (through the
// sandbox's agent); `done` with nullopt once it runs, else why not.
void start_code_interpreter(const std::shared_ptr<Sandbox>& sb, std::function<void(std::optional<std::string> error)> done);

}  // namespace exg::serve
