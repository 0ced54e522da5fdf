// run_command, start_command and read_output over serve's envd:
// process.Process/Start streams a command's events (start with its pid, data,
// end); its Connect-Timeout-Ms is run_command's timeout, which the server
// enforces (a kill of the command's process group, the stream ended with
// deadline_exceeded). stdin goes in through SendInput and CloseStdin, a kill
// through SendSignal.
#include <cmath>

#include "mcp/remote_sandboxes.hpp"
#include "mcp/tool_arguments.hpp"
#include "serve/connect_rpc.hpp"

namespace exg::mcp {

namespace {

namespace http = boost::beast::http;
using Clock = std::chrono::steady_clock;

constexpr size_t kStdinChunk = 512 * 1024;  // under serve's 1 MiB a SendInput

// An end event -> the exit status as the agent gives it (128+N after signal N) and the signal.
void exit_of(const nlohmann::json& end, int* status, int* signal) {
  if (end.value("exited", false)) {
    *status = end.value("exitCode", 0);
    *signal = 0;
    return;
  }
  std::string st = end.value("status", "");  // "signal: killed", "signal: terminated", "signal: signal 6"
  int sig = 0;
  if (st.ends_with("killed")) sig = 9;
  else if (st.ends_with("terminated")) sig = 15;
  else if (auto sp = st.rfind(' '); sp != std::string::npos) sig = std::atoi(st.c_str() + sp + 1);
  *signal = sig;
  *status = sig ? 128 + sig : -1;
}

// A data event's bytes, and whether they are stderr's.
std::optional<std::pair<bool, std::string>> data_of(const nlohmann::json& data) {
  for (const char* k : {"stdout", "stderr", "pty"})
    if (auto it = data.find(k); it != data.end() && it->is_string())
      if (auto bytes = serve::rpc::base64_decode(it->get<std::string>())) return std::pair{std::string(k) == "stderr", std::move(*bytes)};
  return std::nullopt;
}

// A start that failed, with standalone's hint for a program not found.
std::string start_failure(const std::string& failure) {
  if (failure.find("ENOENT") != std::string::npos && failure.starts_with("start ")) return failure + "; give a path, or a shell line as \"command\"";
  return failure;
}

// One run_command: its output within the limit, its end, its timeout (the server's), cancellation.
struct RemoteRun {
  ToolCallPtr call;
  RunOutcome o;
  size_t limit = kDefaultMaxOutput;
  int pid = 0;
  bool ended = false, cancelled = false;
  HttpCallPtr stream;
  Clock::time_point started = Clock::now();
};

}  // namespace

HttpCallPtr RemoteSandboxes::start_process(const std::shared_ptr<Held>& h, const nlohmann::json& args, std::optional<double> timeout_s,
                                           std::function<void(const nlohmann::json&)> on_event, Reply done) {
  std::vector<std::string> argv = command_argv(args);
  nlohmann::json proc = {{"cmd", argv[0]}, {"args", std::vector<std::string>(argv.begin() + 1, argv.end())}};
  if (args.contains("cwd")) proc["cwd"] = args["cwd"];
  if (args.contains("env")) proc["envs"] = args["env"];
  bool with_stdin = args.contains("stdin");
  HttpRequest r = envd_request(*h, http::verb::post, "/process.Process/Start");
  r.content_type = "application/connect+json";
  r.headers.push_back({"Connect-Protocol-Version", "1"});
  r.body = serve::rpc::envelope(nlohmann::json{{"process", proc}, {"stdin", with_stdin}}.dump(), 0);
  if (timeout_s) {
    auto ms = static_cast<int64_t>(*timeout_s * 1000 + 0.5);  // bounded by the tool's schema; no libm (CMakeLists.txt)
    r.headers.push_back({"Connect-Timeout-Ms", std::to_string(ms)});
    r.deadline = std::chrono::milliseconds(ms) + std::chrono::seconds(30);  // the server's end of it comes first
  } else {
    r.deadline = std::nullopt;  // a background command: as long as it runs
  }
  std::string id = h->id;
  std::weak_ptr<Held> weak = h;
  auto stdin_data = with_stdin ? std::make_shared<std::string>(args["stdin"].get<std::string>()) : nullptr;
  return http_.stream(
      std::move(r),
      [this, weak, stdin_data, on_event](const nlohmann::json& m) {
        auto ev = m.find("event");
        if (ev == m.end() || !ev->is_object()) return;
        if (auto s = ev->find("start"); s != ev->end() && stdin_data)
          if (auto held = weak.lock()) {
            // Then the bytes, in order, and the end of stdin.
            int pid = s->value("pid", 0);
            auto step = std::make_shared<std::function<void(size_t)>>();
            *step = [this, held, pid, stdin_data, step](size_t off) {
              if (off >= stdin_data->size()) {
                rpc(held, "process.Process/CloseStdin", {{"process", {{"pid", pid}}}}, [](const nlohmann::json&, const std::optional<std::string>&) {});
                *step = nullptr;  // this closure (the chain held itself): nothing of it is used after
                return;
              }
              std::string piece = stdin_data->substr(off, kStdinChunk);
              rpc(held, "process.Process/SendInput", {{"process", {{"pid", pid}}}, {"input", {{"stdin", serve::rpc::base64_encode(piece)}}}},
                  [step, off](const nlohmann::json&, const std::optional<std::string>&) {
                    if (*step) (*step)(off + kStdinChunk);
                  });
            };
            (*step)(0);
          }
        on_event(*ev);
      },
      [this, id, done](HttpAnswer a) {
        if (sandbox_gone(a, Plane::Envd)) forget(id);
        done(a, serve_failure(a, Plane::Envd));
      });
}

void RemoteSandboxes::signal(const std::shared_ptr<Held>& h, int pid) {
  rpc(h, "process.Process/SendSignal", {{"process", {{"pid", pid}}}, {"signal", "SIGNAL_SIGKILL"}},
      [](const nlohmann::json&, const std::optional<std::string>&) {});
}

void RemoteSandboxes::run_command(ToolCallPtr c, std::shared_ptr<Held> h) {
  auto run = std::make_shared<RemoteRun>();
  run->call = c;
  run->limit = c->args.value("max_output_bytes", kDefaultMaxOutput);
  run->o.timeout_s = c->args.value("timeout_seconds", kDefaultCommandTimeoutS);
  run->stream = start_process(
      h, c->args, run->o.timeout_s,
      [this, run, h](const nlohmann::json& ev) {
        if (auto s = ev.find("start"); s != ev.end()) {
          run->pid = s->value("pid", 0);
          if (run->cancelled) {  // cancelled before it started: killed now
            signal(h, run->pid);
            if (run->stream) run->stream->cancel();
            run->stream = nullptr;
            return;
          }
        }
        if (auto d = ev.find("data"); d != ev.end())
          if (auto bytes = data_of(*d)) {
            auto& [is_err, b] = *bytes;
            (is_err ? run->o.err_bytes : run->o.out_bytes) += b.size();
            keep(is_err ? run->o.err : run->o.out, b, run->limit);
          }
        if (auto e = ev.find("end"); e != ev.end()) {
          exit_of(*e, &run->o.exit_code, &run->o.signal);
          run->ended = true;
        }
      },
      [this, run, c, h](const HttpAnswer& a, const std::optional<std::string>& failure) {
        run->stream = nullptr;
        if (run->cancelled) return;
        run->o.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - run->started).count();
        // The result, with what the sandbox refused meanwhile (serve keeps the audit log).
        auto answer = [this, run, c, h] {
          take_refusals(h, [run, c](nlohmann::json refused, std::string note) {
            run->o.refusals = std::move(refused);
            run->o.more_note = std::move(note);
            c->reply(ToolOutcome::ok(run_result(run->o)));
          });
        };
        if (a.rpc_error && a.rpc_error->code == "deadline_exceeded" && run->pid) {
          // The server killed it at timeout_seconds (SIGKILL to its process group).
          run->o.timed_out = true;
          run->o.signal = 9;
          run->o.exit_code = 128 + 9;
          return answer();
        }
        if (run->ended && !failure) return answer();
        if (!failure) return c->reply(ToolOutcome::error("run_command: exguardian serve's stream ended without the command's end"));
        if (!run->pid) return c->reply(ToolOutcome::error("run_command: " + start_failure(*failure)));
        c->reply(ToolOutcome::error("run_command: " + *failure));
      });
  c->on_cancel = [this, run, h] {
    run->cancelled = true;
    if (!run->pid) return;  // its start event kills it
    signal(h, run->pid);
    if (run->stream) run->stream->cancel();
    run->stream = nullptr;
  };
}

