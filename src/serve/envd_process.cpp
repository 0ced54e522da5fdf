// envd's process.Process service (spec/envd/process/process.proto) over the
// sandbox's agent: Start and Connect stream a process's events (start, data,
// end; keepalives while it is quiet), List, SendInput, SendSignal, CloseStdin
// and Update (the pty's size) are unary. A stream's Connect-Timeout-Ms is the
// command's own timeout: when it passes, the process is killed and the stream
// ends with deadline_exceeded. A client that goes away leaves its process
// running (E2B's background commands; Connect finds them again).
#include <boost/asio/steady_timer.hpp>

#include "serve/base_tools.hpp"
#include "serve/service.hpp"

namespace exg::serve {

namespace {

using rpc::Code;
using rpc::RpcError;

constexpr auto kKeepalive = std::chrono::seconds(20);

// {"process": {"pid": N} | {"tag": "t"}} -> the pid, or an error.
std::optional<int> select_process(const nlohmann::json& msg, const Sandbox& sb, RpcError* err) {
  const nlohmann::json* sel = rpc::field(msg, "process");
  if (!sel || !sel->is_object()) {
    *err = {Code::InvalidArgument, "process: missing (a selector {pid} or {tag})"};
    return std::nullopt;
  }
  if (const auto* pid = rpc::field(*sel, "pid")) {
    if (!pid->is_number_unsigned() || pid->get<uint64_t>() == 0 || pid->get<uint64_t>() > 4194304) {
      *err = {Code::InvalidArgument, "process.pid: expected a process id"};
      return std::nullopt;
    }
    int p = pid->get<int>();
    if (!sb.processes.count(p)) {
      *err = {Code::NotFound, "process with pid " + std::to_string(p) + " not found"};
      return std::nullopt;
    }
    return p;
  }
  if (const auto* tag = rpc::field(*sel, "tag")) {
    if (!tag->is_string()) {
      *err = {Code::InvalidArgument, "process.tag: expected a string"};
      return std::nullopt;
    }
    for (auto& [p, info] : sb.processes)
      if (info.tag == tag->get<std::string>()) return p;
    *err = {Code::NotFound, "process with tag " + tag->get<std::string>() + " not found"};
    return std::nullopt;
  }
  *err = {Code::InvalidArgument, "process: expected {pid} or {tag}"};
  return std::nullopt;
}

nlohmann::json end_event(const nlohmann::json& exit) {
  nlohmann::json end;
  if (exit.contains("code")) {
    int code = exit.value("code", 0);
    end = {{"exitCode", code}, {"exited", true}, {"status", "exit status " + std::to_string(code)}};
  } else {
    int sig = exit.value("signal", 0);
    std::string name = sig == 9 ? "killed" : sig == 15 ? "terminated" : "signal " + std::to_string(sig);
    end = {{"exitCode", -1}, {"exited", false}, {"status", "signal: " + name}};
  }
  return {{"event", {{"end", end}}}};
}

// Streams one process's events over an open ServerStream until its exit, the
// client leaving, the deadline, or the sandbox's end.
struct ProcessStream : std::enable_shared_from_this<ProcessStream> {
  std::shared_ptr<Sandbox> sb;
  rpc::ServerStream stream;
  int pid = 0;
  bool pty = false;
  uint64_t token = 0;
  boost::asio::steady_timer keepalive, deadline;
  bool done = false;
  bool has_deadline = false;
  bool detached = false;  // the client left; the deadline still holds

  ProcessStream(boost::asio::io_context& io, std::shared_ptr<Sandbox> s, ExchangePtr ex)
      : sb(std::move(s)), stream(std::move(ex)), keepalive(io), deadline(io) {}

