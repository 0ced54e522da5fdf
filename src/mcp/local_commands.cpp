// run_command, start_command and read_output over the sandbox's agent.
#include <boost/asio/steady_timer.hpp>

#include "mcp/local_sandboxes.hpp"
#include "sandbox/refusals.hpp"
#include "mcp/tool_arguments.hpp"

namespace exg::mcp {

namespace {

using Clock = std::chrono::steady_clock;

void exit_fields(const nlohmann::json& ev, int* status, int* signal) {
  *status = ev.value("status", -1);
  *signal = ev.contains("signal") ? ev.value("signal", 0) : 0;
}

// One run_command: output, limits, timeout, cancellation.
struct Run : std::enable_shared_from_this<Run> {
  ToolCallPtr call;
  std::shared_ptr<LocalSandboxes::Held> h;
  boost::asio::steady_timer timer;
  int pid = 0;
  uint64_t token = 0;
  size_t limit = kDefaultMaxOutput;
  std::string out, err;
  uint64_t out_bytes = 0, err_bytes = 0;
  bool timed_out = false, cancelled = false, done = false;
  double timeout_s = kDefaultCommandTimeoutS;
  uint64_t audit_from = 0;
  Clock::time_point started = Clock::now();

  Run(boost::asio::io_context& io, ToolCallPtr c, std::shared_ptr<LocalSandboxes::Held> held)
      : call(std::move(c)), h(std::move(held)), timer(io) {}

  void kill() {
    if (pid > 0 && h->sb->agent) h->sb->agent->call(agent::request::signal(pid, "KILL", /*group=*/true), {}, [](const agent::Frame&) {});
  }

