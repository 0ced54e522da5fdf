// exguardian runtime: runc's command line as engines use it, over crun or
// runsc. What is ours: create (config.json hardened, the egress holder
// started, the container's cgroups recorded), exec (the process hardened),
// delete (the holder stopped, no cgroup of the container left), errors in the
// words engines look for, features. Everything else is the wrapped
// runtime's own, run with the same arguments.
#include "cli/runtime_cmd.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "runtime/container_cgroups.hpp"
#include "runtime/egress_holder.hpp"
#include "runtime/harden.hpp"
#include "oci/layer.hpp"
#include "runtime/pod_identity.hpp"
#include "runtime/resource_caps.hpp"
#include "runtime/runtime_policy.hpp"
#include "runtime/spec_version.hpp"
#include "pid1/image.hpp"
#include "pid1/provide.hpp"
#include "sandbox/audit.hpp"
#include "util/json_parse.hpp"

namespace exg::cli {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

struct Globals {
  std::string root;
  std::string log, log_format = "text";
  bool systemd_cgroup = false, debug = false;
  std::string rootless, cgroup_manager;
  std::string handler, handlers_dir;
};

Globals g;

// One error: a line in --log in the format asked for (runc's: engines read
// it back), and on stderr. Exit status 1, as runc.
int error(const std::string& msg) {
  if (!g.log.empty()) {
    std::string line;
    if (g.log_format == "json")
      line = json{{"level", "error"}, {"msg", msg}, {"time", sandbox::utc_now_rfc3339()}}.dump() + "\n";
    else
      line = "time=\"" + sandbox::utc_now_rfc3339() + "\" level=error msg=" + json(msg).dump() + "\n";
    int fd = ::open(g.log.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0) {
      (void)!::write(fd, line.data(), line.size());
      ::close(fd);
    }
  }
  std::fprintf(stderr, "exguardian runtime: %s\n", msg.c_str());
  return 1;
}

bool read_text(const std::string& path, std::string& out) {
  std::ifstream f(path);
  if (!f) return false;
  out.assign(std::istreambuf_iterator<char>(f), {});
  return true;
}

// Written beside and renamed over: a reader never sees half of it.
bool write_text(const std::string& path, const std::string& text, mode_t mode = 0600) {
  std::string tmp = path + ".tmp" + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return false;
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  ok = ::close(fd) == 0 && ok;
  if (ok && ::rename(tmp.c_str(), path.c_str()) == 0) return true;
  ::unlink(tmp.c_str());
  return false;
}

// ----- the verb's arguments -------------------------------------------------

struct Args {
  std::vector<std::string> all;             // as given, after the verb
  std::map<std::string, std::string> opts;  // "--bundle" -> value (short forms folded)
  std::set<std::string> flags;
  std::string id;
  size_t id_index = std::string::npos;      // in `all`
};

const std::map<std::string, std::string> kShort = {{"-b", "--bundle"}, {"-p", "--process"}, {"-d", "--detach"},
                                                   {"-t", "--tty"},    {"-f", "--force"},   {"-a", "--all"},
                                                   {"-e", "--env"},    {"-u", "--user"},    {"-c", "--cap"},
                                                   {"-r", "--resources"}};

// Options that take a value, per verb (runc's; everything else is a flag).
std::set<std::string> value_options(const std::string& verb) {
  if (verb == "create" || verb == "run")
    return {"--bundle", "--pid-file", "--console-socket", "--preserve-fds"};
  if (verb == "exec")
    return {"--process", "--pid-file", "--console-socket", "--cwd",          "--env",    "--user",
            "--cap",     "--preserve-fds", "--process-label", "--apparmor", "--cgroup", "--additional-gids"};
  if (verb == "ps" || verb == "list") return {"--format"};
  if (verb == "check") return {"--profile"};
  if (verb == "events") return {"--interval"};
  if (verb == "update")
    return {"--resources", "--blkio-weight", "--cpu-period", "--cpu-quota", "--cpu-rt-period", "--cpu-rt-runtime",
            "--cpu-share",  "--cpuset-cpus",  "--cpuset-mems", "--kernel-memory", "--kernel-memory-tcp",
            "--memory",     "--memory-reservation", "--memory-swap", "--pids-limit", "--l3-cache-schema",
            "--mem-bw-schema"};
  return {};
}

Args parse_args(const std::string& verb, int argc, char** argv) {
  Args a;
  auto values = value_options(verb);
  for (int i = 0; i < argc; ++i) a.all.emplace_back(argv[i]);
  for (size_t i = 0; i < a.all.size(); ++i) {
    std::string t = a.all[i];
    if (t == "--") break;
    if (t.size() > 1 && t[0] == '-') {
      std::string name = t, value;
      bool inline_value = false;
      if (auto eq = t.find('='); eq != std::string::npos) {
        name = t.substr(0, eq), value = t.substr(eq + 1), inline_value = true;
      }
      if (name == "-f" && (verb == "ps" || verb == "list")) name = "--format";  // not --force there
      else if (name == "-q" && verb == "list") name = "--quiet";
      else if (name.size() == 2 && kShort.count(name)) name = kShort.at(name);
      else if (name.size() > 1 && name[1] != '-') name = "-" + name;  // runc accepts -bundle as --bundle
      if (values.count(name)) {
        if (!inline_value && i + 1 < a.all.size()) value = a.all[++i];
        a.opts[name] = value;
      } else {
        a.flags.insert(name);
      }
      continue;
    }
    a.id = t;
    a.id_index = i;
    break;
  }
  return a;
}

// ----- where things live -----------------------------------------------------

std::string our_dir(const std::string& id) { return g.root + "/exguardian/" + id; }
std::string backend_root(oci::Runtime rt) { return g.root + (rt == oci::Runtime::Runsc ? "/runsc" : "/crun"); }

bool valid_id(const std::string& id) {
  if (id.empty() || id.size() > 1024 || id == "." || id == "..") return false;
  return id.find('/') == std::string::npos && id.find('\0') == std::string::npos;
}

// The per-container record create leaves: backend, handler, walls, ports, holder.
std::optional<json> load_state(const std::string& id) {
  std::string text;
  if (!valid_id(id) || !read_text(our_dir(id) + "/state.json", text)) return std::nullopt;
  auto j = parse_json(text);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

// The container's cgroups create recorded (container_cgroups.hpp).
std::vector<std::string> cgroups_of(const json& st) {
  std::vector<std::string> out;
  if (st.contains("cgroups") && st["cgroups"].is_array())
    for (const auto& d : st["cgroups"])
      if (d.is_string()) out.push_back(d.get<std::string>());
  return out;
}

oci::Runtime runtime_of(const json& st) { return st.value("runtime", "crun") == "runsc" ? oci::Runtime::Runsc : oci::Runtime::Crun; }

// ----- running the wrapped runtime ----------------------------------------

std::optional<oci::CgroupView> cgroup_view_cache;

const oci::CgroupView& cgroup_view() {
  if (!cgroup_view_cache) {
    std::string text;
    read_text("/proc/self/mountinfo", text);
    cgroup_view_cache = oci::decide_cgroup_view(text);
  }
  return *cgroup_view_cache;
}

Result<oci::RuntimeChoice> backend(oci::Runtime rt) {
  return oci::choose_runtime(rt == oci::Runtime::Runsc ? layer::Kind::Gvisor : layer::Kind::Container,
                             rt == oci::Runtime::Runsc ? "" : "crun");
}

// The wrapped runtime's argv up to the verb: our global flags in its words.
Result<std::vector<std::string>> backend_argv(oci::Runtime rt) {
  auto choice = backend(rt);
  if (!choice) return fail(choice.error());
  std::vector<std::string> a = {choice->path};
  if (rt == oci::Runtime::Runsc) {
    a.push_back("--root=" + backend_root(rt));
    if (!g.log.empty()) a.push_back("--log=" + g.log);
    if (g.log_format == "json") a.push_back("--log-format=json");
    if (g.debug) a.push_back("--debug");
    if (g.systemd_cgroup) a.push_back("--systemd-cgroup");
    if (g.rootless == "true") a.push_back("--rootless");
    // Host network inside the container's namespace: the sandbox's sockets
    // are the kernel's there, where only the egress proxy is reachable
    // (oci/layer.hpp, "gVisor's network trade-off").
    a.push_back("--network=host");
    a.push_back("--platform=" + choice->platform);
    a.push_back("--oci-seccomp");
  } else {
    a.push_back("--root=" + backend_root(rt));
    if (!g.log.empty()) a.push_back("--log=" + g.log);
    if (!g.log_format.empty() && g.log_format != "text") a.push_back("--log-format=" + g.log_format);
    if (g.debug) a.push_back("--debug");
    if (g.systemd_cgroup) a.push_back("--systemd-cgroup");
    if (!g.rootless.empty()) a.push_back("--rootless=" + g.rootless);
    if (!g.cgroup_manager.empty()) a.push_back("--cgroup-manager=" + g.cgroup_manager);
  }
  return a;
}

// In the process about to exec crun: on a hybrid cgroup host crun refuses to
// run while it sees the empty v2 mount; hide it in a mount namespace of this
// process alone (oci/layer.hpp does the same in its runtime host).
bool prepare_backend_process(oci::Runtime rt) {
  if (rt != oci::Runtime::Crun || ::geteuid() != 0 || !cgroup_view().hide_unified) return true;
  if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_SLAVE, nullptr) != 0 ||
      ::umount2(cgroup_view().unified_path.c_str(), MNT_DETACH) != 0) {
    std::fprintf(stderr, "exguardian runtime: hide %s from crun: %s\n", cgroup_view().unified_path.c_str(),
                 std::strerror(errno));
    return false;
  }
  return true;
}