  void run(std::optional<std::chrono::milliseconds> timeout) {
    auto self = shared_from_this();
    token = sb->agent->subscribe_process(pid, [self](const agent::Frame& f) { self->on_event(f); });
    stream.exchange().on_close = [self] { self->finish(std::nullopt, false); };
    stream.send({{"event", {{"start", {{"pid", pid}}}}}});
    tick();
    if (timeout && timeout->count() > 0) {
      has_deadline = true;
      deadline.expires_after(*timeout);
      deadline.async_wait([self](boost::system::error_code ec) {
        if (ec || (self->done && !self->detached)) return;
        // The command's timeout, also when its client has already given up on it.
        self->detached = false;
        if (self->sb->agent) self->sb->agent->unsubscribe(self->token);
        if (self->sb->agent && self->sb->processes.count(self->pid))
          // The group too: a shell line's children end with it (`sh -c "sleep 30; ..."`).
          self->sb->agent->call(agent::request::signal(self->pid, "KILL", /*group=*/true), {}, [](const agent::Frame&) {});
        self->finish(RpcError{Code::DeadlineExceeded, "the command's timeout passed: it was killed"}, true);
      });
    }
  }

  void tick() {
    keepalive.expires_after(kKeepalive);
    keepalive.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec || self->done) return;
      self->stream.send({{"event", {{"keepalive", nlohmann::json::object()}}}});
      self->tick();
    });
  }

  void on_event(const agent::Frame& f) {
    std::string ev = f.header.value("event", "");
    if (detached && (ev == "exit" || ev == "closed")) {  // its deadline need not fire any more
      detached = false;
      deadline.cancel();
      if (sb->agent) sb->agent->unsubscribe(token);
      return;
    }
    if (done) return;
    if (ev == "stdout" || ev == "stderr") {
      std::string kind = pty ? "pty" : ev;
      stream.send({{"event", {{"data", {{kind, rpc::base64_encode(f.payload)}}}}}});
    } else if (ev == "exit") {
      stream.send(end_event(f.header));
      finish(std::nullopt, true);
    } else if (ev == "closed") {
      finish(RpcError{Code::Unavailable, kSandboxEnded}, true);
    }
  }

  void finish(const std::optional<RpcError>& err, bool send_end) {
    if (done) return;
    done = true;
    keepalive.cancel();
    // A client that left keeps its command's deadline: the process is still
    // watched for its exit, and killed if the deadline comes first.
    if (!send_end && has_deadline) {
      detached = true;
    } else {
      if (sb->agent) sb->agent->unsubscribe(token);
      deadline.cancel();
    }
    stream.exchange().on_close = nullptr;
    if (send_end) stream.end(err);
  }
};

}  // namespace

// The method is the path's last segment (/process.Process/Start).
void Service::process_call(Call& c) { process_rpc(c.req, c.ex, c.sb, c.path.substr(c.path.rfind('/') + 1), c.route.label); }

