#include "doctor/advice.hpp"

#include "doctor/layer_choice.hpp"
#include "util/layer_kind.hpp"

#include <pwd.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace exg::doctor {
namespace {

using nlohmann::json;

bool ok(const std::vector<Capability>& caps, const char* name) {
  const Capability* c = find_capability(caps, name);
  return c && c->ok;
}

// "crun 1.8.1" from "/usr/bin/crun: crun version 1.8.1; ...".
std::string version_of(const std::vector<Capability>& caps, const char* name) {
  const Capability* c = find_capability(caps, name);
  if (!c || !c->ok) return name;
  auto colon = c->detail.find(": ");
  auto semi = c->detail.find(';', colon);
  return colon == std::string::npos ? name : c->detail.substr(colon + 2, semi - colon - 2);
}

std::string join(const std::vector<std::string>& v, const std::string& sep, const std::string& last_sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i == 0 ? "" : i + 1 == v.size() ? last_sep : sep) + v[i];
  return s;
}

std::string os_name() {
  std::ifstream f("/etc/os-release");
  for (std::string line; std::getline(f, line);) {
    if (line.starts_with("PRETTY_NAME=")) {
      std::string v = line.substr(12);
      if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
      return v;
    }
  }
  return "unknown";
}

json capability_json(const Capability& c) { return json{{"name", c.name}, {"ok", c.ok}, {"detail", c.detail}}; }

}  // namespace

