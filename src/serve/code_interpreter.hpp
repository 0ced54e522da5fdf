// E2B's code interpreter (@e2b/code-interpreter) for sandboxes of a template
// with "codeInterpreter" (code-interpreter-v1 is built in): a small server,
// Python's standard library only, started INSIDE the sandbox when it is
// created (a warm pool's before its tenant is known, its default kernel up), listening on 127.0.0.1:49999 of the sandbox's own network
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
#include <cstdint>
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

// The interpreter of one sandbox as serve follows it: its process (the
// agent's pid), its default Python kernel, what it said on stdout.
struct CodeInterpreter {
  int pid = 0;
  int64_t kernel_pid = 0;  // the default Python kernel's pid inside the sandbox (its "ready" line)
  bool ready = false, taken = false, ended = false;
  std::string partial;     // a stdout line not ended yet
  std::function<void(std::optional<std::string> error)> on_ready, on_taken;  // waiters, each once
  std::function<void(const std::string& why)> on_end;
};

// Writes the program into the sandbox and starts it there (through the
// sandbox's agent); `ready` once its default Python kernel is up (nullopt), or
// why not. `ended` when the interpreter ends later (a warm pool's sandbox then
// is not handed out: its kernel ended before the hand-over).
void start_code_interpreter(const std::shared_ptr<Sandbox>& sb, std::function<void(std::optional<std::string> error)> ready,
                            std::function<void(const std::string& why)> ended);

// Hands the running interpreter to the sandbox's tenant: its line on the
// interpreter's stdin carries the sandbox's envVars (each kernel sets them at
// its first run, as E2B's interpreter does with envd's /envs); no run starts
// before it. `done` with nullopt once the interpreter took them with its
// kernel alive, else why not.
void hand_over_code_interpreter(const std::shared_ptr<Sandbox>& sb, std::function<void(std::optional<std::string> error)> done);

}  // namespace exg::serve