  void started_as(int p) {
    pid = p;
    auto self = shared_from_this();
    token = h->sb->agent->subscribe_process(pid, [self](const agent::Frame& f) { self->event(f); });
    if (cancelled) return kill();
    timer.expires_after(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
    timer.async_wait([self](boost::system::error_code ec) {
      if (ec || self->done) return;
      self->timed_out = true;
      self->kill();  // its exit event then finishes the call
    });
  }

  void event(const agent::Frame& f) {
    if (done) return;
    std::string ev = f.header.value("event", "");
    if (ev == "stdout") out_bytes += f.payload.size(), keep(out, f.payload, limit);
    else if (ev == "stderr") err_bytes += f.payload.size(), keep(err, f.payload, limit);
    else if (ev == "exit") finish(&f.header);
    else if (ev == "closed") finish(nullptr);
  }

  void finish(const nlohmann::json* exit) {
    done = true;
    timer.cancel();
    if (h->sb->agent) h->sb->agent->unsubscribe(token);
    if (!exit) return call->reply(ToolOutcome::error("run_command: the sandbox ended while the command ran (its timeout, or destroy_sandbox)"));
    RunOutcome o;
    exit_fields(*exit, &o.exit_code, &o.signal);
    o.timed_out = timed_out;
    o.timeout_s = timeout_s;
    o.out = std::move(out), o.err = std::move(err);
    o.out_bytes = out_bytes, o.err_bytes = err_bytes;
    o.duration_ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started).count();
    o.refusals = sandbox::refusals_since(h->sb->audit_log, audit_from);
    call->reply(ToolOutcome::ok(run_result(o)));
  }
};

// The agent's start, then the stdin bytes (if any) and its end.
void start_process(const std::shared_ptr<LocalSandboxes::Held>& h, const nlohmann::json& args,
                   std::function<void(int pid, const agent::Frame& reply)> then) {
  bool with_stdin = args.contains("stdin");
  auto agent = h->sb->agent;
  agent->call(start_request(args, with_stdin), {}, [agent, args, with_stdin, then](const agent::Frame& r) {
    int pid = r.header.value("ok", false) ? r.header.value("pid", 0) : 0;
    if (pid > 0 && with_stdin) {
      agent->call(agent::request::input(pid), args["stdin"].get<std::string>(), [](const agent::Frame&) {});
      agent->call(agent::request::close_stdin(pid), {}, [](const agent::Frame&) {});
    }
    then(pid, r);
  });
}

std::string start_failure(const nlohmann::json& args, const agent::Frame& r) {
  std::string prog = command_argv(args)[0];
  std::string text = agent_failure("start " + prog, r);
  if (serve::reply_errno(r) == "ENOENT") text += "; give a path, or a shell line as \"command\"";
  return text;
}

}  // namespace

nlohmann::json start_request(const nlohmann::json& args, bool with_stdin) {
  agent::request::Start s{.argv = command_argv(args), .stdin_open = with_stdin};
  if (args.contains("cwd")) s.cwd = args["cwd"].get<std::string>();
  if (auto e = args.find("env"); e != args.end()) {
    s.env.emplace();
    for (auto& [k, v] : e->items()) s.env->push_back(k + "=" + v.get<std::string>());
  }
  return agent::request::start(s);
}

void LocalSandboxes::run_command(ToolCallPtr c, std::shared_ptr<Held> h) {
  auto run = std::make_shared<Run>(io_, c, h);
  run->limit = c->args.value("max_output_bytes", kDefaultMaxOutput);
  run->timeout_s = c->args.value("timeout_seconds", kDefaultCommandTimeoutS);
  run->audit_from = sandbox::audit_offset(h->sb->audit_log);
  c->on_cancel = [run] {
    run->cancelled = true;
    run->done = true;  // no reply after a cancel
    run->timer.cancel();
    run->kill();
    if (run->h->sb->agent && run->token) run->h->sb->agent->unsubscribe(run->token);
  };
  start_process(h, c->args, [run, c](int pid, const agent::Frame& r) {
    if (pid <= 0) return c->reply(ToolOutcome::error("run_command: " + start_failure(c->args, r)));
    run->started_as(pid);
  });
}

void LocalSandboxes::start_command(ToolCallPtr c, std::shared_ptr<Held> h) {
  uint64_t from = sandbox::audit_offset(h->sb->audit_log);
  start_process(h, c->args, [this, c, h, from](int pid, const agent::Frame& r) {
    if (pid <= 0) return c->reply(ToolOutcome::error("start_command: " + start_failure(c->args, r)));
    // Exited ones beyond the most recent 64 go first: the map stays bounded.
    size_t exited = 0;
    for (auto& [p, b] : h->background) exited += !b->running;
    for (auto it = h->background.begin(); exited > 64 && it != h->background.end();)
      if (!it->second->running) it = h->background.erase(it), --exited;
      else ++it;
    auto b = std::make_shared<Background>();
    b->pid = pid;
    b->argv = command_argv(c->args);
    b->audit_from = from;
    std::weak_ptr<Background> wb = b;
    auto agent = h->sb->agent;
    b->token = agent->subscribe_process(pid, [wb, agent](const agent::Frame& f) {
      auto b = wb.lock();
      if (!b) return;
      std::string ev = f.header.value("event", "");
      if (ev == "stdout" || ev == "stderr") b->add(ev == "stderr", f.payload);
      else if (ev == "exit" || ev == "closed") {
        int status = -1, signal = 0;
        if (ev == "exit") exit_fields(f.header, &status, &signal);
        agent->unsubscribe(b->token);
        b->exited(status, signal);
      }
    });
    h->background[pid] = b;
    c->reply(ToolOutcome::ok({{"pid", pid}}));
  });
}

void LocalSandboxes::read_output(ToolCallPtr c, std::shared_ptr<Held> h) {
  auto b = background_of(h->background, c);
  if (!b) return;
  int pid = b->pid;
  double wait_s = c->args.value("wait_seconds", 0.0);
  bool kill = c->args.value("kill", false);
  auto answer = [b, c, h] {
    nlohmann::json r = b->take();
    r["refusals"] = sandbox::refusals_since(h->sb->audit_log, b->audit_from, &b->audit_from);
    c->reply(ToolOutcome::ok(r));
  };
  if (kill && b->running) {
    h->sb->agent->call(agent::request::signal(pid, "KILL", /*group=*/true), {}, [](const agent::Frame&) {});
    if (wait_s <= 0) wait_s = 5;  // its exit is what the caller wants to see
  }
  answer_when_ended(io_, b, wait_s, c, answer);
}

}  // namespace exg::mcp