std::vector<LayerStatus> layer_status(const std::vector<Capability>& caps) {
  std::vector<LayerStatus> out;
  const bool root = ::geteuid() == 0;
  // Every layer makes a user namespace as this caller (doctor/userns_diagnosis.hpp
  // layer_needs_userns), and a run as root first drops its supplementary groups:
  // a layer whose own tools are here still does not run without them.
  const Capability* groups = find_capability(caps, "supplementary groups");
  const std::string groups_why = groups && !groups->ok ? groups->detail : "";
  // The namespace alone is not enough: what the setup does in it (sethostname,
  // mounts, a fresh proc) must work too (util/namespace_setup_probe.hpp).
  const Capability* setup = find_capability(caps, "namespace setup");
  const bool userns = ok(caps, "user namespaces") && (!setup || setup->ok);
  {
    std::vector<std::string> missing;
    for (const char* n : {"user namespaces", "mount namespaces", "pid namespaces", "network namespaces",
                          "seccomp filters"})
      if (!ok(caps, n)) missing.push_back(n);
    if (setup && !setup->ok && ok(caps, "user namespaces")) missing.push_back("namespace setup (" + setup->detail + ")");
    LayerStatus s{std::string(layer::name(layer::Kind::Process)), missing.empty(), ""};
    if (s.available) {
      s.why = "user, mount, pid and network namespaces and seccomp work";
      std::vector<std::string> extra;
      if (const Capability* l = find_capability(caps, "landlock"); l && l->ok) extra.push_back("Landlock " + l->detail.substr(0, l->detail.find(':')));
      std::vector<std::string> limits;
      for (const char* n : {"memory", "pids", "cpu"})
        if (ok(caps, (std::string("cgroup ") + n).c_str())) limits.push_back(n);
      if (!limits.empty()) extra.push_back("cgroup " + join(limits, "/", "/") + " limits");
      if (!extra.empty()) s.why += "; with " + join(extra, ", ", " and ");
    } else {
      s.why = "missing: " + join(missing, ", ", " and ");
    }
    out.push_back(std::move(s));
  }
  const LayerStatus process = out.front();
  const std::string refused = ok(caps, "user namespaces") ? "what a sandbox's setup does in one (" +
                                                                (setup ? setup->detail : std::string()) + ")"
                                                          : std::string("one");
  {
    bool crun = ok(caps, "crun"), runc = ok(caps, "runc");
    LayerStatus s{std::string(layer::name(layer::Kind::Container)), crun || runc, ""};
    const Capability* rt = find_capability(caps, "container runtime");
    if (crun && runc)
      s.why = version_of(caps, "crun") + " and " + version_of(caps, "runc");
    else if (crun || runc)
      s.why = version_of(caps, crun ? "crun" : "runc");
    else
      s.why = "neither crun nor runc in PATH (Debian: apt install crun)";
    if (s.available && rt && !rt->ok) {  // rootless with runc only
      s.available = false;
      s.why = rt->detail;
    } else if (s.available && !userns) {
      s.available = false;
      s.why = root ? "its writable paths are idmapped mounts, made through a user namespace, and this host refuses " +
                         refused
                   : "rootless crun runs in a user namespace, and this host refuses " + refused;
    }
    out.push_back(std::move(s));
  }
  {
    LayerStatus s{std::string(layer::name(layer::Kind::Gvisor)), ok(caps, "runsc"), ""};
    const Capability* c = find_capability(caps, "runsc");
    if (s.available)
      s.why = version_of(caps, "runsc");
    else if (c && !c->detail.starts_with("not in PATH"))
      s.why = "runsc does not answer: " + c->detail;
    else
      s.why = "runsc not in PATH (Debian: apt install runsc)";
    if (s.available && !userns) {
      s.available = false;
      s.why = "runsc's host runs in a user namespace, and this host refuses " + refused;
    }
    out.push_back(std::move(s));
  }
  {
    bool qemu = ok(caps, "qemu-system-x86_64"), kernel = ok(caps, "guest kernel");
    LayerStatus s{std::string(layer::name(layer::Kind::Microvm)), qemu && kernel, ""};
    if (s.available)
      s.why = version_of(caps, "qemu-system-x86_64") + ", the guest built by make; " +
              (ok(caps, "kvm guest boot") ? std::string("KVM (a guest boot under KVM proved it)")
               : ok(caps, "/dev/kvm")     ? std::string("TCG (software emulation): a guest does not boot under this host's KVM")
                                          : std::string("TCG (software emulation): no usable /dev/kvm"));
    else {
      std::vector<std::string> missing;
      if (!qemu) missing.push_back("qemu-system-x86_64 (Debian: apt install qemu-system-x86)");
      if (!kernel) missing.push_back("the guest kernel and initramfs (built by `make`)");
      s.why = "missing: " + join(missing, ", ", " and ");
    }
    if (s.available && !process.available) {
      s.available = false;
      s.why = "qemu runs inside the process layer, which cannot run here (" + process.why + ")";
    }
    out.push_back(std::move(s));
  }
  {
    // No namespaces at all: Landlock (network rules and scoping: ABI 6) and seccomp are its walls.
    const Capability* l = find_capability(caps, "landlock");
    bool scope = ok(caps, "landlock scoping"), net = ok(caps, "landlock network"), filters = ok(caps, "seccomp filters");
    LayerStatus s{std::string(layer::name(layer::Kind::Landlock)), scope && net && filters, ""};
    if (s.available)
      s.why = "Landlock " + (l ? l->detail.substr(0, l->detail.find(':')) : std::string("?")) +
              " and seccomp, no namespaces (weaker than process: docs/layers.md)";
    else if (!l || !l->ok)
      s.why = "no Landlock in this kernel" + (l ? " (" + l->detail + ")" : std::string());
    else if (!scope || !net)
      s.why = "Landlock " + l->detail.substr(0, l->detail.find(':')) + ": needs ABI 6 (network rules and scoping)";
    else
      s.why = "no seccomp filters";
    out.push_back(std::move(s));
  }
  if (!groups_why.empty())
    for (auto& s : out)
      if (s.available) s.available = false, s.why = groups_why;
  return out;
}

json host_identity() {
  utsname u{};
  ::uname(&u);
  return json{{"hostname", u.nodename}, {"kernel", u.release}, {"arch", u.machine}, {"os", os_name()}};
}

json user_identity() {
  uid_t uid = ::geteuid();
  const passwd* pw = ::getpwuid(uid);
  return json{{"uid", uid}, {"gid", ::getegid()}, {"name", pw ? pw->pw_name : ""}, {"root", uid == 0}};
}