[[noreturn]] void exec_argv(const std::vector<std::string>& argv) {
  std::vector<char*> v;
  for (const auto& s : argv) v.push_back(const_cast<char*>(s.c_str()));
  v.push_back(nullptr);
  ::execv(v[0], v.data());
  std::fprintf(stderr, "exguardian runtime: exec %s: %s\n", v[0], std::strerror(errno));
  ::_exit(127);
}

// Runs the backend and returns its exit status (stdio, fds and the console
// socket are inherited as they are; quiet: its stderr to /dev/null).
int run_backend(oci::Runtime rt, const std::vector<std::string>& argv, std::string* captured = nullptr,
                bool quiet = false) {
  int p[2] = {-1, -1};
  if (captured && ::pipe2(p, O_CLOEXEC) != 0) return 1;
  pid_t pid = ::fork();
  if (pid == 0) {
    if (captured) ::dup2(p[1], 1);
    if (int null = quiet ? ::open("/dev/null", O_WRONLY | O_CLOEXEC) : -1; null >= 0) ::dup2(null, 2);
    if (!prepare_backend_process(rt)) ::_exit(1);
    exec_argv(argv);
  }
  if (captured) {
    ::close(p[1]);
    char buf[4096];
    ssize_t n;
    while ((n = ::read(p[0], buf, sizeof buf)) > 0) captured->append(buf, static_cast<size_t>(n));
    ::close(p[0]);
  }
  if (pid < 0) return 1;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

[[noreturn]] void exec_backend(oci::Runtime rt, const std::vector<std::string>& argv) {
  if (!prepare_backend_process(rt)) ::_exit(1);
  exec_argv(argv);
}

std::vector<std::string> with_verb(std::vector<std::string> base, const std::string& verb, const std::vector<std::string>& rest) {
  base.push_back(verb);
  base.insert(base.end(), rest.begin(), rest.end());
  return base;
}

// The container's status as the backend says it ("" when it cannot).
std::string backend_status(oci::Runtime rt, const std::string& id) {
  auto base = backend_argv(rt);
  if (!base) return "";
  std::string out;
  if (run_backend(rt, with_verb(*base, "state", {id}), &out) != 0) return "";
  auto j = parse_json(out);
  return j.is_object() ? j.value("status", "") : "";
}

// Whether the wrapped runtime has the container: asked of it, since its state
// is its own (crun keeps a directory per container, runsc a file per sandbox
// and container; a look for crun's directory once kept runsc's containers from
// ever being deleted). Quiet and out of --log: an engine reads the last error
// there, and "does not exist" is an answer here.
bool backend_knows(oci::Runtime rt, const std::string& id) {
  auto base = backend_argv(rt);
  if (!base) return false;
  std::erase_if(*base, [](const std::string& s) { return s.starts_with("--log=") || s.starts_with("--log-format="); });
  std::string out;
  return run_backend(rt, with_verb(*base, "state", {id}), &out, true) == 0;
}

// The container's init as the backend reported it at create: the pid-file
// the engine asked for, else the backend's state (0 when neither says).
pid_t created_pid(oci::Runtime rt, const std::vector<std::string>& base, const Args& a) {
  pid_t pid = 0;
  std::string pidtext;
  if (a.opts.count("--pid-file") && read_text(a.opts.at("--pid-file"), pidtext)) pid = std::atoi(pidtext.c_str());
  if (pid <= 0) {
    std::string out;
    if (run_backend(rt, with_verb(base, "state", {a.id}), &out) == 0) {
      auto j = parse_json(out);
      if (j.is_object()) pid = j.value("pid", 0);
    }
  }
  return pid;
}

// A container the backend made and create cannot hand over: deleted there,
// and whatever cgroups it had with it.
void delete_created(oci::Runtime rt, const std::vector<std::string>& base, const std::string& id,
                    const std::vector<std::string>& cgroups) {
  run_backend(rt, with_verb(base, "delete", {"--force", id}));
  if (auto r = runtime::remove_container_cgroups(cgroups, true); !r)
    std::fprintf(stderr, "exguardian runtime: %s\n", r.error().str().c_str());
}

// ----- exguardian-init, bound into every hardened container ---------------

Result<std::string> init_source() {
  if (auto installed = pid1::installed_copy(pid1::exe_dir())) return *installed;
  // A private copy under the runtime's root, named by its bytes (a later
  // exguardian with another init never takes this one).
  auto bytes = pid1::embedded();
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  char name[64];
  std::snprintf(name, sizeof name, "/exguardian/init-%016llx", static_cast<unsigned long long>(h));
  std::string path = g.root + name;
  struct stat st{};
  if (::stat(path.c_str(), &st) == 0 && static_cast<size_t>(st.st_size) == bytes.size() && st.st_uid == ::geteuid())
    return path;
  std::string tmp = path + ".tmp" + std::to_string(::getpid());
  if (!pid1::write_private_copy(tmp.c_str())) return fail(Error::sys("write " + tmp));
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail(Error::sys("rename " + tmp));
  return path;
}

// ----- verbs ----------------------------------------------------------------

std::string handlers_dir() {
  if (!g.handlers_dir.empty()) return g.handlers_dir;
  if (const char* e = std::getenv("EXGUARDIAN_HANDLERS_DIR"); e && *e) return e;
  return runtime::kDefaultHandlersDir;
}

// The handler's caps create recorded for the container.
runtime::ResourceCaps caps_of(const json& st) {
  runtime::ResourceCaps c;
  if (st.contains("pids_max")) c.pids = st["pids_max"].get<int64_t>();
  if (st.contains("memory_max")) c.memory_bytes = st["memory_max"].get<int64_t>();
  if (st.contains("cpus_max")) c.cpus = st["cpus_max"].get<double>();
  return c;
}

// What a cap lowered, for the operator: kubelet and `kubectl describe` show
// the pod spec's figures, the cgroup holds the handler's. One audit line,
// tagged as the container's egress lines are (pod, container, handler), and
// for `update` (a command someone typed, or an engine that logs it) a note
// on stderr. A log that cannot be opened loses the line, not the cap.
void report_capped(const json& st, const std::string& id, const char* verb, const json& changes) {
  if (changes.empty()) return;
  if (std::string(verb) == "update")
    std::fprintf(stderr, "exguardian runtime: %s %s: held to the handler's caps: %s\n", verb, id.c_str(),
               changes.dump().c_str());
  const std::string path = st.value("audit_log", "");
  if (path.empty()) return;
  json tags = st.contains("audit_tags") && st["audit_tags"].is_object() ? st["audit_tags"] : json::object();
  if (auto log = sandbox::AuditLog::open(path, id, std::move(tags)))
    log->write({{"event", "resources_capped"}, {"verb", verb}, {"changes", changes}});
}

int cmd_create(const std::string& verb, const Args& a) {
  if (verb == "run") return error("run: not supported; engines call create, then start");
  if (!valid_id(a.id)) return error("create: a container id is required");
  if (load_state(a.id) || fs::exists(backend_root(oci::Runtime::Crun) + "/" + a.id))
    return error("container with id exists: " + a.id);
  std::string bundle = a.opts.count("--bundle") ? a.opts.at("--bundle") : ".";
  std::string config_path = bundle + "/config.json";
  std::string text;
  if (!read_text(config_path, text)) return error("create: cannot read " + config_path + ": " + std::strerror(errno));
  json config = parse_json(text);
  if (config.is_discarded() || !config.is_object()) return error("create: " + config_path + ": not a JSON object");

  std::error_code ec;
  fs::create_directories(our_dir(a.id), ec);
  if (ec) return error("create: " + our_dir(a.id) + ": " + ec.message());
  ::chmod((g.root + "/exguardian").c_str(), 0700);
  auto cleanup_state = [&] { fs::remove_all(our_dir(a.id), ec); };
  json st = {{"id", a.id}, {"handler", g.handler}, {"runtime", "crun"}};

  // The pod's pause container holds the pod's namespaces and runs nothing
  // of the user's: the engine's config as it is.
  if (runtime::is_pod_sandbox(config)) {
    st["pod_sandbox"] = true;
    if (!write_text(our_dir(a.id) + "/state.json", st.dump())) return cleanup_state(), error("create: cannot write state");
    // (its only change: a spec version Debian 12's crun takes, spec_version.hpp)
    if (runtime::fit_spec_version_for_crun(config) && !write_text(config_path, config.dump(2) + "\n", 0644))
      return cleanup_state(), error("create: cannot write " + config_path);
    auto base = backend_argv(oci::Runtime::Crun);
    if (!base) return cleanup_state(), error(base.error().str());
    int rc = run_backend(oci::Runtime::Crun, with_verb(*base, "create", a.all));
    if (rc != 0) return cleanup_state(), rc;
    // Its cgroups, for delete to make sure they went (container_cgroups.hpp).
    pid_t pid = created_pid(oci::Runtime::Crun, *base, a);
    st["cgroups"] = pid > 0 ? runtime::container_cgroup_dirs(pid) : std::vector<std::string>{};
    if (pid <= 0 || !write_text(our_dir(a.id) + "/state.json", st.dump())) {
      delete_created(oci::Runtime::Crun, *base, a.id, cgroups_of(st));
      cleanup_state();
      return error(pid <= 0 ? "create: the container's pid is unknown" : "create: cannot write state");
    }
    return 0;
  }

  std::string profile;
  if (config.contains("annotations") && config["annotations"].is_object())
    profile = config["annotations"].value(runtime::kProfileAnnotation, "");
  auto rp = runtime::load_runtime_policy(handlers_dir(), g.handler, profile);
  if (!rp) return cleanup_state(), error("create: " + rp.error().str());
  auto init = init_source();
  if (!init) return cleanup_state(), error("create: exguardian-init: " + init.error().str());

  runtime::EgressHolderOptions ho;
  ho.container_id = a.id;
  ho.handler = g.handler;
  ho.engine_netns = runtime::engine_netns_path(config);
  ho.audit_tags = runtime::pod_identity(config);
  ho.audit_log = rp->policy.audit_log.value_or("/var/log/exguardian/runtime-audit.jsonl");
  // Destinations are compared as the backend will find them in the root.
  std::string rootfs = config["root"].is_object() ? config["root"].value("path", "") : "";
  if (rootfs.empty()) return cleanup_state(), error("create: " + config_path + ": no root.path");
  if (rootfs[0] != '/') rootfs = bundle + "/" + rootfs;
  auto root = runtime::RootfsPaths::open(rootfs);
  if (!root) return cleanup_state(), error("create: " + root.error().str());
  ho.swept_trees = runtime::writable_bind_sources(config, rp->policy, *root);
  auto holder = runtime::start_egress_holder(rp->policy, ho);
  if (!holder) return cleanup_state(), error("create: " + holder.error().str());
  std::string holder_id = runtime::process_identity(holder->pid);
  auto undo = [&] {
    runtime::stop_egress_holder(holder_id);
    cleanup_state();
  };

  // What the handler's caps lower, reported once the container exists.
  json asked = config.contains("linux") && config["linux"].is_object() ? config["linux"].value("resources", json::object())
                                                                       : json::object();
  const json capped = runtime::cap_resources(asked, runtime::caps_of(rp->policy), runtime::CapMode::Create);

  runtime::HardenInputs in;
  in.policy = &rp->policy;
  in.runtime = rp->runtime;
  in.init_source = *init;
  in.netns_path = holder->netns_path;
  in.http_port = holder->http_port;
  in.socks_port = holder->socks_port;
  in.rootfs = &*root;
  auto notes = runtime::harden_config(config, in);
  if (!notes) return undo(), error("create: " + notes.error().str());
  if (rp->runtime == oci::Runtime::Crun) runtime::fit_spec_version_for_crun(config);
  if (!write_text(config_path, config.dump(2) + "\n", 0644)) return undo(), error("create: cannot write " + config_path);

  st["runtime"] = rp->runtime == oci::Runtime::Runsc ? "runsc" : "crun";
  st["profile"] = rp->profile;
  st["walls"] = runtime::walls_for(rp->policy).dump();
  st["http_port"] = holder->http_port;
  st["socks_port"] = holder->socks_port;
  st["holder"] = holder_id;
  st["audit_log"] = ho.audit_log;
  st["audit_tags"] = ho.audit_tags.is_object() ? ho.audit_tags : json::object();
  st["audit_tags"]["handler"] = g.handler;
  if (rp->policy.resources.pids) st["pids_max"] = *rp->policy.resources.pids;
  if (rp->policy.resources.memory_bytes) st["memory_max"] = *rp->policy.resources.memory_bytes;
  if (rp->policy.resources.cpus) st["cpus_max"] = *rp->policy.resources.cpus;
  if (!write_text(our_dir(a.id) + "/state.json", st.dump())) return undo(), error("create: cannot write state");

  auto base = backend_argv(rp->runtime);
  if (!base) return undo(), error(base.error().str());
  int rc = run_backend(rp->runtime, with_verb(*base, "create", a.all));
  if (rc != 0) {
    undo();
    return rc;
  }
  pid_t pid = created_pid(rp->runtime, *base, a);
  // The cgroups the backend made for the container (runsc: the sandbox's,
  // gofer included), for delete to make sure they went.
  st["cgroups"] = pid > 0 ? runtime::container_cgroup_dirs(pid) : std::vector<std::string>{};
  if (pid <= 0 || !write_text(our_dir(a.id) + "/state.json", st.dump())) {
    delete_created(rp->runtime, *base, a.id, cgroups_of(st));
    undo();
    return error(pid <= 0 ? "create: the container's pid is unknown" : "create: cannot write state");
  }
  // The holder ends with the container's init.
  runtime::send_container_pid(*holder, pid);
  report_capped(st, a.id, "create", capped);
  return 0;
}

int cmd_exec(const Args& a, const json& st) {
  if (a.opts.count("--cap")) return error("exec --cap: exguardian runtime adds no capabilities");
  oci::Runtime rt = runtime_of(st);
  auto base = backend_argv(rt);
  if (!base) return error(base.error().str());
  std::vector<std::string> rest = a.all;
  if (!st.value("pod_sandbox", false)) {
    runtime::HardenInputs in;
    in.walls = st.value("walls", "");
    in.http_port = st.value("http_port", 3128);
    in.socks_port = st.value("socks_port", 1080);
    if (in.walls.empty()) return error("exec: no walls recorded for " + a.id);
    if (a.opts.count("--process")) {
      std::string text;
      const std::string& pf = a.opts.at("--process");
      if (!read_text(pf, text)) return error("exec: cannot read --process " + pf + ": " + std::strerror(errno));
      json proc = parse_json(text);
      if (proc.is_discarded()) return error("exec: --process " + pf + ": not JSON");
      if (auto r = runtime::harden_process(proc, in); !r) return error("exec: " + r.error().str());
      std::string ours = our_dir(a.id) + "/exec-" + std::to_string(::getpid()) + ".json";
      if (!write_text(ours, proc.dump())) return error("exec: cannot write " + ours);
      for (size_t i = 0; i < rest.size() && i < a.id_index; ++i) {
        if (rest[i] == "--process" || rest[i] == "-p") rest[i + 1] = ours;
        else if (rest[i].starts_with("--process=")) rest[i] = "--process=" + ours;
      }
      int rc = run_backend(rt, with_verb(*base, "exec", rest));
      ::unlink(ours.c_str());
      return rc;
    }
    // exec ID COMMAND...: the walls go before the command.
    const std::vector<std::string> prefix = {runtime::kInitPath, "--walls", in.walls, "--"};
    rest.insert(rest.begin() + static_cast<long>(a.id_index) + 1, prefix.begin(), prefix.end());
  }
  exec_backend(rt, with_verb(*base, "exec", rest));
}

int cmd_delete(const Args& a) {
  auto st = load_state(a.id);
  bool force = a.flags.count("--force");
  if (!st) {
    if (force && valid_id(a.id)) return 0;  // runc: nothing to delete is fine with --force
    return error("container \"" + a.id + "\" does not exist");
  }
  oci::Runtime rt = runtime_of(*st);
  auto base = backend_argv(rt);
  if (!base) return error(base.error().str());
  // The backend's delete removes the container and its cgroups. What it
  // refused (a running container without --force) or could not do stays,
  // with our record, for the engine to see and try again.
  bool deleted_there = false;
  if (backend_knows(rt, a.id)) {
    int rc = run_backend(rt, with_verb(*base, "delete", a.all));
    if (rc != 0 && backend_knows(rt, a.id)) return rc;
    deleted_there = true;
  }
  // What is left of its cgroups: whatever is still inside is the deleted
  // container's and is killed (runc's delete does the same); only a delete
  // the backend was not asked to do (it no longer knows the container)
  // leaves processes to --force. A cgroup that stays is an error, our record
  // kept for the next delete.
  runtime::stop_egress_holder(st->value("holder", ""));
  if (auto r = runtime::remove_container_cgroups(cgroups_of(*st), force || deleted_there); !r)
    return error("delete " + a.id + ": " + r.error().str());
  std::error_code ec;
  fs::remove_all(our_dir(a.id), ec);
  return 0;
}

int cmd_kill(const Args& a, const json& st) {
  oci::Runtime rt = runtime_of(st);
  auto base = backend_argv(rt);
  if (!base) return error(base.error().str());
  std::string status = backend_status(rt, a.id);
  if (status == "stopped") return error("container not running");
  int rc = run_backend(rt, with_verb(*base, "kill", a.all));
  if (rc != 0 && backend_status(rt, a.id) == "stopped") return error("container not running");
  return rc;
}

// Sets a value option of the verb's, in either form it was given in.
void set_option(std::vector<std::string>& rest, size_t id_index, const std::string& name, const std::string& value) {
  for (size_t i = 0; i < rest.size() && i < id_index; ++i) {
    if (rest[i] == name && i + 1 < rest.size()) rest[i + 1] = value;
    else if (rest[i].starts_with(name + "=")) rest[i] = name + "=" + value;
  }
}

// update, as create: each limit the smaller of the one asked and the
// handler's (resource_caps.hpp), never above it. Not a refusal: containerd
// sends every UpdateContainerResources with the pod spec's original figures,
// so a pod that once asked more than the handler's would have every later
// resize refused. --pids-limit, --memory, --memory-swap, --cpu-quota with --cpu-period and
// --resources (a file, or "-": standard input, read here and handed on as
// a file of ours) are capped; what was lowered is reported (report_capped).
// A quota or a period alone is refused under a handler's cpus: either could
// raise the ratio with the other, which is not known here.
int cmd_update(const Args& a, const json& st) {
  oci::Runtime rt = runtime_of(st);
  auto base = backend_argv(rt);
  if (!base) return error(base.error().str());
  std::vector<std::string> rest = a.all;
  const runtime::ResourceCaps caps = caps_of(st);
  // A number, or a size with runc's suffixes (k, m, g, either case).
  auto number = [](std::string t) -> std::optional<int64_t> {
    if (t == "-1") return -1;
    if (!t.empty() && t.find_first_not_of("0123456789") == std::string::npos) return std::atoll(t.c_str());
    for (auto& c : t) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (t.ends_with("B")) t.pop_back();
    if (auto sz = policy::parse_size(t)) return static_cast<int64_t>(*sz);
    return std::nullopt;
  };
  // The options as a linux.resources object, capped like --resources.
  json flags = json::object();
  struct Opt {
    const char* name;
    const char* section;
    const char* key;
  };
  const Opt kCapped[] = {{"--pids-limit", "pids", "limit"}, {"--memory", "memory", "limit"},
                         {"--memory-swap", "memory", "swap"}, {"--cpu-quota", "cpu", "quota"},
                         {"--cpu-period", "cpu", "period"}};
  for (const Opt& o : kCapped) {
    if (!a.opts.count(o.name)) continue;
    auto v = number(a.opts.at(o.name));
    if (!v) return error(std::string("update ") + o.name + ": " + a.opts.at(o.name) + ": not a number");
    flags[o.section][o.key] = *v;
  }
  if (caps.cpus && flags.contains("cpu") && flags["cpu"].size() == 1) {
    char limit[64];
    std::snprintf(limit, sizeof limit, "%g CPU%s", *caps.cpus, *caps.cpus == 1 ? "" : "s");
    return error(std::string("update --cpu-quota/--cpu-period: quota and period together (the handler holds it to ") +
                 limit + ")");
  }
  json changes = runtime::cap_resources(flags, caps, runtime::CapMode::Update);
  for (const Opt& o : kCapped)
    if (a.opts.count(o.name)) set_option(rest, a.id_index, o.name, std::to_string(flags[o.section][o.key].get<int64_t>()));
  std::string staged;
  if (a.opts.count("--resources")) {
    std::string path = a.opts.at("--resources"), text;
    if (path == "-") text.assign(std::istreambuf_iterator<char>(std::cin), {});
    else if (!read_text(path, text)) return error("update: cannot read --resources " + path);
    auto r = parse_json(text);
    if (!r.is_object()) return error("update --resources: not a JSON object");
    for (auto& c : runtime::cap_resources(r, caps, runtime::CapMode::Update)) changes.push_back(std::move(c));
    staged = our_dir(a.id) + "/update-" + std::to_string(::getpid()) + ".json";
    if (!write_text(staged, r.dump())) return error("update: cannot write " + staged);
    set_option(rest, a.id_index, "--resources", staged);
    set_option(rest, a.id_index, "-r", staged);
  }
  int rc = run_backend(rt, with_verb(*base, "update", rest));
  if (!staged.empty()) ::unlink(staged.c_str());
  if (rc == 0) report_capped(st, a.id, "update", changes);
  return rc;
}

int cmd_features() {
  json f = {
      {"ociVersionMin", "1.0.0"},
      {"ociVersionMax", "1.1.0"},
      {"hooks", {"prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop"}},
      {"mountOptions", {"bind", "rbind", "ro", "rw", "nosuid", "nodev", "noexec", "rro", "tmpcopyup"}},
      {"linux",
       {{"namespaces", {"cgroup", "ipc", "mount", "network", "pid", "user", "uts"}},
        {"capabilities", json::array()},  // every capability is dropped
        {"cgroup", {{"v1", true}, {"v2", true}, {"systemd", true}, {"systemdUser", true}}},
        {"seccomp", {{"enabled", true}}},
        {"apparmor", {{"enabled", true}}},
        {"selinux", {{"enabled", true}}}}},
      {"annotations",
       {{"org.exguardian.runtime.handler", g.handler},
        {"org.exguardian.runtime.profile-annotation", runtime::kProfileAnnotation}}}};
  std::printf("%s\n", f.dump(2).c_str());
  return 0;
}

// Ours, not runc's: whether a handler file (and a profile) loads, and what it
// comes to; for admins and the deploy test.
int cmd_check(const Args& a) {
  std::string profile = a.opts.count("--profile") ? a.opts.at("--profile") : "";
  auto rp = runtime::load_runtime_policy(handlers_dir(), g.handler, profile);
  if (!rp) return error("check: " + rp.error().str());
  const auto& p = rp->policy;
  std::string domains, writable;
  for (const auto& d : p.network.allowed_domains) domains += (domains.empty() ? "" : " ") + d.pattern;
  for (const auto& w : p.filesystem.allow_write) writable += (writable.empty() ? "" : " ") + w.path;
  std::printf("handler %s%s: runtime %s\n  allowed domains: %s\n  writable: %s\n", rp->handler.c_str(),
              profile.empty() ? "" : (" narrowed by profile " + profile).c_str(),
              rp->runtime == oci::Runtime::Runsc ? "runsc" : "crun", domains.empty() ? "(none)" : domains.c_str(),
              writable.empty() ? "(nothing)" : writable.c_str());
  return 0;
}

// `list`: the containers of both wrapped runtimes (crun's, and runsc's for
// gVisor handlers; each keeps its own state), in runc's forms: a table, their
// ids (--quiet), or --format json.
int cmd_list(const Args& a) {
  std::string format = a.opts.count("--format") ? a.opts.at("--format") : "table";
  if (format != "table" && format != "json") return error("list: --format " + format + ": expected table or json");
  json all = json::array();
  for (auto rt : {oci::Runtime::Crun, oci::Runtime::Runsc}) {
    if (!fs::exists(backend_root(rt))) continue;  // it never made a container under this root
    auto base = backend_argv(rt);
    if (!base) return error(base.error().str());
    std::string out;
    if (run_backend(rt, with_verb(*base, "list", {"--format", "json"}), &out) != 0)
      return error(std::string("list: ") + oci::to_string(rt) + " list failed");
    auto j = parse_json(out);
    if (j.is_discarded() || !(j.is_array() || j.is_null()))  // runsc says null for none
      return error(std::string("list: ") + oci::to_string(rt) + " list: not a JSON array");
    for (auto& c : j)
      if (c.is_object()) all.push_back(std::move(c));
  }
  if (a.flags.count("--quiet")) {
    for (const auto& c : all) std::printf("%s\n", c.value("id", "").c_str());
  } else if (format == "json") {
    std::printf("%s\n", all.dump().c_str());
  } else {
    std::printf("%-12s %-10s %-10s %-40s %-32s %s\n", "ID", "PID", "STATUS", "BUNDLE", "CREATED", "OWNER");
    for (const auto& c : all)
      std::printf("%-12s %-10d %-10s %-40s %-32s %s\n", c.value("id", "").c_str(), c.value("pid", 0),
                  c.value("status", "").c_str(), c.value("bundle", "").c_str(), c.value("created", "").c_str(),
                  c.value("owner", "").c_str());
  }
  return 0;
}

int usage() {
  std::fprintf(stderr,
               "usage: exguardian runtime [--root DIR] [--log FILE] [--log-format text|json] [--systemd-cgroup]\n"
               "                          [--rootless true|false|auto] [--handler NAME] VERB [OPTIONS] ID ...\n"
               "verbs: create start state kill delete exec ps list update pause resume events features\n"
               "       check [--profile NAME]  (ours: does the handler file load, and what does it allow)\n");
  return 1;
}

}  // namespace

