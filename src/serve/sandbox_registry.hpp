// The sandboxes this server holds. Each one is its own `exguardian session`
// supervisor process (like a containerd shim): crash-isolated from the server
// and from the other sandboxes, with its own egress proxy, audit log, cgroup
// and agent. The server spawns it with PR_SET_PDEATHSIG (SIGTERM: the
// supervisor then takes its sandbox down and cleans up as after `run`), keeps
// its pid and control socket under --state-dir/sandboxes/<id>/, and talks to
// it through the control socket with the agent protocol. A server that was
// killed leaves those directories behind: the next start finds each one,
// kills a supervisor still alive (checked by its command line), and removes
// the directory.
//
// Operations the agent cannot do are done here, on the sandbox's cgroup
// (found by the supervisor's naming, exg-<supervisor pid>-<sandbox id>):
// pause/resume through the freezer, cpu and memory figures.
//
// The warm pool (serve --warm): per template, a few sandboxes started ahead
// of any request, exactly as a create would start them but with no tenant
// yet: each has its own supervisor, namespaces, cgroup, proxy, uid and home,
// like any other; nothing runs in it until it is claimed. A create that
// the pool can serve (its template, no allowOut/denyOut of its own) takes
// one: the supervisor is told the tenant (audit_tags: it held its audit
// lines until then), and the create is answered without waiting for a
// sandbox's start-up; a new one is started behind it. A sandbox is never
// handed out twice: a claimed one leaves the pool for good.
// A template with the code interpreter (code_interpreter.hpp) gets it in
// every sandbox before the sandbox counts as up, its default Python kernel
// running; in a pool's, before any tenant: the claim hands it over (the
// sandbox's envVars go to it then, never before), and one whose kernel ended
// is not handed out (an interpreter that ends while pooled takes its sandbox
// with it, and the pool starts another).
#pragma once
#include <sys/types.h>

#include <chrono>
#include <deque>
#include <expected>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <nlohmann/json.hpp>

#include "cgroup/freezer.hpp"
#include "serve/agent_conn.hpp"
#include "serve/kept_pauses.hpp"
#include "serve/log.hpp"
#include "serve/metrics.hpp"
#include "serve/snapshots.hpp"
#include "serve/start_error.hpp"
#include "serve/templates.hpp"
#include "serve/tenants.hpp"

