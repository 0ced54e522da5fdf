// `exguardian session` and `exguardian session-client`.
#include "cli/session.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>

#include "agent/client.hpp"
#include "agent/relay.hpp"
#include "cli/host_setup.hpp"
#include "cli/checked_subcommand.hpp"
#include "sandbox/supervisor.hpp"
#include "util/write_all.hpp"
#include "util/json_parse.hpp"

namespace exg::cli {

namespace {

constexpr const char* kClientUsage =
    "usage: exguardian session-client --control unix:PATH VERB ...\n"
    "  exec  [--pty] [--rows N] [--cols N] [--cwd DIR] [--env NAME=VALUE]... [--user U] [--no-stdin] -- CMD [ARGS...]\n"
    "        start CMD, relay stdin/stdout/stderr, exit with its status\n"
    "  start [same options] -- CMD [ARGS...]   start CMD in the background, print its pid\n"
    "  attach PID                               its output again (last 64 KiB), then live, exit with its status\n"
    "  call JSON|OP [--payload-in FILE|-] [--payload-out FILE|-] [--events N]\n"
    "        one request (OP alone, e.g. list: the header {\"op\":\"list\"}); its reply's header as a JSON line\n"
    "        (exit 1 when not ok), then N events' headers\n"
    "  raw [--replies N]                        send stdin's bytes as they are, print N frames that come back\n";

int client_error(const std::string& what) {
  std::fprintf(stderr, "exguardian: session-client: %s\n", what.c_str());
  return 125;
}

void print_line(const nlohmann::json& j) {
  std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::fputs(s.c_str(), stdout);
  std::fflush(stdout);
}

// Output events of `pid` to our stdout/stderr until its exit; stdin (when
// relayed) goes to it as input frames, its end as close_stdin.
int stream_until_exit(agent::Client& c, int pid, bool relay_stdin) {
  char buf[65536];
  for (;;) {
    for (;;) {
      auto f = c.try_next();
      if (!f) return client_error(f.error().str());
      if (!*f) break;
      const agent::Frame& fr = **f;
      if (fr.kind == agent::Kind::Reply) {
        if (!fr.header.value("ok", false))
          std::fprintf(stderr, "exguardian: session-client: %s\n", fr.header.value("message", "").c_str());
        continue;
      }
      if (fr.header.value("pid", 0) != pid) continue;
      std::string ev = fr.header.value("event", "");
      if (ev == "stdout") write_all(1, fr.payload);
      else if (ev == "stderr") write_all(2, fr.payload);
      else if (ev == "exit") return fr.header.value("status", 125);
    }
    pollfd fds[2] = {{c.fd(), POLLIN, 0}, {relay_stdin ? 0 : -1, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0 && errno != EINTR) return client_error("poll");
    if (relay_stdin && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t n = ::read(0, buf, sizeof buf);
      if (n > 0) {
        if (auto r = c.send(agent::request::input(pid), std::string(buf, static_cast<size_t>(n))); !r)
          return client_error(r.error().str());
      } else if (n == 0 || errno != EINTR) {
        relay_stdin = false;
        if (auto r = c.send(agent::request::close_stdin(pid)); !r) return client_error(r.error().str());
      }
    }
  }
}

Result<std::string> read_payload(const std::string& from) {
  std::string data;
  if (from == "-") {
    char buf[65536];
    for (ssize_t n; (n = ::read(0, buf, sizeof buf)) != 0;) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return fail(Error::sys("read stdin"));
      data.append(buf, static_cast<size_t>(n));
    }
    return data;
  }
  std::ifstream in(from, std::ios::binary);
  if (!in) return fail(Error::sys("read " + from));
  data.assign(std::istreambuf_iterator<char>(in), {});
  return data;
}

// An op as the agent names them (docs/agent-protocol.md): lower case and underscores.
bool is_op_name(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return (c >= 'a' && c <= 'z') || c == '_'; });
}

bool to_number(const std::string& s, long lo, long hi, long* out) {
  char* end = nullptr;
  long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end || v < lo || v > hi) return false;
  *out = v;
  return true;
}

}  // namespace

void SessionOptions::add_to(CLI::App& app) {
  sub = CheckedSubcommand::add_to(app, "session", "Hold a sandbox open, its pid 1 the agent, driven through a control socket");
}