int write_doctor(std::ostream& out, const std::vector<Capability>& caps, bool as_json,
                 const std::vector<std::string>& userns_refusal) {
  const auto layers = layer_status(caps);
  // What `--layer auto` would take here for a policy that asks nothing special of a layer.
  const auto auto_choice = choose_auto(judge_layers(caps, {}));
  json host = host_identity(), user = user_identity();
  if (as_json) {
    json doc{{"host", host}, {"user", user}, {"capabilities", json::array()}, {"layers", json::object()}};
    for (const auto& c : caps) doc["capabilities"].push_back(capability_json(c));
    for (const auto& l : layers) doc["layers"][l.name] = json{{"available", l.available}, {"why", l.why}};
    auto ev = auto_choice.audit_event();
    doc["auto"] = json{{"chosen", ev["chosen"]}, {"line", ev["line"]}};
    doc["userns_refusal"] = userns_refusal;
    out << doc.dump(2) << "\n";
    return 0;
  }
  std::string who = user["name"].get<std::string>();
  out << "exguardian doctor: " << host["hostname"].get<std::string>() << ", Linux " << host["kernel"].get<std::string>()
      << " (" << host["arch"].get<std::string>() << "), " << host["os"].get<std::string>() << ", as "
      << (who.empty() ? "uid" : who) << " (uid " << user["uid"].get<unsigned>() << ")\n\n";
  size_t width = 0;
  for (const auto& c : caps) width = std::max(width, c.name.size());
  for (const auto& c : caps)
    out << "  " << (c.ok ? "ok      " : "MISSING ") << c.name << std::string(width - c.name.size() + 2, ' ') << "("
        << c.detail << ")\n";
  out << "\nlayers:\n";
  for (const auto& l : layers)
    out << "  " << l.name << std::string(11 - l.name.size(), ' ') << (l.available ? "available  " : "MISSING    ")
        << l.why << "\n";
  out << "  " << auto_choice.line() << "\n";
  if (!userns_refusal.empty()) {
    out << "\nuser namespaces refused:\n";
    for (const auto& line : userns_refusal) out << "  " << line << "\n";
  }
  return 0;
}

const std::vector<std::string>& situations() {
  static const std::vector<std::string> s = {"laptop", "ci", "multi-tenant", "privileged-tools"};
  return s;
}

std::optional<Recommendation> recommendation_for(std::string_view situation) {
  const json registries = json::array({"github.com", "*.github.com", "*.githubusercontent.com", "registry.npmjs.org",
                                       "pypi.org", "files.pythonhosted.org", "crates.io", "static.crates.io",
                                       "proxy.golang.org"});
  auto policy = [&](const char* layer, json allowed, const char* memory, int pids, double cpus, const char* timeout) {
    return json{{"layer", layer},
                {"network", {{"allowedDomains", std::move(allowed)}, {"deniedDomains", json::array()}}},
                {"filesystem", {{"denyRead", json::array()}, {"allowWrite", json::array()}, {"denyWrite", json::array()}}},
                {"resources", {{"memory", memory}, {"pids", pids}, {"cpus", cpus}, {"timeout", timeout}}}};
  };
  if (situation == "laptop")
    return Recommendation{
        "laptop", "process", {}, "the process sandbox, strict: every command an agent runs, wrapped",
        {"The code runs as you, next to your keys and your other projects: the sandbox hides credentials, makes",
         "everything but the workspace read-only and keeps hooks and rc files unwritable.",
         "It starts in milliseconds, so it can wrap every command without the agent noticing.",
         "No network except the package registries it needs, through the egress proxy, every decision logged."},
        policy("process", registries, "4G", 1024, 2, "30m")};
  if (situation == "ci")
    return Recommendation{
        "ci", "container", {"gvisor"}, "a fresh hardened container (or a gVisor sandbox) per job, thrown away after",
        {"A job must not see the previous job's files, caches or tokens: a fresh root per job, nothing reused.",
         "The runner's secrets stay outside; the job gets placeholders the proxy swaps on the way out.",
         "gVisor adds a user-space kernel between the job and the host kernel, at 100+ ms per start."},
        policy("container", registries, "8G", 4096, 2, "1h")};
  if (situation == "multi-tenant")
    return Recommendation{
        "multi-tenant", "microvm", {"gvisor"}, "one microVM (or gVisor sandbox) per session or tenant; never a shared container",
        {"Tenants are hostile to each other: one kernel bug must not let one reach another's data.",
         "A container shares the host kernel; a microVM or gVisor puts a kernel of its own in between.",
         "One per session or tenant, never shared: nothing persists from one to the next."},
        policy("microvm", json::array(), "2G", 512, 1, "15m")};
  if (situation == "privileged-tools")
    return Recommendation{
        "privileged-tools", "microvm", {}, "a microVM: Docker, FUSE or a VPN need a kernel of their own",
        {"Docker, FUSE and VPNs need root powers (mounts, devices, network setup) a namespace sandbox must refuse.",
         "Inside a microVM the agent can be root of its own kernel without being root of the host's.",
         "The egress proxy still sits at the VM's only network exit."},
        policy("microvm", registries, "4G", 2048, 2, "1h"),
        // Root in the guest (--microvm-root), a nested container of the host's
        // root as the guest sees it (read-only; `:O`: podman's overlay on it, as
        // the view's / cannot be pivoted into): nothing to pull, no image.
        "exguardian run --layer microvm --microvm-root -- podman run --rm --rootfs /:O echo hello from a nested container"};
  return std::nullopt;
}