namespace exg::serve {

// Where E2B's user has its home inside a sandbox (what E2B's base template gives).
inline constexpr char kE2bHome[] = "/home/user";

// One header of E2B's network.rules: set by the sandbox's proxy on every
// HTTPS request to `host` (an exact name or *.suffix), replacing the client's.
// The value goes to the supervisor in its environment (never a file, never
// the sandbox) as the secret E2B_RULE_<n> with "setHeader".
struct CodeInterpreter;

struct HeaderRule {
  std::string host, header, value;
};

struct CreateRequest {
  std::string tenant;
  Template tmpl;
  std::chrono::seconds timeout{300};
  nlohmann::json metadata = nlohmann::json::object();   // string -> string
  std::map<std::string, std::string> env_vars;
  std::vector<std::string> allow_out, deny_out;
  // `exguardian mcp` (src/mcp/) holds its sandboxes through this registry too:
  std::string workspace;  // a host directory mounted as the home; empty: a fresh one under the state dir
  std::string audit_log;  // where the supervisor logs; empty: <sandbox dir>/audit.jsonl (removed with it)
  std::vector<HeaderRule> header_rules;
  // The tenant's secrets (Tenant::secrets): a sandbox started for the request
  // holds them (never a pool's, started before its tenant was known).
  nlohmann::json tenant_secrets = nlohmann::json::array();
  std::vector<std::string> tenant_secret_hosts;
  // E2B's `secure`: envd calls must carry the sandbox's access token. false: no
  // token is made, and whoever knows the sandbox's id reaches its envd.
  bool secure = true;
  // E2B's network.maskRequestHost: the Host header a request relayed to a port of
  // the sandbox carries (${PORT}: the port); empty: localhost:PORT.
  std::string mask_request_host;
  // A snapshot's home (SnapshotRecord: --state-dir/snapshots/<id>/home) copied in before the sandbox starts.
  std::string seed_home;
  // A pause kept across a restart (kept_pauses.hpp) started again: its id, tokens and start time.
  std::optional<KeptPause> revive;
  // E2B's lifecycle: autoPause (onTimeout "pause"): the timeout pauses instead of killing;
  // autoResume.enabled: a request for the paused sandbox (envd or a port) resumes it.
  bool auto_pause = false, auto_resume = false;
  // autoPauseMemory (onTimeout.keepMemory): false, the timeout's pause is filesystem only (Registry::pause).
  bool auto_pause_memory = true;
};

struct Watcher {  // CreateWatcher / GetWatcherEvents: events kept until fetched
  int agent_watch = 0;
  uint64_t token = 0;
  std::string path;
  std::vector<nlohmann::json> events;
  bool overflow = false;
};

struct Process {  // what process.Process/List reports, kept while it runs
  std::string cmd;
  std::vector<std::string> args;
  nlohmann::json envs = nlohmann::json::object();
  std::string cwd, tag;
  bool pty = false;
  uint64_t exit_token = 0;  // the subscription that forgets it at its exit
};

struct Sandbox {
  enum class State { Starting, Running, Paused, Ending };
  std::string id;
  std::string tenant;
  Template tmpl;
  nlohmann::json metadata = nlohmann::json::object();
  std::map<std::string, std::string> env_vars;
  std::vector<std::string> allow_out, deny_out;
  nlohmann::json tenant_secrets = nlohmann::json::array();  // CreateRequest::tenant_secrets
  std::vector<std::string> tenant_secret_hosts;
  nlohmann::json rules_shown = nlohmann::json::object();  // GET's network.rules: header names, values withheld
  std::chrono::system_clock::time_point started_at, end_at;
  State state = State::Starting;
  std::string access_token;  // envd calls must carry it (X-Access-Token); empty: created with secure false
  // E2B's traffic access token: a request for another port of the sandbox
  // (E2b-Sandbox-Port, serve/port_proxy.cpp) may carry it instead (the code
  // interpreter SDK's /contexts calls carry only it). Empty with secure false.
  std::string traffic_token;
  std::string mask_request_host;  // CreateRequest::mask_request_host
  bool auto_pause = false, auto_resume = false;  // CreateRequest's
  bool auto_pause_memory = true;                  // CreateRequest's
  std::chrono::seconds timeout{300};  // the create's: what a resume gives it again
  uint64_t paused_disk_bytes = 0;     // its home's size when it was paused (the tenant's pausedDiskMB)
  std::string dir;           // --state-dir/sandboxes/<id>
  std::string home;          // the workspace: the user's home and default cwd
  std::string audit_log;     // the supervisor's audit log (JSON lines)
  pid_t supervisor = -1;
  std::string plan_id;       // the supervisor's own sandbox id (its cgroup's name)
  std::vector<std::string> cgroup_dirs;
  uid_t uid = 0;             // the sandbox's user, as the agent sees itself
  gid_t gid = 0;
  bool control_ready = false;  // the supervisor said "session ID ready on unix:PATH"
  bool user_known = false;     // and "session ID user uid U gid G home H" (uid, gid, home above)
  std::shared_ptr<AgentConn> agent;
  std::shared_ptr<CodeInterpreter> interpreter;  // its template's code interpreter (code_interpreter.hpp)
  int spare_relay = 0;  // a relay started ahead for its next port request (port_relay.hpp); 0: none
  std::unique_ptr<boost::asio::steady_timer> expiry;
  std::unique_ptr<boost::asio::posix::stream_descriptor> log;  // the supervisor's stderr
  std::string log_tail;      // its last lines (the reason of a failed start)
  std::string log_partial;   // a line not ended yet
  bool killing = false;
  bool pausing = false;      // its cgroups are being frozen (Registry::pause has not answered yet)
  bool pooled = false;       // in the warm pool: no tenant yet, invisible to every API call
  bool from_pool = false;    // claimed from the warm pool (the log says so)
  bool seeded = false;       // its home is a snapshot's copy (spawn gives the whole tree to its uid)
  // Paused before the server restarted (kept_pauses.hpp): no supervisor; a
  // connect or resume starts it again (Registry::revive), its home kept apart.
  bool dormant = false;
  bool host_workspace = false;  // CreateRequest::workspace (mcp): never kept past the server
  bool reviving = false;     // that start is on its way
  bool keep_home = false;    // the server stops: its home moves to the kept pause, not away
  char log_buf[4096];
  std::map<int, Process> processes;
  std::map<std::string, Watcher> watchers;
  uint64_t next_watcher = 1;
  // cpu figures between two metrics calls
  uint64_t last_cpu_ns = 0;
  std::chrono::steady_clock::time_point last_cpu_at{};
  std::vector<std::function<void(const std::optional<StartError>& error)>> on_ready;  // create waits here
  std::vector<std::function<void()>> on_gone;                          // kill waits here
  std::vector<std::function<void(const Sandbox&)>> before_removal;     // last reads of its directory (its audit log)
  // How far the server has read the sandbox's audit log (egress counters of /metrics).
  uint64_t audit_offset = 0;
  std::string audit_partial;
};


struct RegistryOptions {
  std::string state_dir;
  std::string exe;  // the exguardian binary supervisors run
  bool verbose = false;
  size_t max_sandboxes = 1000;  // over all tenants
  bool cgroup_limits = true;     // false: --no-cgroup-limits (the supervisors get no --memory/--pids/--cpus)
  // serve's log (lifecycle lines: create, kill, expire, pause, resume, gone). None
  // (mcp): those lines go to stderr with `verbose` only; warnings always.
  Log* log = nullptr;
  // How long a pause waits for every task of a sandbox to be frozen. A task
  // enters the refrigerator at its next return to user space; one in a short
  // uninterruptible wait (a page fault's read) delays that, one that cannot
  // return (a hung FUSE or NFS request) never does.
  std::chrono::milliseconds freeze_wait{3000};
  // How long a paused sandbox is kept (--pause-ttl-hours): its timeout stops at
  // the pause, and this one starts; then it is killed as if by its timeout.
  std::chrono::seconds pause_ttl{30LL * 24 * 3600};
};

class Registry {
 public:
  Registry(boost::asio::io_context& io, RegistryOptions opt);
  ~Registry();
  // Takes the state directory (one server per directory: a lock), and destroys
  // what a previous server left there. Returns what was cleaned, for the log.
  // With `template_of`: the pauses an earlier server kept (kept_pauses.hpp) are
  // held again as dormant paused sandboxes (one whose template is gone is dropped).
  Result<std::vector<std::string>> open(std::function<const Template*(const std::string&)> template_of = {});