void SessionOptions::add_options() {
  CheckedSubcommand* s = sub;
  add_plan_options(s);
  LayerFlags::add_to(s);
  s->add_option("--control", control, "unix:PATH: the control socket (created owner-only; must not exist)")->required();
  s->add_option("--audit-log", audit_log, "Append every refusal as JSON lines to FILE");
  s->add_option("--audit-tag", audit_tags, "NAME=VALUE: a field of every audit line (repeatable; e.g. tenant=acme)");
  s->add_flag("--audit-hold", audit_hold,
              "Hold audit lines until a control client's audit_tags request adds the tags still unknown (a warm pool's sandbox)");
  s->add_flag("--dry-run", dry_run, "Print the compiled plan and run nothing");
  s->add_flag("-v,--verbose", verbose, "Say what the sandbox does");
}

int SessionOptions::execute() {
  if (explicit_command) return usage_error("session: takes no command (start processes with exguardian session-client)");
  if (!sub->remaining().empty()) return usage_error("session: stray argument \"" + sub->remaining().front() + "\"");
  if (!control.starts_with("unix:")) return usage_error("--control " + control + ": expected unix:PATH");
  // The agent is pid 1; the Plan's command line only names it.
  command = {"exguardian-agent"};
  make_dirs = !dry_run;
  auto built = build_plan(layer);
  if (!built) return usage_error(built.error().str());
  auto chosen = choose(built->policy, built->plan);
  if (!chosen) return usage_error(chosen.error().str());
  if (auto a = (*chosen)->supports_agent(); !a) return usage_error(a.error().str());
  if (auto_choice) std::fprintf(stderr, "exguardian: %s\n", auto_choice->line().c_str());
  std::string text = plan_text(built->plan, **chosen);
  if (dry_run) {
    std::fputs(text.c_str(), stdout);
    return 0;
  }
  if (verbose) narrate(text);
  sandbox::SuperviseOptions so;
  so.verbose = verbose;
  so.audit_log = !audit_log.empty() ? audit_log : built->policy.audit_log.value_or("");
  so.layer_choice = audit_event();
  for (const auto& t : audit_tags) {
    auto eq = t.find('=');
    std::string name = t.substr(0, eq == std::string::npos ? 0 : eq);
    bool name_ok = !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    });
    if (!name_ok) return usage_error("--audit-tag " + t + ": expected NAME=VALUE, NAME of [a-z0-9_]");
    if (name == "time" || name == "sandbox" || name == "event")
      return usage_error("--audit-tag " + t + ": " + name + " is a field of every line already");
    if (t.size() - eq - 1 > 256) return usage_error("--audit-tag " + name + ": the value is longer than 256 bytes");
    if (!so.audit_tags.emplace(name, t.substr(eq + 1)).second) return usage_error("--audit-tag " + name + ": given twice");
  }
  if (!so.audit_tags.empty() && so.audit_log.empty()) return usage_error("--audit-tag: without --audit-log there is no audit line to tag");
  if (audit_hold && so.audit_log.empty()) return usage_error("--audit-hold: without --audit-log there is no audit line to hold");
  so.audit_hold = audit_hold;
  auto host = HostProcess::prepare(built->plan.identity.invoked_as_root);
  if (!host) return usage_error(explain_start_failure(host.error(), (*chosen)->kind()));
  so.signal_fd = host->signal_fd();
  // After the host setup, so that it is destroyed first: its socket is removed
  // while the signals are still blocked. A second SIGTERM (timeout(1) sends
  // two) that arrives once supervise() has stopped reading them stays pending
  // until ~HostProcess unblocks it, and then ends the process at once.
  agent::ControlRelay relay(control.substr(5), verbose);
  so.agent = &relay;
  StdioIo io(/*relay_terminal=*/false);  // the agent's processes get terminals of their own
  auto status = sandbox::supervise(**chosen, built->plan, io, so);
  if (!status) return usage_error(explain_start_failure(status.error(), (*chosen)->kind()));
  return *status;
}