int write_situations(std::ostream& out, bool as_json) {
  std::vector<Recommendation> recs;
  for (const auto& s : situations()) recs.push_back(*recommendation_for(s));
  if (as_json) {
    json doc = json::array();
    for (const auto& r : recs) doc.push_back({{"situation", r.situation}, {"layer", r.layer}, {"summary", r.summary}});
    out << doc.dump(2) << "\n";
    return 0;
  }
  size_t width = 0;
  for (const auto& r : recs) width = std::max(width, r.situation.size());
  out << "situations (exguardian recommend --situation NAME: the layer, why, and a policy to start from):\n";
  for (const auto& r : recs)
    out << "  " << r.situation << std::string(width - r.situation.size() + 2, ' ') << r.layer << ": " << r.summary
        << "\n";
  return 0;
}

int write_recommendation(std::ostream& out, std::ostream& err, std::string_view situation, bool as_json,
                         const std::vector<Capability>* caps_in) {
  auto rec = recommendation_for(situation);
  if (!rec) {
    err << "exguardian: recommend: unknown situation \"" << situation << "\" (expected "
        << join(situations(), ", ", " or ") << ")\n";
    return 2;
  }
  std::vector<Capability> probed;
  if (!caps_in) probed = probe_host();
  const auto& caps = caps_in ? *caps_in : probed;
  const auto layers = layer_status(caps);
  auto status = [&](const std::string& name) -> const LayerStatus* {
    for (const auto& l : layers)
      if (l.name == name) return &l;
    return nullptr;
  };
  // The first of the layer and its alternatives that this host has.
  std::string provided;
  std::vector<std::string> candidates{rec->layer};
  candidates.insert(candidates.end(), rec->alternatives.begin(), rec->alternatives.end());
  for (const auto& c : candidates)
    if (const LayerStatus* s = status(c); s && s->available) {
      provided = c;
      break;
    }
  // --layer auto's judgement (the same layer_status), for a policy that asks nothing special.
  const auto auto_choice = choose_auto(judge_layers(caps, {}));
  std::string host_line;
  if (!provided.empty()) {
    host_line = "yes: the " + provided + " layer (" + status(provided)->why + ")";
  } else {
    std::vector<std::string> whys;
    for (const auto& c : candidates) whys.push_back(c + ": " + status(c)->why);
    host_line = "no: " + join(whys, "; ", "; ");
  }
  if (as_json) {
    json doc{{"situation", rec->situation},
             {"layer", rec->layer},
             {"alternatives", rec->alternatives},
             {"summary", rec->summary},
             {"why", rec->why},
             {"host", {{"can_provide", !provided.empty()}, {"layer", provided.empty() ? json(nullptr) : json(provided)},
                       {"detail", host_line},
                       {"auto", auto_choice.chosen ? json(std::string(layer::name(*auto_choice.chosen))) : json(nullptr)},
                       {"auto_line", auto_choice.line()}}},
             {"policy", rec->policy}};
    if (!rec->command.empty()) doc["command"] = rec->command;
    out << doc.dump(2) << "\n";
    return 0;
  }
  out << rec->situation << ": " << rec->summary << "\n";
  out << "layer: " << rec->layer;
  if (!rec->alternatives.empty()) out << " (or " << join(rec->alternatives, ", ", " or ") << ")";
  out << "\nwhy:\n";
  for (const auto& w : rec->why) out << "  " << w << "\n";
  out << "this host: " << host_line << "\n";
  out << "this host, " << auto_choice.line() << "\n";
  out << "starting policy (save as .exguardian.json and adjust):\n" << rec->policy.dump(2) << "\n";
  if (!rec->command.empty()) out << "try it (as printed, in your project's directory):\n  " << rec->command << "\n";
  return 0;
}

}  // namespace exg::doctor