  using Started = std::expected<std::shared_ptr<Sandbox>, StartError>;
  using ReadyFn = std::function<void(Started)>;
  // Takes a warm sandbox when the pool has one for the request, else spawns
  // the supervisor; `done` runs once the sandbox is up (or failed).
  void create(const CreateRequest& req, ReadyFn done);
  // Keeps `size` sandboxes of `tmpl` started ahead (0: none); starts them now.
  void set_pool(const Template& tmpl, size_t size);
  size_t pool_ready() const;  // warm sandboxes ready now, over all templates
  std::shared_ptr<Sandbox> find(const std::string& id) const;
  std::vector<std::shared_ptr<Sandbox>> of_tenant(const std::string& tenant) const;
  size_t count() const { return sandboxes_.size(); }
  // Ends the sandbox (shutdown through the agent, then signals); `done` when it is gone.
  // `reason` is for the log: request, timeout, shutdown, start-failed, ...
  void kill(const std::shared_ptr<Sandbox>& sb, std::function<void()> done, std::string_view reason = "request");
  // Starts a dormant sandbox again (same id, tokens and metadata) from its kept
  // home, swept first as a snapshot's copy is; `req` gives the tenant's
  // secrets and the timeout. Failed: it stays dormant, its home kept.
  void revive(const std::shared_ptr<Sandbox>& sb, CreateRequest req, ReadyFn done);
  void set_timeout(const std::shared_ptr<Sandbox>& sb, std::chrono::seconds t);
  // E2B's snapshot of a sandbox (snapshots.hpp): its home copied and swept in a
  // child process while it runs on; `done` with the record once it is saved.
  // internal: a fork's, never listed.
  void take_snapshot(const std::shared_ptr<Sandbox>& sb, std::vector<std::string> names, bool internal,
                     std::function<void(Result<SnapshotRecord>)> done);
  SnapshotStore& snapshots() { return snapshots_; }
  // Freezes the sandbox's cgroups; `done` once the kernel reads every one
  // back frozen (state Paused), or with the error that left it running
  // (not frozen within opt.freeze_wait: thawed again; killed meanwhile). The
  // wait is a timer on the event loop: other requests go on meanwhile.
  // keep_memory false (E2B's filesystem-only pause, `pause({keepMemory:
  // false})`): no freezer; its processes end and its home is kept as a pause
  // kept across a restart is (kept_pauses.hpp), the sandbox held dormant: a
  // connect boots it again from that home (revive), a new boot (its boot id
  // changes: util/boot_id.hpp). Refused (running on) where a pause cannot be
  // kept on disk: a sandbox with network.rules, a pool's, mcp's.
  void pause(const std::shared_ptr<Sandbox>& sb, std::function<void(Result<void>)> done, bool keep_memory = true);
  // Asked before a pause (a request's or autoPause's): "" when the sandbox may
  // be paused, else why not (the tenant's pausedDiskMB: control_routes.cpp).
  std::function<std::string(Sandbox&)> pause_check;
  // Thaws it; its timeout starts again from now (the create's, E2B's rule).
  Result<void> resume(const std::shared_ptr<Sandbox>& sb);
  struct Usage {
    double cpu_pct = 0;
    uint64_t mem_bytes = 0, mem_cache = 0;
  };
  Usage usage(const std::shared_ptr<Sandbox>& sb);
  // Ends every sandbox (server shutdown); `done` once all are gone.
  void kill_all(std::function<void()> done);
  uint64_t created_total() const { return created_total_; }
  uint64_t failed_total() const { return failed_total_; }
  uint64_t expired_total() const { return expired_total_; }
  // Per tenant, every sandbox's audit log read up to now (also those gone: read at their end).
  const std::map<std::string, EgressCounts>& egress_counts();

