#include "serve/sandbox_registry.hpp"

#include <dirent.h>
#include <grp.h>
#include <pwd.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

#include <boost/asio/post.hpp>

#include "cgroup/cgroup.hpp"
#include "cgroup/layout.hpp"
#include "cgroup/usage.hpp"
#include "serve/base_tools.hpp"
#include "serve/code_interpreter.hpp"
#include "serve/port_relay.hpp"
#include "serve/snapshots.hpp"
#include "util/json_parse.hpp"

namespace exg::serve {

namespace asio = boost::asio;
namespace fs = std::filesystem;

std::string random_id(size_t n) {
  static const char* alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string out;
  while (out.size() < n) {
    unsigned char b[64];
    ssize_t got = ::getrandom(b, sizeof b, 0);
    if (got <= 0) continue;
    for (ssize_t i = 0; i < got && out.size() < n; ++i)
      if (b[i] < 252) out += alphabet[b[i] % 36];  // 252 = 7 * 36: no bias
  }
  return out;
}

namespace {

std::string read_file(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The NUL-separated command line of pid, "" when it is gone.
std::string cmdline_of(pid_t pid) { return read_file("/proc/" + std::to_string(pid) + "/cmdline"); }

bool is_our_supervisor(pid_t pid, const std::string& control) {
  std::string cl = cmdline_of(pid);
  return cl.find(std::string("session\0", 8)) != std::string::npos &&
         cl.find(std::string("unix:") + control + '\0') != std::string::npos;
}

// Ends a supervisor left by a previous server: SIGTERM (it cleans up), then SIGKILL.
void end_leftover(pid_t pid, const std::string& control) {
  if (!is_our_supervisor(pid, control)) return;
  ::kill(pid, SIGTERM);
  for (int i = 0; i < 100 && is_our_supervisor(pid, control); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (is_our_supervisor(pid, control)) ::kill(pid, SIGKILL);
  for (int i = 0; i < 100 && is_our_supervisor(pid, control); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

// A leftover's cgroups thawed before it is ended: a supervisor whose server was
// killed while its sandbox was paused cannot take a frozen sandbox down (its
// agent never reads the shutdown; frozen tasks never die of their SIGKILL).
void thaw_leftover(pid_t pid) {
  const std::string prefix = "exg-" + std::to_string(pid) + "-";
  std::vector<std::string> dirs;
  for (const auto& b : cgroup::plan_layout().bases) {
    std::error_code ec;
    for (auto& e : fs::directory_iterator(b.dir, ec))
      if (e.path().filename().string().starts_with(prefix)) dirs.push_back(e.path().string());
  }
  for (const auto& k : cgroup::freezers_of(dirs)) (void)k.thaw();
}

double ms_since(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::system_clock::now() - t).count();
}

std::string duration_arg(double cpus) {
  std::ostringstream os;
  os << cpus;
  return os.str();
}

}  // namespace

Registry::Registry(asio::io_context& io, RegistryOptions opt)
    : io_(io), opt_(std::move(opt)), sigchld_(io, SIGCHLD), kept_(opt_.state_dir + "/paused") {}

Log& Registry::log() const {
  static Log to_stderr;
  return opt_.log ? *opt_.log : to_stderr;
}

Registry::~Registry() {
  for (auto& [id, sb] : sandboxes_)
    if (sb->supervisor > 0) ::kill(sb->supervisor, SIGTERM);
  for (auto& [id, sb] : pooled_)
    if (sb->supervisor > 0) ::kill(sb->supervisor, SIGTERM);
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

Result<std::vector<std::string>> Registry::open(std::function<const Template*(const std::string&)> template_of) {
  std::vector<std::string> cleaned;
  std::error_code ec;
  fs::create_directories(opt_.state_dir + "/sandboxes", ec);
  if (ec) return fail(Error::msg("--state-dir " + opt_.state_dir, ec.message()));
  ::chmod(opt_.state_dir.c_str(), 0700);
  lock_fd_ = ::open((opt_.state_dir + "/server.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd_ < 0) return fail(Error::sys("--state-dir " + opt_.state_dir + ": server.lock"));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0)
    return fail(Error::msg("--state-dir " + opt_.state_dir, "another exguardian serve holds it (server.lock)"));
  // What a server killed before left: supervisors still alive, their directories.
  for (auto& e : fs::directory_iterator(opt_.state_dir + "/sandboxes", ec)) {
    std::string dir = e.path().string();
    std::string pid_s = read_file(dir + "/supervisor.pid");
    pid_t pid = static_cast<pid_t>(std::atol(pid_s.c_str()));
    if (pid > 0) thaw_leftover(pid), end_leftover(pid, dir + "/control.sock");
    // A paused one whose server was killed: its home goes to its kept pause (kept_pauses.hpp).
    const std::string id = e.path().filename().string();
    if (template_of && kept_.has(id) && ::rename((dir + "/home").c_str(), kept_.home_of(id).c_str()) != 0)
      log().warn("recovery").str("sandbox", id).str("msg", "the paused sandbox's home could not be kept: " + std::string(std::strerror(errno)));
    std::error_code rec;
    fs::remove_all(dir, rec);
    if (rec) return fail(Error::msg("remove leftover " + dir, rec.message()));
    cleaned.push_back(e.path().filename().string());
  }
  cgroup::Cgroup::sweep_stale();
  if (template_of) hold_kept(template_of);
  // Snapshots outlive the server (E2B's: "a persistent image that survives sandbox deletion").
  if (auto r = snapshots_.open(opt_.state_dir + "/snapshots"); !r) return fail(r.error());
  sigchld_.async_wait([this](boost::system::error_code ec, int) {
    if (!ec) wait_children();
  });
  return cleaned;
}

void Registry::wait_children() {
  for (;;) {
    int status = 0;
    pid_t p = ::waitpid(-1, &status, WNOHANG);
    if (p <= 0) break;
    if (auto h = helpers_.find(p); h != helpers_.end()) {
      auto done = std::move(h->second);
      helpers_.erase(h);
      done(status);
      continue;
    }
    on_supervisor_exit(p, status);
  }
  sigchld_.async_wait([this](boost::system::error_code ec, int) {
    if (!ec) wait_children();
  });
}

std::shared_ptr<Sandbox> Registry::new_sandbox(const Template& tmpl) {
  auto sb = std::make_shared<Sandbox>();
  sb->id = random_id();
  sb->tmpl = tmpl;
  sb->started_at = std::chrono::system_clock::now();
  sb->end_at = sb->started_at + std::chrono::seconds(300);
  sb->access_token = random_id(32);  // secure or not: envd calls carry it
  sb->traffic_token = random_id(32);
  sb->dir = opt_.state_dir + "/sandboxes/" + sb->id;
  sb->home = sb->dir + "/home";
  sb->audit_log = sb->dir + "/audit.jsonl";
  return sb;
}

void Registry::run_helper(std::function<int()> body, std::function<void(int status)> done) {
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return done(-1);
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(125);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::_exit(body());
  }
  helpers_[pid] = std::move(done);
}

void Registry::take_snapshot(const std::shared_ptr<Sandbox>& sb, std::vector<std::string> names, bool internal,
                             std::function<void(Result<SnapshotRecord>)> done) {
  SnapshotRecord r;
  r.id = "snap-" + random_id(20);
  r.tenant = sb->tenant, r.sandbox = sb->id, r.template_name = sb->tmpl.name, r.layer = sb->tmpl.layer;
  r.names = std::move(names);
  r.internal = internal;
  const std::string dir = snapshots_.dir_of(r.id);
  if (::mkdir(dir.c_str(), 0700) != 0) return done(fail(Error::sys("mkdir " + dir)));
  // Its home on the host (sb->home is the path inside once its agent said it).
  run_helper([home = sb->dir + "/home", dir] { return take_snapshot_copy(home, dir); },
             [this, r, dir, done](int status) mutable {
               auto drop = [&](const std::string& why) {
                 std::error_code ec;
                 fs::remove_all(dir, ec);
                 done(fail(Error::msg("snapshot", why)));
               };
               if (status == -1) return drop(std::string("fork: ") + std::strerror(errno));
               if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                 std::string why = read_file(dir + "/error.txt");
                 return drop(why.empty() ? "the copy ended with status " + std::to_string(status) : why);
               }
               auto planted = parse_json(read_file(dir + "/planted.json"));
               if (planted.is_array())
                 for (auto& p : planted)
                   if (p.is_array() && p.size() == 2 && p[0].is_string() && p[1].is_string())
                     r.quarantined.emplace_back(p[0].get<std::string>(), p[1].get<std::string>());
               r.created = std::chrono::system_clock::now();
               if (auto saved = snapshots_.add(r); !saved) return drop(saved.error().str());
               if (logs_lifecycle())
                 log().info("snapshot").str("tenant", r.tenant).str("sandbox", r.sandbox).str("snapshot", r.id)
                     .num("quarantined", static_cast<int64_t>(r.quarantined.size()));
               done(r);
             });
}

void Registry::create(const CreateRequest& req, ReadyFn done) {
  if (claim(req, done)) return;
  auto sb = new_sandbox(req.tmpl);
  if (!req.workspace.empty()) sb->home = req.workspace, sb->host_workspace = true;
  if (!req.audit_log.empty()) sb->audit_log = req.audit_log;
  if (!req.secure) sb->access_token.clear(), sb->traffic_token.clear();
  sb->tenant = req.tenant;
  sb->metadata = req.metadata;
  sb->mask_request_host = req.mask_request_host;
  sb->env_vars = req.env_vars;
  sb->allow_out = req.allow_out;
  sb->deny_out = req.deny_out;
  sb->tenant_secrets = req.tenant_secrets;
  sb->tenant_secret_hosts = req.tenant_secret_hosts;
  take_lifecycle(*sb, req);
  if (req.revive) {  // the same sandbox again, for its clients: id, tokens, start time
    sb->id = req.revive->id;
    sb->dir = opt_.state_dir + "/sandboxes/" + sb->id;
    sb->home = sb->dir + "/home";
    sb->audit_log = sb->dir + "/audit.jsonl";
    sb->access_token = req.revive->access_token;
    sb->traffic_token = req.revive->traffic_token;
    sb->started_at = req.revive->started_at;
  }
  // A burst that emptied the pool: the pool starts no more until these are up,
  // so that its start-ups do not slow the ones clients wait for.
  ++cold_starting_;
  auto start = [this, sb, req, done] {
    spawn(sb, req.allow_out, req.deny_out, req.header_rules, [this, sb, done](Started up) {
      if (!up && sb->seeded && sb->supervisor <= 0) sandboxes_.erase(sb->id);  // held for its quota, never started
      if (--cold_starting_ == 0)
        for (auto& [name, p] : pools_) asio::post(io_, [this, name = name] { fill_pool(name); });
      done(std::move(up));
    });
  };
  if (req.seed_home.empty()) return start();
  // From a snapshot: its home copied in first (a child process), then given to the sandbox's uid by spawn().
  // It counts in its tenant's quota from now (listed nowhere while it starts).
  sb->seeded = true;
  sandboxes_[sb->id] = sb;
  run_helper([from = req.seed_home, home = sb->home] { return seed_home_copy(from, home); },
             [this, sb, start, done](int status) {
               bool copied = status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
               if (copied && !sb->killing && !stopping_) return start();
               sandboxes_.erase(sb->id);
               std::string why = copied ? "the sandbox was killed while it started" : read_file(sb->dir + "/seed-error.txt");
               std::error_code ec;
               fs::remove_all(sb->dir, ec);
               if (--cold_starting_ == 0)
                 for (auto& [name, p] : pools_) asio::post(io_, [this, name = name] { fill_pool(name); });
               done(std::unexpected(StartError::server(why.empty() ? "the copy of the snapshot failed" : why)));
             });
}

// A warm sandbox for the request, when the pool has one it may serve: same
// template, no egress of the request's own (the pool's have the template's).
bool Registry::claim(const CreateRequest& req, ReadyFn& done) {
  auto pit = pools_.find(req.tmpl.name);
  // A request with its own egress, header rules, secrets, workspace or audit log (mcp) needs a sandbox started with them.
  if (pit == pools_.end() || pit->second.ready.empty() || !req.allow_out.empty() || !req.deny_out.empty() || !req.seed_home.empty() ||
      !req.header_rules.empty() || !req.tenant_secrets.empty() || !req.workspace.empty() || !req.audit_log.empty())
    return false;
  Pool& pool = pit->second;
  auto sb = pool.ready.front();
  pool.ready.pop_front();
  pooled_.erase(sb->id);
  // The next one starts once this one is handed out (a fork now would delay the answer).
  asio::post(io_, [this, name = req.tmpl.name] { fill_pool(name); });
  sb->pooled = false;
  sb->tenant = req.tenant;
  sb->metadata = req.metadata;
  sb->mask_request_host = req.mask_request_host;
  sb->env_vars = req.env_vars;
  sb->started_at = std::chrono::system_clock::now();
  take_lifecycle(*sb, req);
  sb->access_token = req.secure ? random_id(32) : "";  // made now: no one knew the pool's
  sb->traffic_token = req.secure ? random_id(32) : "";
  sb->from_pool = true;
  sb->state = Sandbox::State::Starting;
  sandboxes_[sb->id] = sb;
  // Its audit lines waited for the tenant (session --audit-hold).
  // Handed over within 10 s (audit_tags, the interpreter's hand-over), else not adopted.
  sb->expiry->expires_after(std::chrono::seconds(10));
  sb->expiry->async_wait([this, sb](boost::system::error_code ec) {
    if (!ec && sb->state == Sandbox::State::Starting) finish_start(sb, StartError::server("not handed over within 10 s"));
  });
  CreateRequest again = req;
  sb->on_ready.push_back([this, sb, done, again](const std::optional<StartError>& err) mutable {
    if (!err) return done(sb);
    // Not adopted: that one ends; the request gets a sandbox started for it.
    log().warn("pool_claim_failed").str("tenant", sb->tenant).str("sandbox", sb->id).str("msg", err->message + "; starting one for the request");
    kill(sb, {}, "not adopted");
    create(again, done);
  });
  sb->agent->call(agent::request::audit_tags({{"tenant", sb->tenant}}), {}, [this, sb](const agent::Frame& r) {
    if (!r.header.value("ok", false)) return finish_start(sb, StartError::server("audit_tags: " + reply_error_text(r)));
    if (!sb->tmpl.code_interpreter) return finish_start(sb, std::nullopt);
    // Its interpreter, kernel up since the pool started it, gets the tenant's envVars now (none before).
    hand_over_code_interpreter(sb, [this, sb](std::optional<std::string> e) {
      finish_start(sb, e ? std::optional(StartError::server(*e)) : std::nullopt);
    });
  });
  return true;
}

void Registry::set_pool(const Template& tmpl, size_t size) {
  Pool& p = pools_[tmpl.name];
  p.tmpl = tmpl;
  p.size = size;
  if (!p.retry) p.retry = std::make_unique<asio::steady_timer>(io_);
  fill_pool(tmpl.name);
}

size_t Registry::pool_ready() const {
  size_t n = 0;
  for (auto& [name, p] : pools_) n += p.ready.size();
  return n;
}

void Registry::fill_pool(const std::string& name) {
  auto pit = pools_.find(name);
  if (pit == pools_.end() || stopping_) return;
  Pool& pool = pit->second;
  if (pool.failures > 0 || cold_starting_ > 0) return;  // the retry timer / the last cold start starts the next one
  while (pool.ready.size() + pool.starting < pool.size) {
    auto sb = new_sandbox(pool.tmpl);
    sb->pooled = true;
    sb->end_at = std::chrono::system_clock::time_point::max();
    ++pool.starting;
    spawn(sb, {}, {}, {}, [this, name](Started ready) {
      auto it = pools_.find(name);
      if (it == pools_.end()) return;
      Pool& p = it->second;
      --p.starting;
      if (ready && !stopping_) {
        p.failures = 0;
        p.ready.push_back(*ready);
        return;
      }
      if (stopping_) return;
      // A host where sandboxes cannot start (no cgroups for this user...) gets no storm of tries.
      unsigned wait = std::min(60u, 1u << std::min(p.failures, 6u));
      ++p.failures;
      log().warn("pool_start_failed").str("template", name).str("msg", ready ? "" : ready.error().message).num("retry_s", wait);
      p.retry->expires_after(std::chrono::seconds(wait));
      p.retry->async_wait([this, name](boost::system::error_code ec) {
        if (ec) return;
        auto it2 = pools_.find(name);
        if (it2 == pools_.end()) return;
        it2->second.failures = 0;
        fill_pool(name);
      });
    });
    if (pool.failures > 0) break;  // spawn failed at once
  }
}

// In [1.6e9, 1.6e9 + 2^20): apart from the range `exguardian run` picks its
// unused uids from at random (plan/compile.cpp, 1.5e9), and from every account.
uid_t Registry::pick_uid() const {
  for (;;) {
    uint32_t r = 0;
    if (::getrandom(&r, sizeof r, 0) != sizeof r) continue;
    uid_t u = 1600000000u + (r % (1u << 20));
    if (!uids_.count(u) && !::getpwuid(u) && !::getgrgid(u)) return u;
  }
}

void Registry::spawn(const std::shared_ptr<Sandbox>& sb, const std::vector<std::string>& allow_out,
                     const std::vector<std::string>& deny_out, const std::vector<HeaderRule>& header_rules, ReadyFn done) {
  // Egress: the template's domains and the request's allowOut; denyOut as the
  // policy's denied list; network.rules as secrets the proxy sets as headers
  // (their values in the supervisor's environment only: the file names them).
  // What of the request's own the supervisor would refuse is the request's to
  // change: found here, with the supervisor's own checks, before anything of
  // the sandbox is made.
  const bool request_policy = !deny_out.empty() || !header_rules.empty();
  if (request_policy && !sb->tmpl.policy.empty())
    return done(std::unexpected(StartError::request(std::string(deny_out.empty() ? "network.rules" : "network.denyOut") +
                                                    ": the template has its own policy file; put them there")));
  RequestEgress egress{.allow_out = allow_out, .deny_out = deny_out};
  if (request_policy) {
    nlohmann::json p = nlohmann::json::object();
    if (!deny_out.empty()) p["network"] = {{"deniedDomains", deny_out}};
    nlohmann::json secrets = nlohmann::json::array();
    for (size_t i = 0; i < header_rules.size(); ++i) {
      const auto& r = header_rules[i];
      std::string n = std::to_string(i + 1);
      secrets.push_back({{"name", "E2B_RULE_" + n}, {"from", "env:EXG_E2B_RULE_" + n}, {"hosts", {r.host}}, {"setHeader", r.header}});
      egress.rule_hosts.push_back(r.host);
    }
    if (!secrets.empty()) p["secrets"] = secrets;
    egress.policy_name = sb->dir + "/policy.json", egress.policy_dir = sb->dir, egress.policy_text = p.dump(2);
  }
  for (const auto* list : std::initializer_list<const std::vector<std::string>*>{&sb->tmpl.allow_domains, &sb->tenant_secret_hosts, &allow_out})
    egress.allowed.insert(egress.allowed.end(), list->begin(), list->end());
  if (auto refused = request_egress_refusal(egress)) return done(std::unexpected(*refused));

  std::error_code ec;
  // A host workspace (`exguardian mcp --workspace-root`) is the home: it exists and is the user's.
  const bool host_workspace = sb->home != sb->dir + "/home";
  fs::create_directories(host_workspace ? sb->dir : sb->home, ec);
  if (ec) return done(std::unexpected(StartError::server("create " + sb->home + ": " + ec.message())));
  ::chmod(sb->dir.c_str(), 0700);
  if (!host_workspace) ::chmod(sb->home.c_str(), 0755);
  // A root server gives each sandbox its own uid by owning its home with it:
  // the process layer runs a sandbox as its workspace's owner. (Left to the
  // layer, a root-owned home gets a random unused uid, and two of hundreds of
  // sandboxes would now and then draw the same one.)
  // Not on gVisor: as root its gofer runs as a spare uid that cannot pass the
  // 0700 sandbox directory to a home owned by another uid, and runsc fails to
  // start; there the layer picks the sandbox's uid itself (a root-owned home).
  uid_t uid = 0;
  if (::geteuid() == 0 && !host_workspace && sb->tmpl.layer != "gvisor") {  // a host workspace (mcp) keeps its owner
    uid = pick_uid();
    if (::chown(sb->home.c_str(), uid, uid) != 0)
      return done(std::unexpected(StartError::server("chown " + sb->home + ": " + std::strerror(errno))));
    // A snapshot's copy (ours, no sandbox has seen it yet) becomes this sandbox's.
    if (sb->seeded)
      if (auto r = chown_tree(sb->home, uid, uid); !r) return done(std::unexpected(StartError::server(r.error().str())));
  }

  std::string policy_file = sb->tmpl.policy;
  std::vector<std::string> rule_env;
  if (request_policy) {
    policy_file = egress.policy_name;
    for (size_t i = 0; i < header_rules.size(); ++i) {
      const auto& r = header_rules[i];
      rule_env.push_back("EXG_E2B_RULE_" + std::to_string(i + 1) + "=" + r.value);
      sb->rules_shown[r.host]["transform"]["headers"][r.header] = "(set by the proxy; not shown)";
    }
    std::ofstream(policy_file) << egress.policy_text;
  }
  // The tenant's secrets: a policy file of their own, merged after the
  // template's (secrets add up; a name given twice is the supervisor's error),
  // their values read by the supervisor from the server's host.
  std::string tenant_policy;
  if (!sb->tenant_secrets.empty()) {
    tenant_policy = sb->dir + "/tenant-secrets.json";
    std::ofstream(tenant_policy) << nlohmann::json{{"secrets", sb->tenant_secrets}}.dump(2);
  }
  // E2B's shape: host -> [rule]; one rule holding every header of the host.
  for (auto& [host, r] : sb->rules_shown.items()) r = nlohmann::json::array({r});
  std::vector<std::string> argv = {opt_.exe, "session", "--control", "unix:" + sb->dir + "/control.sock",
                                   "--workspace", sb->home, "--no-policy-files",
                                   "--audit-log", sb->audit_log, "--audit-tag", "e2b_sandbox=" + sb->id};
  // E2B's sandbox: the user `user`, its home /home/user (code and tests hard-code
  // both), on every layer (the microVM's guest view is the plan's, relocated
  // alike); a host workspace (mcp) stays where its owner knows it.
  if (!host_workspace)
    argv.insert(argv.end(), {"--workspace-at", std::string(kE2bHome), "--user-name", "user"});
  // A pool's sandbox learns its tenant when it is claimed (its audit lines wait for it).
  if (sb->pooled) argv.push_back("--audit-hold");
  else argv.insert(argv.end(), {"--audit-tag", "tenant=" + sb->tenant});
  // Explicit limits: a supervisor that cannot set them refuses to start (fail closed).
  if (opt_.cgroup_limits)
    argv.insert(argv.end(), {"--memory", std::to_string(sb->tmpl.memory_mb) + "M", "--pids", std::to_string(sb->tmpl.pids),
                             "--cpus", duration_arg(sb->tmpl.cpus)});
  if (sb->tmpl.layer != "process") argv.insert(argv.end(), {"--layer", sb->tmpl.layer});
  if (sb->tmpl.allow_root) argv.push_back(sb->tmpl.layer == "microvm" ? "--microvm-root" : "--gvisor-root");
  if (!sb->tmpl.rootfs.empty()) argv.insert(argv.end(), {"--rootfs", sb->tmpl.rootfs});
  if (!policy_file.empty()) argv.insert(argv.end(), {"--policy", policy_file});
  if (!tenant_policy.empty()) argv.insert(argv.end(), {"--policy", tenant_policy});
  for (const auto& d : sb->tmpl.allow_domains) argv.insert(argv.end(), {"--allow-domain", d});
  for (const auto& d : sb->tenant_secret_hosts) argv.insert(argv.end(), {"--allow-domain", d});
  for (const auto& d : allow_out) argv.insert(argv.end(), {"--allow-domain", d});

  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) return done(std::unexpected(StartError::server(std::string("pipe: ") + std::strerror(errno))));
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::vector<char*> cenv;
  for (char** e = environ; *e; ++e)
    if (!std::string_view(*e).starts_with("EXG_E2B_RULE_")) cenv.push_back(*e);
  for (auto& e : rule_env) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(pipefd[0]), ::close(pipefd[1]);
    return done(std::unexpected(StartError::server(std::string("fork: ") + std::strerror(errno))));
  }
  if (pid == 0) {
    // The supervisor dies with the server (and takes its sandbox with it, cleanly).
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(125);
    ::setpgid(0, 0);  // a terminal's ^C reaches the server, which ends the sandboxes itself
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    int devnull = ::open("/dev/null", O_RDWR);
    ::dup2(devnull, 0), ::dup2(devnull, 1), ::dup2(pipefd[1], 2);
    ::close_range(3, ~0U, 0);
    if (::chdir(sb->home.c_str()) != 0) ::_exit(125);
    ::execve(cargv[0], cargv.data(), cenv.data());
    ::_exit(127);
  }
  ::close(pipefd[1]);
  for (auto& e : rule_env) std::fill(e.begin(), e.end(), '\0');  // the server keeps no value longer than the fork
  sb->supervisor = pid;
  if (uid) uid_of_[pid] = uid, uids_.insert(uid);
  std::ofstream(sb->dir + "/supervisor.pid") << pid << "\n";
  sb->log = std::make_unique<asio::posix::stream_descriptor>(io_, pipefd[0]);
  sb->expiry = std::make_unique<asio::steady_timer>(io_);
  sb->on_ready.push_back([sb, done](const std::optional<StartError>& err) {
    if (err) return done(std::unexpected(*err));
    done(sb);
  });
  (sb->pooled ? pooled_ : sandboxes_)[sb->id] = sb;
  by_pid_[pid] = sb->id;
  if (opt_.verbose)
    log().info("spawn").str("tenant", sb->tenant).str("sandbox", sb->id).str("template", sb->tmpl.name).num("supervisor", pid).flag("pool", sb->pooled);
  // A sandbox that never comes up is not waited for forever. A microVM's
  // cold boot under TCG (no KVM) takes 3-5 s on an idle host and past 30 s on
  // a loaded one: it gets longer.
  const int start_s = sb->tmpl.layer == "microvm" ? 180 : 60;
  sb->expiry->expires_after(std::chrono::seconds(start_s));
  sb->expiry->async_wait([this, sb, start_s](boost::system::error_code ec) {
    if (ec || sb->state != Sandbox::State::Starting) return;
    finish_start(sb, StartError::server("the sandbox did not come up within " + std::to_string(start_s) + " s"));
    kill(sb, {}, "start-failed");
  });
  read_log(sb);
}

void Registry::read_log(const std::shared_ptr<Sandbox>& sb) {
  sb->log->async_read_some(asio::buffer(sb->log_buf), [this, sb](boost::system::error_code ec, size_t n) {
    if (ec) return;
    std::string chunk(sb->log_buf, n);
    std::string& acc = sb->log_partial;
    acc += chunk;
    for (size_t nl; (nl = acc.find('\n')) != std::string::npos;) {
      std::string line = acc.substr(0, nl);
      acc.erase(0, nl + 1);
      on_log_line(sb, line);
    }
    if (acc.size() > 4096) acc.clear();
    read_log(sb);
  });
}

void Registry::on_log_line(const std::shared_ptr<Sandbox>& sb, const std::string& line) {
  sb->log_tail += line + "\n";
  if (sb->log_tail.size() > 4096) sb->log_tail.erase(0, sb->log_tail.size() - 4096);
  if (opt_.verbose) log().info("supervisor").str("sandbox", sb->id).str("msg", line);
  // "exguardian: session <plan id> ready on unix:<path>", then (the agent's
  // ready event, agent/relay.cpp) "exguardian: session <plan id> user uid U
  // gid G home PATH": both, in either order, and the sandbox is up. Read only
  // while it starts: nothing of the sandbox's own code has run yet (a guest's
  // console shares this stderr), so these lines are the supervisor's.
  const std::string prefix = "exguardian: session ";
  if (sb->state != Sandbox::State::Starting || !line.starts_with(prefix)) return;
  const size_t id_end = line.find(' ', prefix.size());
  if (id_end == std::string::npos) return;
  const std::string id = line.substr(prefix.size(), id_end - prefix.size());
  const std::string rest = line.substr(id_end + 1);
  if (rest.starts_with("ready on unix:")) {
    sb->plan_id = id;
    sb->control_ready = true;
  } else if (rest.starts_with("user ")) {
    unsigned long long u = 0, g = 0;
    int home_at = 0;
    if (std::sscanf(rest.c_str(), "user uid %llu gid %llu home %n", &u, &g, &home_at) < 2 || home_at == 0) return;
    sb->uid = static_cast<uid_t>(u);
    sb->gid = static_cast<gid_t>(g);
    sb->home = rest.substr(static_cast<size_t>(home_at));
    sb->user_known = true;
  } else {
    return;
  }
  if (sb->control_ready && sb->user_known) became_ready(sb);
}

void Registry::became_ready(const std::shared_ptr<Sandbox>& sb) {
  sb->cgroup_dirs = cgroup::sandbox_dirs(cgroup::plan_layout(), sb->supervisor, sb->plan_id);
  auto conn = std::make_shared<AgentConn>(io_);
  std::string err;
  if (!conn->connect(sb->dir + "/control.sock", &err)) {
    finish_start(sb, StartError::server(err));
    kill(sb, {}, "start-failed");
    return;
  }
  sb->agent = conn;
  conn->start();
  // E2B's root is promised by the template: a sandbox whose user is not uid 0 does not keep it.
  if (sb->tmpl.allow_root && sb->uid != 0) {
    finish_start(sb, StartError::server("the template allows root, but the sandbox's user is uid " + std::to_string(sb->uid) + ", not 0"));
    kill(sb, {}, "start-failed");
    return;
  }
  // E2B's base template's `python` and `sudo` (base_tools.hpp), before anyone can run a command.
  install_base_tools(sb, [this, sb](std::optional<std::string> error) {
    if (!error) return sb->tmpl.code_interpreter ? start_interpreter(sb) : finish_start(sb, std::nullopt);
    finish_start(sb, StartError::server(*error));
    kill(sb, {}, "start-failed");
  });
}

void Registry::start_interpreter(const std::shared_ptr<Sandbox>& sb) {
  auto failed = [this, sb](const std::string& why) {
    finish_start(sb, StartError::server("the code interpreter did not start: " + why));
    kill(sb, {}, "start-failed");
  };
  std::weak_ptr<Sandbox> weak = sb;
  auto ended = [this, weak](const std::string& why) {
    auto s = weak.lock();
    // A warm one whose interpreter (its kernel) ended is not handed out: it ends, and the pool starts another.
    if (!s || !s->pooled || s->killing || s->state != Sandbox::State::Running) return;
    log().warn("pool_kernel_ended").str("sandbox", s->id).str("template", s->tmpl.name).str("msg", why + "; replaced");
    kill(s, {}, "kernel-ended");
  };
  start_code_interpreter(sb, [this, sb, failed](std::optional<std::string> error) {
    if (error) return failed(*error);
    keep_spare_relay(sb);  // the first runCode's relay, started already
    if (sb->pooled) {
      // Said whatever the mode: that the kernel was up before any tenant asked for the sandbox.
      if (logs_lifecycle())
        log().info("pool_kernel_ready").str("sandbox", sb->id).str("template", sb->tmpl.name).num("kernel_pid", sb->interpreter->kernel_pid);
      return finish_start(sb, std::nullopt);
    }
    hand_over_code_interpreter(sb, [this, sb, failed](std::optional<std::string> e) {
      if (e) return failed(*e);
      finish_start(sb, std::nullopt);
    });
  }, ended);
}

void Registry::finish_start(const std::shared_ptr<Sandbox>& sb, std::optional<StartError> error) {
  if (sb->state != Sandbox::State::Starting) return;
  if (!error) {
    sb->state = Sandbox::State::Running;
    if (sb->pooled) {
      sb->expiry->cancel();  // a warm sandbox waits for its tenant as long as it takes
      if (opt_.verbose) log().info("pool_ready").str("sandbox", sb->id).str("template", sb->tmpl.name);
    } else {
      ++created_total_;
      arm_expiry(sb);
      if (logs_lifecycle())
        log().info("create").str("tenant", sb->tenant).str("sandbox", sb->id).str("template", sb->tmpl.name)
            .str("layer", sb->tmpl.layer).flag("warm", sb->from_pool).flag("secure", !sb->access_token.empty())
            .real("ms", ms_since(sb->started_at));
    }
  } else {
    sb->state = Sandbox::State::Ending;
    if (!sb->pooled) ++failed_total_;
    if (!sb->pooled || opt_.verbose)
      log().warn(sb->pooled ? "pool_start_failed" : "create_failed").str("tenant", sb->tenant).str("sandbox", sb->id)
          .str("template", sb->tmpl.name).str("msg", error->message);
  }
  auto waiters = std::move(sb->on_ready);
  sb->on_ready.clear();
  for (auto& w : waiters) w(error);
}

void Registry::take_lifecycle(Sandbox& sb, const CreateRequest& req) {
  sb.end_at = sb.started_at + req.timeout;
  sb.timeout = req.timeout;
  sb.auto_pause = req.auto_pause, sb.auto_resume = req.auto_resume;
  sb.auto_pause_memory = req.auto_pause_memory;
}

void Registry::arm_expiry(const std::shared_ptr<Sandbox>& sb) {
  auto now = std::chrono::system_clock::now();
  auto left = sb->end_at > now ? sb->end_at - now : std::chrono::system_clock::duration::zero();
  sb->expiry->expires_after(std::chrono::duration_cast<std::chrono::steady_clock::duration>(left));
  sb->expiry->async_wait([this, sb](boost::system::error_code ec) {
    if (ec || sb->killing) return;
    on_timeout(sb);
  });
}

void Registry::on_timeout(const std::shared_ptr<Sandbox>& sb) {
  if (sb->state == Sandbox::State::Paused) {  // kept its --pause-ttl-hours
    if (logs_lifecycle()) log().info("pause_expired").str("tenant", sb->tenant).str("sandbox", sb->id);
    return kill(sb, {}, "pause-expired");
  }
  if (sb->auto_pause && sb->state == Sandbox::State::Running && !sb->pausing && opt_.cgroup_limits) {
    if (logs_lifecycle()) log().info("auto_pause").str("tenant", sb->tenant).str("sandbox", sb->id);
    std::string refused = pause_check ? pause_check(*sb) : "";
    if (refused.empty())
      return pause(sb, [this, sb](Result<void> r) {
        if (r || sb->killing) return;
        ++expired_total_;
        kill(sb, {}, "timeout");  // (the pause's failure is logged: pause_failed)
      }, sb->auto_pause_memory);
    log().warn("auto_pause_refused").str("tenant", sb->tenant).str("sandbox", sb->id).str("msg", refused + ": killed instead");
  }
  ++expired_total_;
  if (logs_lifecycle()) log().info("expire").str("tenant", sb->tenant).str("sandbox", sb->id);
  kill(sb, {}, "timeout");
}

void Registry::set_timeout(const std::shared_ptr<Sandbox>& sb, std::chrono::seconds t) {
  if (sb->killing) return;
  sb->end_at = std::chrono::system_clock::now() + t;
  arm_expiry(sb);
}

void Registry::kill(const std::shared_ptr<Sandbox>& sb, std::function<void()> done, std::string_view reason) {
  if (done) sb->on_gone.push_back(std::move(done));
  if (sb->dormant) return forget_dormant(sb, reason);
  if (sb->state == Sandbox::State::Paused && reason != "shutdown" && !sb->killing) kept_.remove(sb->id);
  if (sb->supervisor <= 0) {  // already gone, or not started yet (a snapshot's copy on its way: it stops there)
    sb->killing = true;
    auto g = std::move(sb->on_gone);
    sb->on_gone.clear();
    for (auto& f : g) f();
    return;
  }
  if (sb->killing) return;  // on its way
  sb->killing = true;
  if (logs_lifecycle() && (!sb->pooled || opt_.verbose))
    log().info("kill").str("tenant", sb->tenant).str("sandbox", sb->id).str("reason", reason);
  if (sb->state == Sandbox::State::Paused || sb->pausing) (void)thaw(sb);  // a frozen agent reads no shutdown
  if (sb->state == Sandbox::State::Starting) finish_start(sb, StartError::server("the sandbox was killed while it started"));
  sb->state = Sandbox::State::Ending;
  if (sb->agent && sb->agent->open()) sb->agent->call(agent::request::shutdown(), {}, [](const agent::Frame&) {});
  else ::kill(sb->supervisor, SIGTERM);
  // Then signals, in case the supervisor does not end on its own.
  sb->expiry->cancel();
  sb->expiry->expires_after(std::chrono::seconds(5));
  sb->expiry->async_wait([this, sb](boost::system::error_code ec) {
    if (ec || sb->supervisor <= 0) return;
    ::kill(sb->supervisor, SIGTERM);
    sb->expiry->expires_after(std::chrono::seconds(10));
    sb->expiry->async_wait([sb](boost::system::error_code ec2) {
      if (!ec2 && sb->supervisor > 0) ::kill(sb->supervisor, SIGKILL);
    });
  });
}

void Registry::on_supervisor_exit(pid_t pid, int status) {
  if (auto u = uid_of_.find(pid); u != uid_of_.end()) {
    uids_.erase(u->second);  // its processes are gone with it (cgroup kill, pid namespace)
    uid_of_.erase(u);
  }
  auto it = by_pid_.find(pid);
  if (it == by_pid_.end()) return;
  std::string id = it->second;
  by_pid_.erase(it);
  std::shared_ptr<Sandbox> sb;
  if (auto sit = sandboxes_.find(id); sit != sandboxes_.end()) {
    sb = sit->second;
    sandboxes_.erase(sit);
  } else if (auto pit = pooled_.find(id); pit != pooled_.end()) {
    sb = pit->second;
    pooled_.erase(pit);
    if (auto pool = pools_.find(sb->tmpl.name); pool != pools_.end()) {
      auto& r = pool->second.ready;
      bool was_ready = std::erase(r, sb) > 0;
      if (was_ready) fill_pool(sb->tmpl.name);  // a warm one that died is replaced
    }
  } else {
    return;
  }
  sb->supervisor = -1;
  // A sandbox that ends without being asked to (its supervisor died) is said whatever the mode.
  if ((logs_lifecycle() && (!sb->pooled || opt_.verbose)) || !sb->killing) {
    auto l = log().at(sb->killing ? "info" : "warn", "gone");
    l.str("tenant", sb->tenant).str("sandbox", id).num("supervisor", pid);
    if (WIFEXITED(status)) l.num("exit", WEXITSTATUS(status));
    else l.num("signal", WTERMSIG(status));
    if (!sb->killing) l.str("msg", "the supervisor ended on its own");
  }
  if (sb->state == Sandbox::State::Starting) {
    std::string why = sb->log_tail;
    while (!why.empty() && why.back() == '\n') why.pop_back();
    auto nl = why.rfind('\n');
    if (nl != std::string::npos) why = why.substr(nl + 1);
    finish_start(sb, StartError::server(why.empty() ? "the sandbox's supervisor ended before it was ready" : why));
  }
  sb->state = Sandbox::State::Ending;
  if (sb->agent) sb->agent->close();
  if (sb->expiry) sb->expiry->cancel();
  boost::system::error_code ec;
  if (sb->log) sb->log->close(ec);
  scan_audit(*sb);  // its last decisions, before the log goes with the directory
  for (auto& f : sb->before_removal) f(*sb);
  sb->before_removal.clear();
  if (sb->keep_home) keep_home(*sb);
  std::error_code rec;
  fs::remove_all(sb->dir, rec);
  if (rec) log().error("cleanup_failed").str("tenant", sb->tenant).str("sandbox", id).str("msg", "remove " + sb->dir + ": " + rec.message());
  auto g = std::move(sb->on_gone);
  sb->on_gone.clear();
  for (auto& f : g) f();
}

std::shared_ptr<Sandbox> Registry::find(const std::string& id) const {
  auto it = sandboxes_.find(id);
  return it == sandboxes_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<Sandbox>> Registry::of_tenant(const std::string& tenant) const {
  std::vector<std::shared_ptr<Sandbox>> out;
  for (auto& [id, sb] : sandboxes_)
    if (sb->tenant == tenant) out.push_back(sb);
  return out;
}

Result<void> Registry::thaw(const std::shared_ptr<Sandbox>& sb) {
  auto knobs = cgroup::freezers_of(sb->cgroup_dirs);
  if (knobs.empty()) return fail(Error::msg("resume", "this sandbox has no freezer cgroup here"));
  Result<void> r;
  for (const auto& k : knobs)
    if (!k.thaw() && r) r = fail(Error::sys("write " + k.file));
  return r;
}

void Registry::pause(const std::shared_ptr<Sandbox>& sb, std::function<void(Result<void>)> done, bool keep_memory) {
  auto failed = [this, sb, &done](Error e) {
    log().warn("pause_failed").str("tenant", sb->tenant).str("sandbox", sb->id).str("msg", e.str());
    done(fail(std::move(e)));
  };
  if (sb->pausing) return failed(Error::msg("pause", "sandbox " + sb->id + " is being paused already"));
  if (!keep_memory) return pause_files_only(sb, std::move(done));
  auto knobs = cgroup::freezers_of(sb->cgroup_dirs);
  if (knobs.empty()) return failed(Error::msg("pause", "this sandbox has no freezer cgroup here"));
  for (const auto& k : knobs)
    if (!k.freeze()) {
      auto e = Error::sys("write " + k.file);
      (void)thaw(sb);
      return failed(std::move(e));
    }
  sb->pausing = true;
  await_frozen(sb, std::move(knobs), std::chrono::steady_clock::now() + opt_.freeze_wait, std::move(done));
}

// A clock, not a count of polls: on a loaded host a 5 ms wait lasts longer,
// and a task in a short uninterruptible wait must not be taken for one that
// cannot be frozen. The sandbox may end meanwhile (killed, its time up, its
// supervisor gone): the pause then fails.
void Registry::await_frozen(const std::shared_ptr<Sandbox>& sb, std::vector<cgroup::Freezer> knobs,
                            std::chrono::steady_clock::time_point give_up, std::function<void(Result<void>)> done) {
  auto finish = [this, sb, done](Result<void> r) {
    sb->pausing = false;
    if (!r) log().warn("pause_failed").str("tenant", sb->tenant).str("sandbox", sb->id).str("msg", r.error().str());
    done(std::move(r));
  };
  if (sb->killing || sb->state == Sandbox::State::Ending)
    return finish(fail(Error::msg("pause", "sandbox " + sb->id + " ended while it was being paused")));
  const cgroup::Freezer* pending = nullptr;
  for (const auto& k : knobs)
    if (!k.frozen()) {
      pending = &k;
      break;
    }
  if (!pending) {
    sb->state = Sandbox::State::Paused;
    if (logs_lifecycle()) log().info("pause").str("tenant", sb->tenant).str("sandbox", sb->id);
    // Its timeout stops here; the pause is kept --pause-ttl-hours.
    sb->end_at = std::chrono::system_clock::now() + opt_.pause_ttl;
    arm_expiry(sb);
    keep_pause(*sb);
    return finish({});
  }
  if (std::chrono::steady_clock::now() >= give_up) {
    std::string seen = pending->state();
    (void)thaw(sb);
    return finish(fail(Error::msg("pause", pending->check + " did not read " + pending->frozen_when + " within " +
                                               std::to_string(opt_.freeze_wait.count()) + " ms (it reads \"" + seen +
                                               "\"): a process of the sandbox could not be frozen; the sandbox was thawed and runs on")));
  }
  // v1 tries each task once per write of FROZEN: a vfork parent that entered
  // its wait after that try, its child frozen before exec, was never frozen
  // (seen in CI: FREEZING for 3 s under load). Writing the knob again tries it
  // again, now asleep, and freezes it. Harmless on v2 and on frozen tasks.
  (void)pending->freeze();
  auto timer = std::make_shared<boost::asio::steady_timer>(io_, std::chrono::milliseconds(5));
  timer->async_wait([this, sb, knobs = std::move(knobs), give_up, done = std::move(done), timer](boost::system::error_code ec) mutable {
    if (ec) return;  // the server is going away
    await_frozen(sb, std::move(knobs), give_up, std::move(done));
  });
}

Result<void> Registry::resume(const std::shared_ptr<Sandbox>& sb) {
  if (auto r = thaw(sb); !r) {
    log().warn("resume_failed").str("tenant", sb->tenant).str("sandbox", sb->id).str("msg", r.error().str());
    return r;
  }
  sb->state = Sandbox::State::Running;
  sb->paused_disk_bytes = 0;
  sb->end_at = std::chrono::system_clock::now() + sb->timeout;
  arm_expiry(sb);
  kept_.drop_record(sb->id);
  if (logs_lifecycle()) log().info("resume").str("tenant", sb->tenant).str("sandbox", sb->id);
  return {};
}

Registry::Usage Registry::usage(const std::shared_ptr<Sandbox>& sb) {
  Usage u;
  auto used = cgroup::read_usage(sb->cgroup_dirs);
  u.mem_bytes = used.memory_bytes;
  u.mem_cache = used.memory_cache;
  const bool have_cpu = used.cpu_ns.has_value();
  const uint64_t cpu_ns = used.cpu_ns.value_or(0);
  auto now = std::chrono::steady_clock::now();
  if (have_cpu && sb->last_cpu_at.time_since_epoch().count() != 0 && cpu_ns >= sb->last_cpu_ns) {
    double wall_ns = std::chrono::duration<double, std::nano>(now - sb->last_cpu_at).count();
    if (wall_ns > 0) u.cpu_pct = 100.0 * static_cast<double>(cpu_ns - sb->last_cpu_ns) / wall_ns / std::max(0.01, sb->tmpl.cpus);
  }
  if (have_cpu) sb->last_cpu_ns = cpu_ns, sb->last_cpu_at = now;
  return u;
}

void Registry::scan_audit(Sandbox& sb) {
  int fd = ::open(sb.audit_log.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;
  EgressCounts& c = egress_[sb.tenant];
  char buf[65536];
  for (;;) {
    ssize_t n = ::pread(fd, buf, sizeof buf, static_cast<off_t>(sb.audit_offset));
    if (n <= 0) break;
    sb.audit_offset += static_cast<uint64_t>(n);
    sb.audit_partial.append(buf, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = sb.audit_partial.find('\n', start)) != std::string::npos; start = nl + 1) {
      auto j = parse_json(std::string_view(sb.audit_partial).substr(start, nl - start));
      if (!j.is_object()) continue;
      std::string ev = j.value("event", "");
      if (ev == "exfiltration") ++c.exfiltration;
      if (ev == "egress" || ev == "dns") {
        auto d = j.find("decision"), p = j.find("protocol");
        if (d != j.end() && d->is_string() && p != j.end() && p->is_string())
          ++c.decisions[{p->get<std::string>(), d->get<std::string>()}];
      }
    }
    sb.audit_partial.erase(0, start);
    if (sb.audit_partial.size() > (1u << 20)) sb.audit_partial.clear();  // a line that long is no decision
  }
  ::close(fd);
}

const std::map<std::string, EgressCounts>& Registry::egress_counts() {
  for (auto& [id, sb] : sandboxes_) scan_audit(*sb);
  return egress_;
}

void Registry::kill_all(std::function<void()> done) {
  stopping_ = true;
  for (auto& [name, p] : pools_)
    if (p.retry) p.retry->cancel();
  auto all = sandboxes_;
  all.insert(pooled_.begin(), pooled_.end());
  if (all.empty()) return done();
  auto left = std::make_shared<size_t>(all.size());
  for (auto& [id, sb] : all) {
    // A paused sandbox outlives the server (kept_pauses.hpp): its home is kept once its supervisor ends.
    // (or one whose filesystem-only pause is ending its processes: pause_files_only)
    sb->keep_home = sb->keep_home || (sb->state == Sandbox::State::Paused && !sb->dormant && kept_.has(id));
    kill(sb, [left, done] {
      if (--*left == 0) done();
    }, "shutdown");
  }
}

// ---- a pause that outlives the server (kept_pauses.hpp) ----

bool Registry::keep_pause(const Sandbox& sb, std::string* why, KeptPause* written) {
  // Not kept: a pool's, one on a host workspace (mcp), one with network.rules (their values never go to disk).
  if (!keeps_pauses_ || sb.pooled || sb.tenant.empty() || sb.host_workspace || !sb.rules_shown.empty()) {
    if (why) *why = !sb.rules_shown.empty() ? "its network.rules' values are never written to disk, and its processes would end"
                                             : "this sandbox's files are not kept apart from its processes here";
    return false;
  }
  KeptPause k;
  k.id = sb.id, k.tenant = sb.tenant, k.template_name = sb.tmpl.name;
  k.access_token = sb.access_token, k.traffic_token = sb.traffic_token, k.mask_request_host = sb.mask_request_host;
  k.metadata = sb.metadata, k.env_vars = sb.env_vars, k.allow_out = sb.allow_out, k.deny_out = sb.deny_out;
  k.started_at = sb.started_at;
  k.paused_at = std::chrono::system_clock::now();
  k.timeout = sb.timeout, k.auto_pause = sb.auto_pause, k.auto_resume = sb.auto_resume;
  k.auto_pause_memory = sb.auto_pause_memory;
  if (auto r = kept_.write(k); !r) {
    if (why) *why = r.error().str();
    else log().warn("pause_not_kept").str("tenant", sb.tenant).str("sandbox", sb.id).str("msg", r.error().str() + ": a restart of the server ends it");
    return false;
  }
  if (written) *written = std::move(k);
  return true;
}

void Registry::keep_home(const Sandbox& sb) {
  if (::rename((sb.dir + "/home").c_str(), kept_.home_of(sb.id).c_str()) != 0) {
    log().error("pause_not_kept").str("tenant", sb.tenant).str("sandbox", sb.id).str("msg", "move its home: " + std::string(std::strerror(errno)));
    kept_.remove(sb.id);
    return;
  }
  if (logs_lifecycle()) log().info("pause_kept").str("tenant", sb.tenant).str("sandbox", sb.id);
}

void Registry::hold_kept(const std::function<const Template*(const std::string&)>& template_of) {
  std::error_code ec;
  fs::create_directories(kept_.dir(), ec);
  ::chmod(kept_.dir().c_str(), 0700);
  keeps_pauses_ = !ec;
  for (auto& k : kept_.load()) {
    const Template* t = template_of(k.template_name);
    if (!t) {
      log().warn("recovery").str("sandbox", k.id).str("msg", "paused sandbox dropped: its template " + k.template_name + " is not served any more");
      kept_.remove(k.id);
      continue;
    }
    hold_dormant(k, *t);
    log().info("recovery").str("tenant", k.tenant).str("sandbox", k.id).str("msg", "paused sandbox kept from a previous server (its processes ended with it)");
  }
}

std::shared_ptr<Sandbox> Registry::hold_dormant(const KeptPause& k, const Template& t) {
  auto sb = std::make_shared<Sandbox>();
  sb->id = k.id, sb->tenant = k.tenant, sb->tmpl = t;
  sb->access_token = k.access_token, sb->traffic_token = k.traffic_token, sb->mask_request_host = k.mask_request_host;
  sb->metadata = k.metadata, sb->env_vars = k.env_vars, sb->allow_out = k.allow_out, sb->deny_out = k.deny_out;
  sb->started_at = k.started_at;
  sb->timeout = k.timeout, sb->auto_pause = k.auto_pause, sb->auto_resume = k.auto_resume;
  sb->auto_pause_memory = k.auto_pause_memory;
  sb->dir = opt_.state_dir + "/sandboxes/" + k.id;
  sb->home = kept_.home_of(k.id);
  sb->audit_log = sb->dir + "/audit.jsonl";
  sb->state = Sandbox::State::Paused;
  sb->dormant = true;
  sb->expiry = std::make_unique<asio::steady_timer>(io_);
  sb->paused_disk_bytes = disk_bytes(sb->home, UINT64_MAX);  // (its tenant's pausedDiskMB counts it)
  sb->end_at = k.paused_at + opt_.pause_ttl;  // kept --pause-ttl-hours from its pause, this server's setting
  arm_expiry(sb);
  sandboxes_[k.id] = sb;
  return sb;
}

// E2B's filesystem-only pause: what a restart of the server does to a paused
// sandbox (its processes end, its home is kept apart), done to this one now.
void Registry::pause_files_only(const std::shared_ptr<Sandbox>& sb, std::function<void(Result<void>)> done) {
  auto refuse = [this, sb, &done](std::string why) {
    const bool runs_on = sb->state == Sandbox::State::Running;
    auto e = Error::msg("pause", "a filesystem-only pause (keepMemory false) of sandbox " + sb->id + " is not possible: " + why +
                                     (runs_on ? "; it runs on" : ""));
    log().warn("pause_failed").str("tenant", sb->tenant).str("sandbox", sb->id).str("msg", e.str());
    done(fail(std::move(e)));
  };
  if (sb->state != Sandbox::State::Running || sb->killing || sb->supervisor <= 0) return refuse("it is not running");
  std::string why;
  KeptPause rec;
  if (!keep_pause(*sb, &why, &rec)) return refuse(why);
  sb->pausing = true;
  sb->keep_home = true;  // on_supervisor_exit moves its home to the kept pause
  if (logs_lifecycle()) log().info("pause").str("tenant", sb->tenant).str("sandbox", sb->id).str("kept", "filesystem only: its processes end");
  kill(sb, [this, sb, rec = std::move(rec), done = std::move(done)]() mutable {
    sb->pausing = false;
    if (stopping_ || !kept_.has(sb->id))  // the server stops meanwhile (kept for the next), or the home could not be moved
      return done(fail(Error::msg("pause", "sandbox " + sb->id + " ended while its files were being kept")));
    hold_dormant(rec, sb->tmpl);
    done({});
  }, "pause-files-only");
}

void Registry::forget_dormant(const std::shared_ptr<Sandbox>& sb, std::string_view reason) {
  sb->killing = true;
  if (sb->expiry) sb->expiry->cancel();
  if (auto it = sandboxes_.find(sb->id); it != sandboxes_.end() && it->second == sb) sandboxes_.erase(it);
  if (reason != "shutdown") {  // the server's stop keeps it for the next one
    kept_.remove(sb->id);
    if (logs_lifecycle()) log().info("kill").str("tenant", sb->tenant).str("sandbox", sb->id).str("reason", reason);
  }
  auto g = std::move(sb->on_gone);
  sb->on_gone.clear();
  for (auto& f : g) f();
}

void Registry::revive(const std::shared_ptr<Sandbox>& sb, CreateRequest req, ReadyFn done) {
  if (!sb->dormant || sb->reviving || sb->killing)
    return done(std::unexpected(StartError::server("sandbox " + sb->id + " is being resumed already")));
  sb->reviving = true;
  const std::string seed = kept_.seed_of(sb->id);
  std::error_code ec;
  fs::remove_all(seed, ec);
  if (::mkdir(seed.c_str(), 0700) != 0) {
    sb->reviving = false;
    return done(std::unexpected(StartError::server("mkdir " + seed + ": " + std::strerror(errno))));
  }
  req.tenant = sb->tenant, req.tmpl = sb->tmpl;
  req.metadata = sb->metadata, req.env_vars = sb->env_vars, req.allow_out = sb->allow_out, req.deny_out = sb->deny_out;
  req.secure = !sb->access_token.empty(), req.mask_request_host = sb->mask_request_host;
  req.auto_pause = sb->auto_pause, req.auto_resume = sb->auto_resume, req.auto_pause_memory = sb->auto_pause_memory;
  req.seed_home = seed + "/home";
  req.revive = KeptPause{.id = sb->id, .tenant = sb->tenant, .template_name = sb->tmpl.name, .access_token = sb->access_token,
                         .traffic_token = sb->traffic_token, .started_at = sb->started_at};
  // Swept as a snapshot's copy (a planted .bashrc or git hook would run in the new start); then a seeded create.
  run_helper([home = sb->home, seed] { return take_snapshot_copy(home, seed); }, [this, sb, seed, req, done](int status) mutable {
    sb->reviving = false;
    if (sb->killing) return done(std::unexpected(StartError::server("the sandbox was killed while it was being resumed")));
    if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::string why = read_file(seed + "/error.txt");
      return done(std::unexpected(StartError::server("its kept home could not be swept: " + (why.empty() ? "status " + std::to_string(status) : why))));
    }
    auto planted = parse_json(read_file(seed + "/planted.json"));
    if (logs_lifecycle())
      log().info("revive").str("tenant", sb->tenant).str("sandbox", sb->id).str("quarantined", planted.is_array() ? planted.dump() : "[]");
    sandboxes_.erase(sb->id);  // the new start takes its place (and its quota) under the same id
    create(req, [this, sb, done](Started up) {
      if (!up) {
        sandboxes_.emplace(sb->id, sb);  // dormant still, its home kept: a later connect tries again
        return done(std::move(up));
      }
      kept_.remove(sb->id);
      sb->expiry->cancel();  // (its --pause-ttl-hours: the new start has its own timeout)
      done(std::move(up));
    });
  });
}

}  // namespace exg::serve
