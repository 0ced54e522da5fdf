#include "runtime/harden.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <set>

#include "microvm/guest/walls.hpp"
#include "plan/proxy_env.hpp"

namespace exg::runtime {

using nlohmann::json;

namespace {

bool within(const std::string& p, const std::string& dir) {
  if (dir == "/") return true;
  return p == dir || (p.size() > dir.size() && p.compare(0, dir.size(), dir) == 0 && p[dir.size()] == '/');
}

bool has_option(const json& m, const std::string& o) {
  if (!m.contains("options") || !m["options"].is_array()) return false;
  return std::any_of(m["options"].begin(), m["options"].end(), [&](const json& x) { return x.is_string() && x == o; });
}

bool is_bind(const json& m) { return m.value("type", "") == "bind" || has_option(m, "bind") || has_option(m, "rbind"); }

std::vector<std::string> paths(const std::vector<policy::PathEntry>& list) {
  std::vector<std::string> out;
  for (const auto& e : list) out.push_back(e.path);
  return out;
}

// The policy's filesystem paths as the runtime finds them in the root (a
// policy's /var/run/x and an engine's /run/x are one place where /var/run
// links to /run).
policy::Policy resolved_paths(const policy::Policy& pol, const RootfsPaths& root) {
  policy::Policy out = pol;
  for (auto* list : {&out.filesystem.allow_write, &out.filesystem.deny_write, &out.network.allow_unix_sockets})
    for (auto& e : *list) e.path = root.resolve(e.path);
  return out;
}

// Puts `m` (a mount of the runtime's own, at `dest` resolved) before the
// first of the engine's mounts at or below `dest`: mounted later, it would
// cover them (a volume under an allowWrite tmpfs gone from sight, its writes
// never reaching the host). Mounts are made in the order listed.
void insert_before_covered(json& mounts, json m, const std::string& dest, const RootfsPaths& root) {
  auto at = std::find_if(mounts.begin(), mounts.end(),
                         [&](const json& e) { return within(root.resolve(e.value("destination", "")), dest); });
  mounts.insert(at, std::move(m));
}

bool writable_by_policy(const policy::Policy& pol, const std::string& dest) {
  for (const auto& w : pol.filesystem.deny_write)
    if (within(dest, w.path)) return false;
  return std::any_of(pol.filesystem.allow_write.begin(), pol.filesystem.allow_write.end(),
                     [&](const policy::PathEntry& w) { return within(dest, w.path); });
}

bool socket_allowed(const policy::Policy& pol, const std::string& dest) {
  if (pol.network.allow_all_unix_sockets.value_or(false)) return true;
  return std::any_of(pol.network.allow_unix_sockets.begin(), pol.network.allow_unix_sockets.end(),
                     [&](const policy::PathEntry& s) { return s.path == dest; });
}

void set_union(json& arr, const std::vector<std::string>& add) {
  if (!arr.is_array()) arr = json::array();
  std::set<std::string> have;
  for (const auto& x : arr)
    if (x.is_string()) have.insert(x.get<std::string>());
  for (const auto& a : add)
    if (have.insert(a).second) arr.push_back(a);
}

// The device nodes a container gets with no privileges asked (runtime-spec
// "Default Devices" and the terminal's).
bool standard_device(const std::string& path) {
  static const std::set<std::string> k = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
                                          "/dev/tty", "/dev/console", "/dev/ptmx"};
  return k.count(path) > 0;
}

}  // namespace

bool is_pod_sandbox(const json& config) {
  if (!config.contains("annotations") || !config["annotations"].is_object()) return false;
  const auto& a = config["annotations"];
  return a.value("io.kubernetes.cri.container-type", "") == "sandbox" ||
         a.value("io.kubernetes.cri-o.ContainerType", "") == "sandbox";
}

std::string engine_netns_path(const json& config) {
  if (!config.contains("linux") || !config["linux"].contains("namespaces")) return "";
  // A config hardened before (a bundle created again): the namespace was a
  // holder's own, gone with it; the engine asked for a new one.
  if (config.contains("annotations") && config["annotations"].is_object() &&
      config["annotations"].value(kOwnNetnsAnnotation, "") == "true")
    return "";
  for (const auto& ns : config["linux"]["namespaces"])
    if (ns.value("type", "") == "network") return ns.value("path", "");
  return "";
}