 private:
  boost::asio::io_context& io_;
  RegistryOptions opt_;
  boost::asio::signal_set sigchld_;
  int lock_fd_ = -1;
  KeptPauses kept_;
  bool keeps_pauses_ = false;  // open() was given the templates (serve; mcp keeps none)
  std::map<std::string, std::shared_ptr<Sandbox>> sandboxes_;
  std::map<pid_t, std::string> by_pid_;
  uint64_t created_total_ = 0, failed_total_ = 0, expired_total_ = 0;
  struct Pool {
    Template tmpl;
    size_t size = 0;
    std::deque<std::shared_ptr<Sandbox>> ready;
    size_t starting = 0;
    unsigned failures = 0;  // in a row: the next try waits 1 s, 2 s, ... 60 s
    std::unique_ptr<boost::asio::steady_timer> retry;
  };
  std::map<std::string, Pool> pools_;                       // by template name
  std::map<std::string, std::shared_ptr<Sandbox>> pooled_;  // by id: warm and starting pool sandboxes
  bool stopping_ = false;                                   // kill_all: no more pool sandboxes
  size_t cold_starting_ = 0;                                // creates starting their own sandbox: the pool waits
  std::map<pid_t, uid_t> uid_of_;                           // supervisor -> the uid its sandbox runs as
  std::set<uid_t> uids_;                                    // those uids: no two sandboxes share one
  // A root server's sandboxes: a host uid no account and no other sandbox of this server has.
  uid_t pick_uid() const;