void Service::process_rpc(Request& req, ExchangePtr ex, const std::shared_ptr<Sandbox>& sb, const std::string& method,
                          const std::string& route) {
  bool streaming = method == "Start" || method == "Connect";
  auto fail_with = [&](const RpcError& e) { rpc_fail(req, ex, route, streaming, e); };
  auto msg = rpc_message(req, ex, route, method, streaming);
  if (!msg) return;

  if (method == "Start") {
    if (auto ue = user_error(req, "", *sb)) return fail_with({Code::PermissionDenied, *ue});
    const nlohmann::json* p = rpc::field(*msg, "process");
    if (!p || !p->is_object()) return fail_with({Code::InvalidArgument, "process: missing"});
    Process info;
    const nlohmann::json* cmd = rpc::field(*p, "cmd");
    if (!cmd || !cmd->is_string() || cmd->get<std::string>().empty()) return fail_with({Code::InvalidArgument, "process.cmd: expected a command"});
    info.cmd = cmd->get<std::string>();
    std::vector<std::string> argv = {info.cmd};
    if (const auto* a = rpc::field(*p, "args")) {
      if (!a->is_array()) return fail_with({Code::InvalidArgument, "process.args: expected an array of strings"});
      for (auto& x : *a) {
        if (!x.is_string()) return fail_with({Code::InvalidArgument, "process.args: expected strings"});
        info.args.push_back(x.get<std::string>());
        argv.push_back(x.get<std::string>());
      }
    }
    // BASH_ENV: the base tools on PATH after /etc/profile has set it (base_tools.hpp); a command's own wins.
    std::vector<std::string> env = {"HOME=" + sb->home, "USER=user", "LOGNAME=user", "BASH_ENV=" + base_tools_bash_env(*sb)};
    for (auto& [k, v] : sb->env_vars) env.push_back(k + "=" + v);
    if (const auto* e = rpc::field(*p, "envs")) {
      if (!e->is_object()) return fail_with({Code::InvalidArgument, "process.envs: expected an object of strings"});
      for (auto& [k, v] : e->items()) {
        if (!v.is_string() || k.empty() || k.find('=') != std::string::npos)
          return fail_with({Code::InvalidArgument, "process.envs." + k + ": expected NAME: \"value\""});
        env.push_back(k + "=" + v.get<std::string>());
      }
      info.envs = *e;
    }
    std::string cwd = sb->home;
    if (const auto* c = rpc::field(*p, "cwd")) {
      if (!c->is_string()) return fail_with({Code::InvalidArgument, "process.cwd: expected a string"});
      if (!c->get<std::string>().empty()) cwd = absolute_path(*sb, c->get<std::string>());
    }
    info.cwd = cwd;
    agent::request::Start h{.argv = argv, .env = env, .cwd = cwd};
    bool want_stdin = false;
    if (const auto* s = rpc::field(*msg, "stdin")) want_stdin = s->is_boolean() && s->get<bool>();
    if (const auto* pty = rpc::field(*msg, "pty"); pty && pty->is_object()) {
      info.pty = true;
      h.pty = true;
      want_stdin = true;
      if (const auto* size = rpc::field(*pty, "size"); size && size->is_object()) {
        int cols = size->value("cols", 80), rows = size->value("rows", 24);
        if (cols < 1 || cols > 1000 || rows < 1 || rows > 1000) return fail_with({Code::InvalidArgument, "pty.size: cols and rows 1..1000"});
        h.cols = static_cast<unsigned>(cols), h.rows = static_cast<unsigned>(rows);
      }
    }
    h.stdin_open = want_stdin;
    if (const auto* tag = rpc::field(*msg, "tag"); tag && tag->is_string()) info.tag = tag->get<std::string>();
    auto timeout = rpc::timeout_of(req);
    auto t0 = std::chrono::steady_clock::now();
    sb->agent->call(agent::request::start(h), {}, [this, ex, sb, info, timeout, t0, route](const agent::Frame& r) mutable {
      if (!r.header.value("ok", false)) {
        std::string e = reply_errno(r);
        Code c = e == "ENOENT" ? Code::NotFound : e == "EPERM" ? Code::PermissionDenied : rpc::code_of_errno(e);
        metrics_.count_request(route, 200);
        rpc::ServerStream s(ex);
        s.end(RpcError{c, "start " + info.cmd + ": " + reply_error_text(r)});
        return;
      }
      int pid = r.header.value("pid", 0);
      ++metrics_.commands_started;
      metrics_.observe_start(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      metrics_.count_request(route, 200);
      // The table entry lives until the exit, whoever watches.
      std::weak_ptr<Sandbox> weak = sb;
      info.exit_token = sb->agent->subscribe_process(pid, [weak, pid](const agent::Frame& f) {
        auto s = weak.lock();
        std::string ev = f.header.value("event", "");
        if (!s || (ev != "exit" && ev != "closed")) return;
        auto it = s->processes.find(pid);
        if (it == s->processes.end()) return;
        uint64_t tok = it->second.exit_token;
        s->processes.erase(it);
        if (s->agent) s->agent->unsubscribe(tok);
      });
      bool pty = info.pty;
      sb->processes[pid] = std::move(info);
      auto ps = std::make_shared<ProcessStream>(io_, sb, ex);
      ps->pid = pid;
      ps->pty = pty;
      ps->run(timeout);
    });
    return;
  }

  RpcError se{};
  if (method == "List") {
    nlohmann::json list = nlohmann::json::array();
    for (auto& [pid, info] : sb->processes) {
      nlohmann::json cfg = {{"cmd", info.cmd}, {"args", info.args}, {"envs", info.envs}, {"cwd", info.cwd}};
      nlohmann::json pi = {{"config", cfg}, {"pid", pid}};
      if (!info.tag.empty()) pi["tag"] = info.tag;
      list.push_back(pi);
    }
    return reply(ex, route, rpc::unary_ok({{"processes", list}}));
  }
  auto pid = select_process(*msg, *sb, &se);
  if (!pid) return fail_with(se);

  if (method == "Connect") {
    metrics_.count_request(route, 200);
    auto ps = std::make_shared<ProcessStream>(io_, sb, ex);
    ps->pid = *pid;
    ps->pty = sb->processes[*pid].pty;
    ps->run(rpc::timeout_of(req));
    return;
  }

  nlohmann::json h;
  std::string payload;
  if (method == "SendInput") {
    const nlohmann::json* in = rpc::field(*msg, "input");
    if (!in || !in->is_object()) return fail_with({Code::InvalidArgument, "input: missing"});
    const nlohmann::json* data = rpc::field(*in, "stdin");
    if (!data) data = rpc::field(*in, "pty");
    if (!data || !data->is_string()) return fail_with({Code::InvalidArgument, "input: expected {stdin} or {pty} bytes (base64)"});
    auto bytes = rpc::base64_decode(data->get<std::string>());
    if (!bytes) return fail_with({Code::InvalidArgument, "input: not valid base64"});
    if (bytes->size() > agent::kMaxPayload) return fail_with({Code::InvalidArgument, "input: at most 1 MiB a call"});
    h = agent::request::input(*pid);
    payload = std::move(*bytes);
  } else if (method == "SendSignal") {
    const nlohmann::json* s = rpc::field(*msg, "signal");
    int sig = 0;
    if (s && s->is_number_integer()) sig = s->get<int>();
    else if (s && s->is_string()) sig = *s == "SIGNAL_SIGKILL" ? 9 : *s == "SIGNAL_SIGTERM" ? 15 : 0;
    if (sig != 9 && sig != 15) return fail_with({Code::InvalidArgument, "signal: expected SIGNAL_SIGKILL or SIGNAL_SIGTERM"});
    // The command's process group with it: what its shell started ends too.
    h = agent::request::signal(*pid, sig, /*group=*/true);
  } else if (method == "CloseStdin") {
    h = agent::request::close_stdin(*pid);
  } else if (method == "Update") {
    const nlohmann::json* pty = rpc::field(*msg, "pty");
    const nlohmann::json* size = pty ? rpc::field(*pty, "size") : nullptr;
    if (!size || !size->is_object()) return reply(ex, route, rpc::unary_ok(nlohmann::json::object()));  // nothing to change
    int cols = size->value("cols", 0), rows = size->value("rows", 0);
    if (cols < 1 || cols > 1000 || rows < 1 || rows > 1000) return fail_with({Code::InvalidArgument, "pty.size: cols and rows 1..1000"});
    h = agent::request::resize(*pid, static_cast<unsigned>(rows), static_cast<unsigned>(cols));
  } else {
    return fail_with({Code::Unimplemented, "process.Process/" + method + ": no such method"});
  }
  sb->agent->call(h, payload, [this, ex, route](const agent::Frame& r) mutable {
    if (!r.header.value("ok", false)) {
      std::string e = reply_errno(r);
      return reply(ex, route, rpc::unary_error({e == "ESRCH" || e == "ENOENT" ? Code::NotFound : rpc::code_of_errno(e), reply_error_text(r)}));
    }
    reply(ex, route, rpc::unary_ok(nlohmann::json::object()));
  });
}

// process.Process/StreamInput: a client stream (start {process}, then data
// {input: {stdin | pty}} and keepalives), answered with one empty message and
// the end of the stream. The server reads a request whole before it answers,
// so the stream is taken once the client has ended it; its inputs reach the
// process in order, each through the agent like SendInput, and the first that
// fails ends the stream with that error (what came before it was delivered).
void Service::stream_input(Call& c) {
  const std::string route = c.route.label;
  Request& req = c.req;
  ExchangePtr ex = c.ex;
  const std::shared_ptr<Sandbox>& sb = c.sb;
  if (!rpc::is_stream_request(req))
    return rpc_fail(req, ex, route, false, {Code::InvalidArgument, "StreamInput is a client stream: send application/connect+json"});
  auto fail_with = [&](const RpcError& e) { rpc_fail(req, ex, route, true, e); };
  RpcError err{};
  auto msgs = rpc::read_messages(req, &err, 100000);
  if (!msgs) return fail_with(err);
  if (msgs->empty()) return fail_with({Code::InvalidArgument, "message 1: the stream must start with {\"start\": {\"process\": ...}}"});
  const nlohmann::json* start = rpc::field((*msgs)[0], "start");
  if (!start || !start->is_object()) return fail_with({Code::InvalidArgument, "message 1: expected {\"start\": {\"process\": ...}}"});
  auto pid = select_process(*start, *sb, &err);
  if (!pid) return fail_with(err);
  auto inputs = std::make_shared<std::vector<std::string>>();
  for (size_t i = 1; i < msgs->size(); ++i) {
    const auto& m = (*msgs)[i];
    std::string at = "message " + std::to_string(i + 1);
    if (rpc::field(m, "keepalive")) continue;
    if (rpc::field(m, "start")) return fail_with({Code::InvalidArgument, at + ": a second start"});
    const nlohmann::json* data = rpc::field(m, "data");
    const nlohmann::json* in = data && data->is_object() ? rpc::field(*data, "input") : nullptr;
    if (!in || !in->is_object()) return fail_with({Code::InvalidArgument, at + ": expected {\"data\": {\"input\": ...}} or {\"keepalive\": {}}"});
    const nlohmann::json* bytes = rpc::field(*in, "stdin");
    if (!bytes) bytes = rpc::field(*in, "pty");
    if (!bytes || !bytes->is_string()) return fail_with({Code::InvalidArgument, at + ": input: expected {stdin} or {pty} bytes (base64)"});
    auto dec = rpc::base64_decode(bytes->get<std::string>());
    if (!dec) return fail_with({Code::InvalidArgument, at + ": input: not valid base64"});
    if (dec->size() > agent::kMaxPayload) return fail_with({Code::InvalidArgument, at + ": input: at most 1 MiB a message"});
    if (!dec->empty()) inputs->push_back(std::move(*dec));
  }
  metrics_.count_request(route, 200);
  auto stream = std::make_shared<rpc::ServerStream>(ex);
  auto next = std::make_shared<std::function<void(size_t)>>();
  *next = [sb, inputs, stream, next, p = *pid](size_t i) {
    if (i == inputs->size() || !sb->agent || !sb->agent->open()) {
      if (i < inputs->size()) stream->end(RpcError{Code::Unavailable, "the sandbox's agent is gone"});
      else stream->send(nlohmann::json::object()), stream->end();
      *next = nullptr;  // (the chain held itself)
      return;
    }
    sb->agent->call(agent::request::input(p), (*inputs)[i], [sb, stream, next, i](const agent::Frame& r) {
      if (!r.header.value("ok", false)) {
        std::string e = reply_errno(r);
        stream->end(RpcError{e == "ESRCH" || e == "ENOENT" ? Code::NotFound : rpc::code_of_errno(e),
                             "message " + std::to_string(i + 2) + ": " + reply_error_text(r)});
        *next = nullptr;
        return;
      }
      if (*next) (*next)(i + 1);
    });
  };
  (*next)(0);
}

}  // namespace exg::serve