std::vector<std::string> writable_bind_sources(const json& config, const policy::Policy& policy,
                                               const RootfsPaths& root) {
  std::vector<std::string> out;
  if (!config.contains("mounts") || !config["mounts"].is_array()) return out;
  const policy::Policy pol = resolved_paths(policy, root);
  for (const auto& m : config["mounts"]) {
    std::string src = m.value("source", ""), dest = root.resolve(m.value("destination", ""));
    struct stat st{};
    if (is_bind(m) && !src.empty() && src[0] == '/' && writable_by_policy(pol, dest) && ::stat(src.c_str(), &st) == 0 &&
        S_ISDIR(st.st_mode) && std::find(out.begin(), out.end(), src) == out.end())
      out.push_back(src);
  }
  return out;
}

json walls_for(const policy::Policy& pol) {
  microvm::guest::Walls w;
  w.seccomp = true;
  walls::LandlockRules ll;
  ll.read_only = {"/"};
  ll.read_write = paths(pol.filesystem.allow_write);
  ll.write_files = {"/dev", "/proc"};
  // Each exec'd process gets a Landlock domain of its own: scoping would keep
  // it from signalling pid 1 (or its sockets) of the same container, which
  // the container's own pid and network namespaces already wall off.
  ll.scope_signals = false;
  ll.scope_abstract_unix = false;
  ll.required = pol.landlock_required.value_or(false);
  w.landlock = ll;
  return microvm::guest::walls_to_json(w);
}

Result<void> harden_process(json& process, const HardenInputs& in) {
  if (!process.is_object()) return fail(Error::msg("process", "not an object"));
  if (!process.contains("args") || !process["args"].is_array() || process["args"].empty())
    return fail(Error::msg("process.args", "missing or empty"));
  json none = json::array();
  process["capabilities"] = {{"bounding", none}, {"effective", none}, {"inheritable", none}, {"permitted", none},
                             {"ambient", none}};
  process["noNewPrivileges"] = true;
  json& args = process["args"];
  const std::string walls = in.walls.empty() ? walls_for(*in.policy).dump() : in.walls;
  json prefix = json::array({kInitPath, "--walls", walls, "--"});
  bool has_prefix = args.size() > prefix.size() && std::equal(prefix.begin(), prefix.end(), args.begin());
  if (!has_prefix) {
    for (const auto& a : args) prefix.push_back(a);
    args = std::move(prefix);
  }
  // The proxy's variables replace any of the same names.
  auto env_vars = plan::proxy_env(in.http_port, in.socks_port);
  env_vars.emplace_back("EXGUARDIAN", "1");
  env_vars.emplace_back("SANDBOX_RUNTIME", "1");
  json env = json::array();
  if (process.contains("env") && process["env"].is_array())
    for (const auto& e : process["env"]) {
      if (!e.is_string()) continue;
      std::string s = e.get<std::string>();
      std::string name = s.substr(0, s.find('='));
      if (std::none_of(env_vars.begin(), env_vars.end(), [&](const auto& kv) { return kv.first == name; }))
        env.push_back(s);
    }
  for (const auto& [k, v] : env_vars) env.push_back(k + "=" + v);
  process["env"] = env;
  return {};
}