int session_client_main(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  std::string control;
  size_t i = 0;
  if (i + 1 < args.size() && args[i] == "--control") {
    control = args[i + 1];
    i += 2;
  }
  if (control.empty() || i >= args.size()) {
    std::fputs(kClientUsage, stderr);
    return 125;
  }
  std::string verb = args[i++];
  auto c = agent::Client::connect(control);
  if (!c) return client_error(c.error().str());

  if (verb == "exec" || verb == "start") {
    agent::request::Start s;
    std::vector<std::string> env;
    bool stdin_open = true;
    for (; i < args.size() && args[i] != "--"; ++i) {
      const std::string& a = args[i];
      bool has_value = i + 1 < args.size();
      long v = 0;
      if (a == "--pty") s.pty = true;
      else if (a == "--no-stdin") stdin_open = false;
      else if ((a == "--rows" || a == "--cols") && has_value && to_number(args[i + 1], 1, 1000, &v))
        (a == "--rows" ? s.rows : s.cols) = static_cast<unsigned>(v), ++i;
      else if (a == "--cwd" && has_value) s.cwd = args[++i];
      else if (a == "--user" && has_value) s.user = args[++i];
      else if (a == "--env" && has_value) env.push_back(args[++i]);
      else return client_error(verb + ": unknown option or missing value: " + a);
    }
    if (i >= args.size() || i + 1 >= args.size()) return client_error(verb + ": no command (… -- CMD [ARGS...])");
    s.argv.assign(args.begin() + static_cast<long>(i) + 1, args.end());
    if (!env.empty()) s.env = env;
    // `start` leaves the process on its own: nothing of ours is its stdin.
    if (verb == "start" && stdin_open && !s.pty) stdin_open = false;
    s.stdin_open = stdin_open;
    auto r = c->call(agent::request::start(s));
    if (!r) return client_error(r.error().str());
    if (!r->header.value("ok", false)) {
      std::fprintf(stderr, "exguardian: %s (%s)\n", r->header.value("message", "start failed").c_str(),
                   r->header.value("error", "").c_str());
      return r->header.value("error", "") == "ENOENT" ? 127 : 126;
    }
    int pid = r->header.value("pid", 0);
    if (verb == "start") {
      std::printf("%d\n", pid);
      return 0;
    }
    return stream_until_exit(*c, pid, stdin_open);
  }
  if (verb == "attach") {
    long pid = 0;
    if (i >= args.size() || !to_number(args[i], 1, 4194304, &pid)) return client_error("attach: expected a pid");
    auto r = c->call(agent::request::attach(static_cast<int>(pid)));
    if (!r) return client_error(r.error().str());
    if (!r->header.value("ok", false)) return client_error("attach: " + r->header.value("message", ""));
    return stream_until_exit(*c, static_cast<int>(pid), false);
  }
  if (verb == "call") {
    if (i >= args.size()) return client_error("call: expected a JSON header or an op name (e.g. list)");
    const std::string& arg = args[i++];
    nlohmann::json h;
    // The caller's own request, as it is (an unknown op gets the agent's error): not built by agent::request.
    if (is_op_name(arg)) h = {{"op", arg}};  // an op that needs no field: list, shutdown
    else h = parse_json(arg);
    if (h.is_discarded() || !h.is_object())
      return client_error("call: " + arg + ": neither a JSON object header nor an op name (e.g. list)");
    std::string payload, payload_out;
    long events = 0;
    for (; i < args.size(); ++i) {
      if (args[i] == "--payload-in" && i + 1 < args.size()) {
        auto p = read_payload(args[++i]);
        if (!p) return client_error(p.error().str());
        payload = std::move(*p);
      } else if (args[i] == "--payload-out" && i + 1 < args.size()) {
        payload_out = args[++i];
      } else if (args[i] == "--events" && i + 1 < args.size() && to_number(args[i + 1], 0, 1000000, &events)) {
        ++i;
      } else {
        return client_error("call: unknown option or missing value: " + args[i]);
      }
    }
    auto r = c->call(h, payload);
    if (!r) return client_error(r.error().str());
    print_line(r->header);
    if (!payload_out.empty()) {
      if (payload_out == "-") write_all(1, r->payload);
      else {
        std::ofstream out(payload_out, std::ios::binary | std::ios::trunc);
        out << r->payload;
        if (!out) return client_error("write " + payload_out);
      }
    }
    for (long k = 0; k < events; ++k) {
      auto e = c->next_event();
      if (!e) return client_error(e.error().str());
      print_line(e->header);
    }
    return r->header.value("ok", false) ? 0 : 1;
  }
  if (verb == "raw") {
    long replies = 1;
    if (i + 1 < args.size() && args[i] == "--replies" && to_number(args[i + 1], 0, 1000000, &replies)) i += 2;
    auto bytes = read_payload("-");
    if (!bytes) return client_error(bytes.error().str());
    if (auto r = c->send_raw(*bytes); !r) return client_error(r.error().str());
    for (long k = 0; k < replies; ++k) {
      auto f = c->next();
      if (!f) return client_error(f.error().str());
      print_line({{"kind", std::string(1, static_cast<char>(f->kind))}, {"id", f->id}, {"header", f->header}});
    }
    return 0;
  }
  std::fputs(kClientUsage, stderr);
  return 125;
}

}  // namespace exg::cli