  // The supervisor of `sb` (fields set), with the request's egress; `done` once it is up.
  void spawn(const std::shared_ptr<Sandbox>& sb, const std::vector<std::string>& allow_out,
             const std::vector<std::string>& deny_out, const std::vector<HeaderRule>& header_rules, ReadyFn done);
  std::shared_ptr<Sandbox> new_sandbox(const Template& tmpl);
  bool claim(const CreateRequest& req, ReadyFn& done);
  void fill_pool(const std::string& name);
  std::map<std::string, EgressCounts> egress_;

  // Reads what the sandbox's supervisor appended to its audit log since the last call.
  void scan_audit(Sandbox& sb);

  void wait_children();
  // Runs body() in a child process (it dies with the server); done(wait status, or -1: no fork) once it has ended.
  void run_helper(std::function<int()> body, std::function<void(int status)> done);
  std::map<pid_t, std::function<void(int)>> helpers_;
  SnapshotStore snapshots_;
  void on_supervisor_exit(pid_t pid, int status);
  void read_log(const std::shared_ptr<Sandbox>& sb);
  void on_log_line(const std::shared_ptr<Sandbox>& sb, const std::string& line);
  void became_ready(const std::shared_ptr<Sandbox>& sb);
  // The template's code interpreter started in it, its kernel up; handed over at once unless pooled.
  void start_interpreter(const std::shared_ptr<Sandbox>& sb);
  void finish_start(const std::shared_ptr<Sandbox>& sb, std::optional<StartError> error);
  // Kept pauses (kept_pauses.hpp): written at a pause, the home moved at the
  // server's stop, held again at the next start, forgotten at a kill.
  // keep_pause: false when it is not kept (why: logged, or in *why); *written: the record.
  bool keep_pause(const Sandbox& sb, std::string* why = nullptr, KeptPause* written = nullptr);
  // A sandbox paused with its files only, its processes ended: held as one kept across a restart is.
  std::shared_ptr<Sandbox> hold_dormant(const KeptPause& k, const Template& t);
  void pause_files_only(const std::shared_ptr<Sandbox>& sb, std::function<void(Result<void>)> done);
  void keep_home(const Sandbox& sb);
  void hold_kept(const std::function<const Template*(const std::string&)>& template_of);
  void forget_dormant(const std::shared_ptr<Sandbox>& sb, std::string_view reason);
  void arm_expiry(const std::shared_ptr<Sandbox>& sb);
  // What the timeout does: pause when autoPause asked for it (killed when that fails), else kill.
  void on_timeout(const std::shared_ptr<Sandbox>& sb);
  // The request's lifecycle (timeout, autoPause, autoResume) on a sandbox it starts or claims.
  static void take_lifecycle(Sandbox& sb, const CreateRequest& req);
  // Writes "thawed" to every freezer of the sandbox (resume, kill, a failed pause).
  Result<void> thaw(const std::shared_ptr<Sandbox>& sb);
  // pause's wait: polls the freezers (cgroup/freezer.hpp) every few ms on a timer until all read frozen.
  void await_frozen(const std::shared_ptr<Sandbox>& sb, std::vector<cgroup::Freezer> knobs,
                    std::chrono::steady_clock::time_point give_up, std::function<void(Result<void>)> done);
  Log& log() const;
  bool logs_lifecycle() const { return opt_.log || opt_.verbose; }
};

// 20 characters of [a-z0-9] from the kernel's random source.
std::string random_id(size_t n = 20);

}  // namespace exg::serve