Result<std::vector<std::string>> harden_config(json& config, const HardenInputs& in) {
  const RootfsPaths plain;
  const RootfsPaths& root = in.rootfs ? *in.rootfs : plain;
  // Paths compared as the runtime will find them in the root.
  const policy::Policy pol = resolved_paths(*in.policy, root);
  std::vector<std::string> notes;
  if (!config.is_object() || !config.contains("process")) return fail(Error::msg("config.json", "no process"));
  if (!config.contains("root") || !config["root"].is_object()) return fail(Error::msg("config.json", "no root"));
  config["root"]["readonly"] = true;
  if (auto r = harden_process(config["process"], in); !r) return fail(r.error());

  json& mounts = config["mounts"];
  if (!mounts.is_array()) mounts = json::array();
  for (auto& m : mounts) {
    if (!is_bind(m)) continue;
    const std::string dest = root.resolve(m.value("destination", ""));
    struct stat st{};
    std::string src = m.value("source", "");
    if (!src.empty() && ::stat(src.c_str(), &st) == 0 && S_ISSOCK(st.st_mode) && !socket_allowed(pol, dest))
      return fail(Error::msg("mount " + src + " on " + m.value("destination", ""),
                             "a host socket; the handler's policy must list it in network.allowUnixSockets"));
    if (writable_by_policy(pol, dest)) continue;
    json opts = json::array();
    if (m.contains("options") && m["options"].is_array())
      for (const auto& o : m["options"])
        if (!(o.is_string() && (o == "rw" || o == "ro"))) opts.push_back(o);
    opts.push_back("ro");
    m["options"] = opts;
  }
  // Writable places the image cannot give on a read-only root: a tmpfs each,
  // under the engine's mounts inside it (kubelet's service-account token in
  // /var/run/secrets under /run, an emptyDir under /workspace).
  for (size_t i = 0; i < pol.filesystem.allow_write.size(); ++i) {
    const std::string& w = pol.filesystem.allow_write[i].path;  // resolved
    bool mounted = std::any_of(mounts.begin(), mounts.end(), [&](const json& m) {
      std::string d = root.resolve(m.value("destination", ""));
      return d != "/" && within(w, d);
    });
    if (mounted || w == "/") continue;
    const std::string& asked = in.policy->filesystem.allow_write[i].path;
    insert_before_covered(mounts,
                          {{"destination", asked}, {"type", "tmpfs"}, {"source", "tmpfs"},
                           {"options", {"nosuid", "nodev", "mode=1777"}}},
                          w, root);
    notes.push_back(asked + ": a private tmpfs (writable; the image's root is read-only)");
  }
  // Ours only at the init's path (the engine's there goes; nothing lies below a file).
  mounts.erase(std::remove_if(mounts.begin(), mounts.end(),
                              [&](const json& m) { return root.resolve(m.value("destination", "")) == kInitPath; }),
               mounts.end());
  insert_before_covered(mounts,
                        {{"destination", kInitPath}, {"type", "bind"}, {"source", in.init_source},
                         {"options", {"bind", "ro", "nosuid", "nodev"}}},
                        kInitPath, root);

  json& lx = config["linux"];
  if (!lx.is_object()) lx = json::object();
  set_union(lx["maskedPaths"], oci::default_masked_paths());
  set_union(lx["maskedPaths"], paths(pol.filesystem.deny_read));
  set_union(lx["readonlyPaths"], oci::default_readonly_paths());
  set_union(lx["readonlyPaths"], paths(pol.filesystem.deny_write));

  json& ns = lx["namespaces"];
  if (!ns.is_array()) ns = json::array();
  for (const char* t : {"pid", "ipc", "uts", "mount", "network"})
    if (std::none_of(ns.begin(), ns.end(), [&](const json& n) { return n.value("type", "") == t; })) {
      ns.push_back({{"type", t}});
      notes.push_back(std::string("a new ") + t + " namespace (the engine shared the host's)");
    }
  const bool own_netns = engine_netns_path(config).empty();
  for (auto& n : ns)
    if (n.value("type", "") == "network" && !in.netns_path.empty()) n["path"] = in.netns_path;
  if (own_netns && !in.netns_path.empty()) {
    if (!config["annotations"].is_object()) config["annotations"] = json::object();
    config["annotations"][kOwnNetnsAnnotation] = "true";
  }

  // runsc reads the CRI's container-type and sandbox-id annotations to start a
  // pod's container inside the gVisor sandbox of the pod's pause container. That
  // pause container is crun's here (is_pod_sandbox: left alone), so runsc found
  // no sandbox ("cannot load sandbox", and a lock file of it left behind): each
  // container of a gVisor handler is a sandbox of its own, in the pod's network
  // namespace.
  if (in.runtime == oci::Runtime::Runsc && config.contains("annotations") && config["annotations"].is_object()) {
    for (const char* k : {"io.kubernetes.cri.container-type", "io.kubernetes.cri.sandbox-id",
                          "io.kubernetes.cri-o.ContainerType", "io.kubernetes.cri-o.SandboxID"})
      if (config["annotations"].erase(k) > 0)
        notes.push_back(std::string("annotation ") + k + " left out (runsc would look for the pod's sandbox in gVisor)");
  }

  if (!lx.contains("seccomp") || lx["seccomp"].is_null()) lx["seccomp"] = oci::seccomp_profile("", in.runtime);

  if (lx.contains("devices") && lx["devices"].is_array()) {
    json keep = json::array();
    for (const auto& d : lx["devices"]) {
      if (standard_device(d.value("path", ""))) keep.push_back(d);
      else notes.push_back("device " + d.value("path", "?") + " left out (only the standard devices)");
    }
    lx["devices"] = keep;
  }
  json& res = lx["resources"];
  for (const auto& c : cap_resources(res, caps_of(pol), CapMode::Create))
    notes.push_back(c["field"].get<std::string>() + ": the handler's cap applied");
  return notes;
}

}  // namespace exg::runtime