void RemoteSandboxes::start_command(ToolCallPtr c, std::shared_ptr<Held> h) {
  auto b = std::make_shared<Background>();
  b->argv = command_argv(c->args);
  auto replied = std::make_shared<bool>(false);
  std::weak_ptr<Held> weak = h;
  b->stream = start_process(
      h, c->args, std::nullopt,
      [b, c, replied, weak](const nlohmann::json& ev) {
        if (auto s = ev.find("start"); s != ev.end() && !*replied) {
          *replied = true;
          b->pid = s->value("pid", 0);
          if (auto held = weak.lock()) {
            // Exited ones beyond the most recent 64 go first: the map stays bounded.
            size_t exited = 0;
            for (auto& [p, x] : held->background) exited += !x->running;
            for (auto it = held->background.begin(); exited > 64 && it != held->background.end();)
              if (!it->second->running) it = held->background.erase(it), --exited;
              else ++it;
            held->background[b->pid] = b;
          }
          c->reply(ToolOutcome::ok({{"pid", b->pid}}));
        }
        if (auto d = ev.find("data"); d != ev.end())
          if (auto bytes = data_of(*d)) b->add(bytes->first, bytes->second);
        if (auto e = ev.find("end"); e != ev.end()) {
          int status = -1, sig = 0;
          exit_of(*e, &status, &sig);
          b->exited(status, sig);
        }
      },
      [b, c, replied](const HttpAnswer&, const std::optional<std::string>& failure) {
        b->stream = nullptr;
        if (!*replied) {
          *replied = true;
          return c->reply(ToolOutcome::error("start_command: " + start_failure(failure.value_or("exguardian serve's stream ended before the command started"))));
        }
        b->exited(-1, 0);  // the stream lost before its end (the sandbox ended): no status to tell
      });
  c->on_cancel = [b, replied] {
    *replied = true;
    if (b->stream) b->stream->cancel();
    b->stream = nullptr;
  };
}

void RemoteSandboxes::read_output(ToolCallPtr c, std::shared_ptr<Held> h) {
  auto b = background_of(h->background, c);
  if (!b) return;
  int pid = b->pid;
  double wait_s = c->args.value("wait_seconds", 0.0);
  if (c->args.value("kill", false) && b->running) {
    signal(h, pid);
    if (wait_s <= 0) wait_s = 5;  // its exit is what the caller wants to see
  }
  answer_when_ended(io_, b, wait_s, c, [this, b, c, h] {
    nlohmann::json r = b->take();
    take_refusals(h, [c, r](nlohmann::json refused, std::string note) mutable {
      r["refusals"] = std::move(refused);
      if (!note.empty()) r["note"] = r.contains("note") ? r["note"].get<std::string>() + " " + note : note;
      c->reply(ToolOutcome::ok(r));
    });
  });
}

}  // namespace exg::mcp