int runtime_main(int argc, char** argv, const std::string& argv0_handler) {
  g = Globals{};
  g.root = ::geteuid() == 0 ? "/run/exguardian-runtime" : "";
  if (g.root.empty()) {
    const char* x = std::getenv("XDG_RUNTIME_DIR");
    g.root = std::string(x && *x ? x : "/tmp") + "/exguardian-runtime";
  }
  g.handler = argv0_handler;
  if (g.handler.empty())
    if (const char* e = std::getenv("EXGUARDIAN_HANDLER"); e && *e) g.handler = e;
  int i = 0;
  auto value = [&](const std::string& t, const char* name, std::string& out) {
    std::string n = name;
    if (t == n || t == "-" + n.substr(2)) {
      if (i + 1 >= argc) return false;
      out = argv[++i];
      return true;
    }
    if (t.starts_with(n + "=")) {
      out = t.substr(n.size() + 1);
      return true;
    }
    return false;
  };
  for (; i < argc && argv[i][0] == '-'; ++i) {
    std::string t = argv[i];
    if (value(t, "--root", g.root) || value(t, "--log", g.log) || value(t, "--log-format", g.log_format) ||
        value(t, "--rootless", g.rootless) || value(t, "--cgroup-manager", g.cgroup_manager) ||
        value(t, "--handler", g.handler) || value(t, "--handlers-dir", g.handlers_dir))
      continue;
    if (t == "--systemd-cgroup") g.systemd_cgroup = true;
    else if (t == "--debug") g.debug = true;
    else if (t == "--version" || t == "-v") {
      std::printf("exguardian runtime 0.1.0 (runc-compatible; wraps crun, runsc for gVisor handlers)\nspec: 1.1.0\n");
      return 0;
    } else if (t == "--help" || t == "-h") {
      return usage(), 0;
    } else if (t == "--criu" || t == "--rootless-cgroups") {
      if (t == "--criu" && i + 1 < argc) ++i;  // runc options with nothing to do here
    } else {
      return error("unknown global option " + t);
    }
  }
  if (g.log_format != "text" && g.log_format != "json") return error("--log-format " + g.log_format + ": expected text or json");
  if (g.handler.empty()) g.handler = "default";
  if (!runtime::valid_handler_name(g.handler)) return error("handler " + g.handler + ": expected a name of [a-z0-9._-]");
  if (i >= argc) return usage();
  std::string verb = argv[i++];
  if (verb == "features") return cmd_features();
  Args a = parse_args(verb, argc - i, argv + i);
  if (verb == "create" || verb == "run") return cmd_create(verb, a);
  if (verb == "check") return cmd_check(a);
  if (verb == "delete") return cmd_delete(a);
  if (verb == "list") return cmd_list(a);
  // runc's checkpoint/restore (CRIU) would save the container's processes but
  // not its walls: CRIU does not dump Landlock domains, so a restored process
  // would run without them, and the egress holder (the container's only way
  // out) is a process of its own outside the container. Refused by name, so an
  // engine's checkpoint (ctr, kubelet's CheckpointContainer) says why.
  if (verb == "checkpoint" || verb == "restore")
    return error(verb +
                 ": not supported: CRIU does not save a process's Landlock domain, so a restored container would run "
                 "without ExGuardian's walls, and its egress holder is a process outside the container; stop the "
                 "container and start it again instead");
  static const std::set<std::string> kVerbs = {"start", "state", "kill", "exec", "ps", "update", "pause", "resume", "events"};
  if (!kVerbs.count(verb)) return error("unknown command " + verb);
  if (a.id.empty()) return error(verb + ": a container id is required");
  auto st = load_state(a.id);
  if (!st) return error("container \"" + a.id + "\" does not exist");
  if (verb == "exec") return cmd_exec(a, *st);
  if (verb == "kill") return cmd_kill(a, *st);
  if (verb == "update") return cmd_update(a, *st);
  oci::Runtime rt = runtime_of(*st);
  auto base = backend_argv(rt);
  if (!base) return error(base.error().str());
  exec_backend(rt, with_verb(*base, verb, a.all));
}

}  // namespace exg::cli
