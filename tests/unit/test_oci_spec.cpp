// The OCI export of a Plan: config.json validated against the vendored OCI
// runtime-spec schema (python3-jsonschema), the protections checked one by
// one, and the seccomp profile checked against the process layer's rule table
// (same syscalls, same refusals for every argument value tried).
#include <gtest/gtest.h>

#include "temp_dir.hpp"
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>

#include "oci/spec.hpp"
#include "plan/plan.hpp"
#include "walls/seccomp.hpp"
#include "walls/seccomp_rules.hpp"
#include "serve/connect_rpc.hpp"

namespace exg::oci {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
namespace rules = walls::seccomp_rules;

const std::string kSchemaDir = std::string(EXG_SOURCE_DIR) + "/tests/data/oci-runtime-spec";

// For each doc: "" when it validates against config-schema.json, else the
// validator's words. One python process for all of them: its start and the
// schema's loading cost more than a document's validation.
std::vector<std::string> schema_errors_all(const std::vector<json>& docs) {
  std::vector<std::string> files;
  auto cleanup = [&files] {
    for (const auto& f : files) ::unlink(f.c_str());
  };
  for (const auto& doc : docs) {
    char tmpl[] = "/tmp/exg_oci_spec_XXXXXX";
    int fd = ::mkstemp(tmpl);
    if (fd < 0) {
      cleanup();
      return std::vector<std::string>(docs.size(), "mkstemp failed");
    }
    files.emplace_back(tmpl);
    std::string text = doc.dump();
    bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    if (!written) {
      cleanup();
      return std::vector<std::string>(docs.size(), "write failed");
    }
  }
  std::string py =
      "import json,sys,pathlib\n"
      "try:\n"
      "  import jsonschema\n"
      "except ImportError:\n"
      "  print('python3-jsonschema is not installed (make deps installs it)'); sys.exit(3)\n"
      "d=pathlib.Path(sys.argv[1])\n"
      "schema=json.load(open(d/'config-schema.json'))\n"
      "res=jsonschema.RefResolver(base_uri=d.resolve().as_uri()+'/',referrer=schema)\n"
      "v=jsonschema.Draft4Validator(schema,resolver=res)\n"
      "for f in sys.argv[2:]:\n"
      "  errs=[e.message+' at '+'/'.join(map(str,e.absolute_path)) for e in v.iter_errors(json.load(open(f)))]\n"
      "  print('\\n'.join(['== '+f]+errs[:10]))\n";
  std::string cmd = "python3 -c \"$EXG_PY\" '" + kSchemaDir + "'";
  for (const auto& f : files) cmd += " '" + f + "'";
  cmd += " 2>&1";
  ::setenv("EXG_PY", py.c_str(), 1);
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[512];
  while (p && std::fgets(buf, sizeof buf, p)) out += buf;
  int st = p ? ::pclose(p) : -1;
  cleanup();
  std::vector<std::string> errors(docs.size());
  size_t seen = 0;
  std::string* current = nullptr;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (seen < files.size() && line == "== " + files[seen]) {
      current = &errors[seen++];
      continue;
    }
    if (current) *current += line + "\n";
  }
  if (st != 0 || seen != files.size())
    for (auto& e : errors)
      if (e.empty()) e = "validator failed (status " + std::to_string(st) + "): " + out;
  return errors;
}

std::string schema_errors(const json& doc) { return schema_errors_all({doc})[0]; }

using exg::test_support::TempDir;

class OciSpecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ws = tmp.path() + "/ws";
    home = tmp.path() + "/home";
    fs::create_directories(ws + "/.git/hooks");
    fs::create_directories(home + "/.ssh");
    std::ofstream(home + "/.npmrc") << "//registry/:_authToken=secret\n";
    std::ofstream(ws + "/.git/config") << "[core]\n";
    ctx.uid = 1000;
    ctx.gid = 1000;
    ctx.cwd = ws;
    ctx.home = home;
    ctx.workspace = ws;
    ctx.argv = {"bash", "-c", "echo hi"};
    ctx.sandbox_id = "ocitest1";
    ctx.environ = {"PATH=/usr/bin:/bin", "TERM=xterm", "GITHUB_TOKEN=ghp_secret"};
    opt.unstaged_overlay_read_only = true;
    opt.rootless = true;
    opt.host_mount_points = std::vector<std::string>{"/", "/proc", "/usr", "/usr/lib/sub", "/usr-other"};
  }

  // As `exguardian oci-spec` compiles: no transparent egress (no supervisor;
  // the layer itself stages the generated files, see OciLayer).
  plan::Plan compile(policy::Policy pol = {}) {
    if (!pol.network.transparent) pol.network.transparent = false;
    auto r = plan::compile(pol, ctx);
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().str());
    return r ? *r : plan::Plan{};
  }

  json spec(const plan::Plan& p) {
    auto s = make_spec(p, opt);
    EXPECT_TRUE(s.has_value()) << (s ? "" : s.error().str());
    return s ? *s : json{};
  }

  static policy::PathEntry entry(const std::string& path) {
    policy::PathEntry e;
    e.path = path;
    e.base_dir = "/";
    e.where = {"p.json", 1, 1};
    return e;
  }

  const json* mount_at(const json& s, const std::string& dest) {
    const json* found = nullptr;
    for (const auto& m : s["mounts"])
      if (m["destination"] == dest) found = &m;  // the last one wins, as when mounted in order
    return found;
  }

  static bool has_opt(const json& m, const std::string& o) {
    return std::find(m["options"].begin(), m["options"].end(), o) != m["options"].end();
  }

  TempDir tmp;
  std::string ws, home;
  plan::Context ctx;
  SpecOptions opt;
};

// ---- schema ----

TEST_F(OciSpecTest, DefaultRootlessSpecValidates) {
  json s = spec(compile());
  EXPECT_EQ(schema_errors(s), "");
  EXPECT_EQ(s["ociVersion"], "1.0.2");
}

TEST_F(OciSpecTest, SchemaCheckCatchesABrokenSpec) {
  // The validator is real: a spec without ociVersion and a bad mount fails.
  json s = spec(compile());
  s.erase("ociVersion");
  s["mounts"][0]["destination"] = 42;
  EXPECT_NE(schema_errors(s), "");
}

TEST_F(OciSpecTest, EveryRuntimeAndModeValidates) {
  policy::Policy pol;
  pol.resources.memory_bytes = 512ull << 20;
  pol.resources.pids = 64;
  pol.resources.cpus = 1.5;
  pol.filesystem.deny_read.push_back(entry(home + "/.ssh"));
  pol.filesystem.deny_write.push_back(entry(ws + "/ro.txt"));
  std::ofstream(ws + "/ro.txt") << "x";
  plan::Plan p = compile(pol);
  std::vector<json> docs;
  std::vector<std::string> labels;
  for (Runtime rt : {Runtime::Crun, Runtime::Runc, Runtime::Runsc})
    for (bool rootless : {true, false})
      for (bool terminal : {false, true})
        for (std::string listener : {"", "/run/exg/seccomp.sock"}) {
          opt.runtime = rt;
          opt.seccomp_prebuilt_program = rt == Runtime::Crun && !listener.empty() && !terminal;  // both crun forms
          opt.rootless = rootless;
          opt.terminal = terminal;
          opt.seccomp_listener_path = listener;
          opt.netns_path = rootless ? "" : "/proc/1/ns/net";
          opt.cgroups_path = rootless ? "" : "/exguardian/x";
          docs.push_back(spec(p));
          labels.push_back(std::string(to_string(rt)) + " rootless=" + std::to_string(rootless) +
                           " terminal=" + std::to_string(terminal) + " listener=" + listener);
        }
  auto errors = schema_errors_all(docs);
  for (size_t i = 0; i < docs.size(); ++i) EXPECT_EQ(errors[i], "") << labels[i];
}

TEST_F(OciSpecTest, RootInvocationValidates) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown the workspace";
  ASSERT_EQ(::chown(ws.c_str(), 1000, 1000), 0);
  ctx.uid = 0;
  ctx.gid = 0;
  plan::Plan p = compile();
  ASSERT_TRUE(p.identity.invoked_as_root);
  opt.rootless = false;
  json s = spec(p);
  EXPECT_EQ(schema_errors(s), "");
  EXPECT_EQ(s["process"]["user"]["uid"], 1000);
  EXPECT_FALSE(s["linux"].contains("uidMappings"));
  for (const auto& n : s["linux"]["namespaces"]) EXPECT_NE(n["type"], "user");
}

// ---- the protections ----

TEST_F(OciSpecTest, ProcessHasNoPrivileges) {
  plan::Plan p = compile();
  json s = spec(p);
  const json& proc = s["process"];
  for (const char* set : {"bounding", "effective", "inheritable", "permitted", "ambient"})
    EXPECT_EQ(proc["capabilities"][set], json::array()) << set;
  EXPECT_EQ(proc["noNewPrivileges"], true);
  EXPECT_EQ(proc["user"]["uid"], p.identity.inside_uid);
  EXPECT_EQ(proc["user"]["gid"], p.identity.inside_gid);
  EXPECT_EQ(proc["args"], json(p.argv));
  EXPECT_EQ(proc["env"], json(p.env));
  EXPECT_EQ(proc["cwd"], ws);
  EXPECT_EQ(proc["terminal"], false);
  for (const auto& e : p.env) EXPECT_EQ(e.find("ghp_secret"), std::string::npos);
  // The process layer's rlimits.
  std::set<std::string> types;
  for (const auto& r : proc["rlimits"]) types.insert(r["type"]);
  EXPECT_TRUE(types.count("RLIMIT_CORE"));
  EXPECT_TRUE(types.count("RLIMIT_NOFILE"));
  EXPECT_EQ(s["root"]["readonly"], true);
  EXPECT_EQ(s["root"]["path"], "/");
  EXPECT_EQ(s["hostname"], "exguardian");
}

TEST_F(OciSpecTest, RootlessMapsOnlyTheCallersUid) {
  json s = spec(compile());
  ASSERT_EQ(s["linux"]["uidMappings"].size(), 1u);
  EXPECT_EQ(s["linux"]["uidMappings"][0], json({{"containerID", 1000}, {"hostID", 1000}, {"size", 1}}));
  std::set<std::string> ns;
  for (const auto& n : s["linux"]["namespaces"]) ns.insert(n["type"]);
  EXPECT_EQ(ns, (std::set<std::string>{"pid", "ipc", "uts", "mount", "network", "cgroup", "user"}));
}

TEST_F(OciSpecTest, NetworkNamespaceJoinsThePreparedOne) {
  opt.netns_path = "/proc/1/ns/net";
  json s = spec(compile());
  bool found = false;
  for (const auto& n : s["linux"]["namespaces"])
    if (n["type"] == "network") found = n.value("path", "") == "/proc/1/ns/net";
  EXPECT_TRUE(found);
}

TEST_F(OciSpecTest, MountsFollowThePlan) {
  policy::Policy pol;
  pol.filesystem.deny_read.push_back(entry(home + "/.ssh"));
  std::ofstream(ws + "/ro.txt") << "x";
  pol.filesystem.deny_write.push_back(entry(ws + "/ro.txt"));
  json s = spec(compile(pol));
  // Workspace read-write, never suid or devices.
  const json* w = mount_at(s, ws);
  ASSERT_TRUE(w);
  EXPECT_EQ((*w)["type"], "bind");
  EXPECT_TRUE(has_opt(*w, "rw") && has_opt(*w, "nosuid") && has_opt(*w, "nodev"));
  // Host directories read-only, with their submounts (no "rro" rootless).
  const json* usr = mount_at(s, "/usr");
  ASSERT_TRUE(usr);
  EXPECT_TRUE(has_opt(*usr, "ro"));
  const json* sub = mount_at(s, "/usr/lib/sub");
  ASSERT_TRUE(sub) << "a submount of a read-only tree needs its own read-only bind";
  EXPECT_TRUE(has_opt(*sub, "ro"));
  EXPECT_FALSE(mount_at(s, "/usr-other"));  // not below /usr
  // /tmp private and the command's.
  const json* t = mount_at(s, "/tmp");
  ASSERT_TRUE(t);
  EXPECT_EQ((*t)["type"], "tmpfs");
  EXPECT_TRUE(has_opt(*t, "uid=1000"));
  // Credentials: a file masked with a device on a nodev mount (open fails),
  // a directory with an empty read-only tmpfs.
  const json* npmrc = mount_at(s, home + "/.npmrc");
  ASSERT_TRUE(npmrc);
  EXPECT_EQ((*npmrc)["source"], "/dev/null");
  EXPECT_TRUE(has_opt(*npmrc, "nodev") && has_opt(*npmrc, "ro"));
  const json* ssh = mount_at(s, home + "/.ssh");
  ASSERT_TRUE(ssh);
  EXPECT_EQ((*ssh)["type"], "tmpfs");
  EXPECT_TRUE(has_opt(*ssh, "ro") && has_opt(*ssh, "mode=0000"));
  // Protected names and denyWrite: read-only binds after the workspace.
  const json* hooks = mount_at(s, ws + "/.git/hooks");
  ASSERT_TRUE(hooks);
  EXPECT_TRUE(has_opt(*hooks, "ro"));
  const json* ro = mount_at(s, ws + "/ro.txt");
  ASSERT_TRUE(ro);
  EXPECT_TRUE(has_opt(*ro, "ro"));
  auto pos = [&](const std::string& d) {
    for (size_t i = 0; i < s["mounts"].size(); ++i)
      if (s["mounts"][i]["destination"] == d) return i;
    return size_t(-1);
  };
  EXPECT_LT(pos(ws), pos(ws + "/.git/hooks"));
  EXPECT_LT(pos("/tmp"), pos(ws));  // the workspace is under /tmp here: bound after /tmp's tmpfs
  // /proc knobs: the runtime's readonlyPaths (a bind from the host's /proc would be the host's).
  for (const auto& m : s["mounts"]) {
    std::string d = m["destination"];
    EXPECT_FALSE(d.starts_with("/proc/")) << d;
  }
  std::set<std::string> rop(s["linux"]["readonlyPaths"].begin(), s["linux"]["readonlyPaths"].end());
  EXPECT_TRUE(rop.count("/proc/sys") && rop.count("/proc/sysrq-trigger"));
  std::set<std::string> masked(s["linux"]["maskedPaths"].begin(), s["linux"]["maskedPaths"].end());
  EXPECT_TRUE(masked.count("/proc/kcore") && masked.count("/proc/keys"));
  // HOME without staging: read-only here (said in the notes).
  const json* h = mount_at(s, home);
  ASSERT_TRUE(h);
  EXPECT_TRUE(has_opt(*h, "ro"));
}

TEST_F(OciSpecTest, CrunAsRootBindsRecursivelyReadOnly) {
  opt.rootless = false;
  json s = spec(compile());
  const json* usr = mount_at(s, "/usr");
  ASSERT_TRUE(usr);
  EXPECT_TRUE(has_opt(*usr, "rro"));
  EXPECT_FALSE(mount_at(s, "/usr/lib/sub"));  // rro covers it
  opt.runtime = Runtime::Runc;
  s = spec(compile());
  EXPECT_FALSE(has_opt(*mount_at(s, "/usr"), "rro"));  // runc 1.1 does not know it
  EXPECT_TRUE(mount_at(s, "/usr/lib/sub"));
}

TEST_F(OciSpecTest, StagedSourcesReplaceHostPaths) {
  plan::Plan p = compile();
  opt.unstaged_overlay_read_only = false;
  opt.source_override[home] = "/run/exg/stage/3";
  opt.source_override[ws] = "/run/exg/stage/4";
  json s = spec(p);
  EXPECT_EQ((*mount_at(s, home))["source"], "/run/exg/stage/3");
  EXPECT_TRUE(has_opt(*mount_at(s, home), "rw"));  // the staged overlay is writable
  EXPECT_EQ((*mount_at(s, ws))["source"], "/run/exg/stage/4");
  // Protected paths inside the workspace bind from the staged workspace too.
  EXPECT_EQ((*mount_at(s, ws + "/.git/hooks"))["source"], "/run/exg/stage/4/.git/hooks");
}

TEST_F(OciSpecTest, LimitsAndDevices) {
  policy::Policy pol;
  pol.resources.memory_bytes = 512ull << 20;
  pol.resources.pids = 64;
  pol.resources.cpus = 0.5;
  opt.cgroups_path = "/exguardian/ocitest1";
  json s = spec(compile(pol));
  const json& r = s["linux"]["resources"];
  EXPECT_EQ(r["memory"]["limit"], 512ull << 20);
  EXPECT_EQ(r["memory"]["swap"], 512ull << 20);  // memory+swap = limit: no swap on top
  EXPECT_EQ(r["pids"]["limit"], 64);
  EXPECT_EQ(r["cpu"]["quota"], 50000);
  EXPECT_EQ(r["cpu"]["period"], 100000);
  EXPECT_EQ(r["devices"][0], json({{"allow", false}, {"access", "rwm"}}));
  EXPECT_EQ(s["linux"]["cgroupsPath"], "/exguardian/ocitest1");
  EXPECT_FALSE(s["linux"].contains("sysctl"));
}

TEST_F(OciSpecTest, UnsupportedStepsAreErrors) {
  plan::Plan p = compile();
  plan::Step odd;
  odd.kind = static_cast<plan::StepKind>(999);
  odd.target = "/etc/odd";
  p.steps.push_back(odd);
  auto r = make_spec(p, opt);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().str().find("/etc/odd"), std::string::npos) << r.error().str();
  EXPECT_NE(r.error().str().find("not known"), std::string::npos) << r.error().str();

  plan::Plan q = compile();
  plan::Step dev;
  dev.kind = plan::StepKind::DevNode;
  dev.source = dev.target = "/dev/kvm";
  q.steps.push_back(dev);
  EXPECT_FALSE(make_spec(q, opt).has_value());

  // A throwaway layer without the layer's staging is an error unless asked for.
  opt.unstaged_overlay_read_only = false;
  EXPECT_FALSE(make_spec(compile(), opt).has_value());
  // The workspace overlay mode always needs exguardian run.
  opt.unstaged_overlay_read_only = true;
  ctx.workspace_mode = plan::WorkspaceMode::Overlay;
  auto o = make_spec(compile(), opt);
  ASSERT_FALSE(o.has_value());
  EXPECT_NE(o.error().str().find("workspace"), std::string::npos);
}

TEST_F(OciSpecTest, NoSeccompOnlyWhenThePlanSaysSo) {
  plan::Plan p = compile();
  EXPECT_TRUE(spec(p)["linux"].contains("seccomp"));
  p.seccomp = false;
  EXPECT_FALSE(spec(p)["linux"].contains("seccomp"));
}

// crun, as the container layer runs it: the process layer's program itself, in
// crun's annotation; linux.seccomp keeps only the listener, and kills
// everything should a runtime ignore the annotation (fail closed).
TEST_F(OciSpecTest, CrunGetsTheProcessLayersProgramAndAFailClosedProfile) {
  plan::Plan p = compile();
  opt.runtime = Runtime::Crun;
  opt.seccomp_listener_path = "/run/exg/seccomp.sock";
  opt.seccomp_prebuilt_program = true;
  json s = spec(p);
  ASSERT_TRUE(s.contains("annotations"));
  auto bytes = serve::rpc::base64_decode(s["annotations"]["run.oci.seccomp_bpf_data"].get<std::string>());
  ASSERT_TRUE(bytes);
  const auto& prog = walls::prebuilt_seccomp_program();
  ASSERT_EQ(bytes->size(), prog.size() * sizeof(sock_filter));
  EXPECT_EQ(std::memcmp(bytes->data(), prog.data(), bytes->size()), 0);
  EXPECT_EQ(s["linux"]["seccomp"],
            json({{"defaultAction", "SCMP_ACT_KILL_PROCESS"}, {"architectures", {"SCMP_ARCH_X86_64"}},
                  {"syscalls", json::array()}, {"listenerPath", "/run/exg/seccomp.sock"}}));

  // Every other case keeps the full profile and no annotation: runc and runsc
  // (no such annotation), no listener (oci-spec: a bundle for any runtime), no seccomp at all.
  auto full_profile = [&](Runtime rt, const std::string& listener) {
    opt.runtime = rt;
    opt.seccomp_listener_path = listener;
    json t = spec(p);
    EXPECT_FALSE(t.contains("annotations")) << to_string(rt) << " listener=" << listener;
    EXPECT_EQ(t["linux"]["seccomp"], seccomp_profile(listener, rt)) << to_string(rt) << " listener=" << listener;
  };
  full_profile(Runtime::Runc, "/run/exg/seccomp.sock");
  // The gVisor layer: pid 1 installs the filter (exguardian-init --seccomp), none in the spec.
  opt.runtime = Runtime::Runsc;
  opt.seccomp_listener_path = "";
  opt.seccomp_by_pid1 = true;
  EXPECT_FALSE(spec(p)["linux"].contains("seccomp"));
  opt.seccomp_by_pid1 = false;
  full_profile(Runtime::Runsc, "");
  full_profile(Runtime::Crun, "");
  p.seccomp = false;
  opt.runtime = Runtime::Crun;
  opt.seccomp_listener_path = "/run/exg/seccomp.sock";
  json none = spec(p);
  EXPECT_FALSE(none.contains("annotations"));
  EXPECT_FALSE(none["linux"].contains("seccomp"));
}

// ---- seccomp: the same rules as the process layer ----

// What an OCI filter does for one call: the errno of the matching rule, 0 if none.
// The profile's rules as plain data, read once: the value-set test below asks
// tens of thousands of verdicts, which walking the JSON each time made take
// ten minutes under ASan (-O0) on a loaded machine.
struct OciRules {
  struct Arg {
    unsigned index;
    uint64_t mask, value;
  };
  struct Rule {
    std::vector<std::string> names;
    std::vector<Arg> args;
    int errno_ret;
  };
  std::vector<Rule> rules;
};

OciRules read_rules(const json& profile) {
  OciRules out;
  for (const auto& r : profile["syscalls"]) {
    OciRules::Rule rule{r["names"].get<std::vector<std::string>>(), {}, r.value("errnoRet", -1)};
    for (const auto& a : r.value("args", json::array())) {
      EXPECT_EQ(a["op"], "SCMP_CMP_MASKED_EQ");
      rule.args.push_back({a["index"].get<unsigned>(), a["value"].get<uint64_t>(), a["valueTwo"].get<uint64_t>()});
    }
    out.rules.push_back(std::move(rule));
  }
  return out;
}

// What the profile decides for one call: the first rule that names it and
// whose every argument condition holds gives its errno; none: allowed (0).
int oci_verdict(const OciRules& profile, const std::string& name, const uint64_t args[6]) {
  for (const auto& r : profile.rules) {
    if (std::find(r.names.begin(), r.names.end(), name) == r.names.end()) continue;
    bool all = true;
    for (const auto& a : r.args)
      if ((args[a.index] & a.mask) != a.value) all = false;
    if (all) return r.errno_ret;
  }
  return 0;
}

int oci_verdict(const json& profile, const std::string& name, const uint64_t args[6]) {
  return oci_verdict(read_rules(profile), name, args);
}

int syscall_nr(const std::string& name) {
  if (name == "socket") return SYS_socket;
  if (name == "socketpair") return SYS_socketpair;
  if (name == "personality") return SYS_personality;
  return -1;
}

// What the process layer decides: refused (its errno) or allowed (0), from the
// rule table's value sets, compared on the low 32 bits.
int process_verdict(const std::string& name, const uint64_t args[6]) {
  auto in = [](std::span<const uint32_t> set, uint64_t v) {
    return std::find(set.begin(), set.end(), static_cast<uint32_t>(v)) != set.end();
  };
  if (name == "personality") return in(rules::personality_allowed(), args[0]) ? 0 : EPERM;
  uint32_t fam = static_cast<uint32_t>(args[0]);
  bool refused = !in(rules::socket_families_allowed(), fam) ||
                 ((fam == AF_INET || fam == AF_INET6) && in(rules::inet_types_refused(), args[1] & 0xf)) ||
                 (fam == AF_NETLINK && !in(rules::netlink_protocols_allowed(), args[2]));
  return refused ? rules::refused_errno(syscall_nr(name), args) : 0;
}

TEST(OciSeccomp, ProfileShape) {
  json p = seccomp_profile();
  EXPECT_EQ(p["defaultAction"], "SCMP_ACT_ALLOW");
  EXPECT_EQ(p["architectures"], json::array({"SCMP_ARCH_X86_64"}));
  EXPECT_FALSE(p.contains("listenerPath"));
  for (const auto& r : p["syscalls"]) EXPECT_EQ(r["action"], "SCMP_ACT_ERRNO");
}

TEST(OciSeccomp, EveryRefusedSyscallIsThere) {
  json p = seccomp_profile();
  uint64_t none[6] = {};
  for (const char* name : rules::refused_syscalls()) EXPECT_EQ(oci_verdict(p, name, none), EPERM) << name;
  for (const auto& n : rules::refused_by_number()) EXPECT_EQ(oci_verdict(p, n.name, none), EPERM) << n.name;
  EXPECT_EQ(oci_verdict(p, "clone3", none), ENOSYS);
  EXPECT_EQ(oci_verdict(p, "read", none), 0);
}

TEST(OciSeccomp, CloneFlagsAndIoctl) {
  json p = seccomp_profile();
  uint64_t a[6] = {};
  a[0] = 0x3d0f00;  // glibc's pthread_create flags
  EXPECT_EQ(oci_verdict(p, "clone", a), 0);
  for (uint64_t f : {0x10000000ull /* NEWUSER */, 0x20000000ull /* NEWPID */, 0x40000000ull /* NEWNET */,
                     0x20000ull /* NEWNS */, 0x02000000ull /* NEWCGROUP */, 0x04000000ull, 0x08000000ull}) {
    a[0] = 0x3d0f00 | f;
    EXPECT_EQ(oci_verdict(p, "clone", a), EPERM) << std::hex << f;
    EXPECT_EQ(oci_verdict(p, "unshare", a), EPERM) << std::hex << f;
  }
  a[0] = 0x80;  // CLONE_NEWTIME
  EXPECT_EQ(oci_verdict(p, "unshare", a), EPERM);
  a[0] = 0;
  a[1] = TIOCSTI;
  EXPECT_EQ(oci_verdict(p, "ioctl", a), EPERM);
  a[1] = 0xdead00000000ull | TIOCSTI;  // high bits do not slip through
  EXPECT_EQ(oci_verdict(p, "ioctl", a), EPERM);
  a[1] = TIOCLINUX;
  EXPECT_EQ(oci_verdict(p, "ioctl", a), EPERM);
  a[1] = TIOCGWINSZ;
  EXPECT_EQ(oci_verdict(p, "ioctl", a), 0);
}

TEST(OciSeccomp, ValueSetsMatchTheProcessLayerForEveryValueTried) {
  OciRules p = read_rules(seccomp_profile());
  std::vector<uint64_t> values;
  for (uint64_t v = 0; v < 300; ++v) values.push_back(v);
  for (uint64_t base : {0x8ull, 0x20000ull, 0x20008ull, 0x40000ull, 0xffffffffull, 0x80000000ull, 0x10000ull})
    for (int64_t d = -3; d <= 3; ++d) values.push_back(static_cast<uint64_t>(static_cast<int64_t>(base) + d) & 0xffffffffull);
  std::mt19937_64 rng(7);
  for (int i = 0; i < 3000; ++i) values.push_back(rng() & 0xffffffffull);
  size_t n = values.size();
  for (size_t i = 0; i < n; ++i) values.push_back(values[i] | 0x1234567800000000ull);  // garbage high bits
  for (const std::string name : {"personality", "socket", "socketpair"}) {
    for (uint64_t v : values) {
      uint64_t a[6] = {v, SOCK_STREAM, 0, 0, 0, 0};
      EXPECT_EQ(oci_verdict(p, name, a), process_verdict(name, a)) << name << " arg0=0x" << std::hex << v;
    }
  }
  // Second and third arguments of socket: raw/packet inet sockets, netlink protocols.
  for (uint64_t fam : {uint64_t{AF_INET}, uint64_t{AF_INET6}, uint64_t{AF_NETLINK}, uint64_t{AF_UNIX},
                       uint64_t{AF_INET} | uint64_t{0xff00000000}})
    for (uint64_t v : values) {
      uint64_t a1[6] = {fam, v, 0, 0, 0, 0};
      EXPECT_EQ(oci_verdict(p, "socket", a1), process_verdict("socket", a1)) << fam << " type=0x" << std::hex << v;
      uint64_t a2[6] = {fam, SOCK_RAW, v, 0, 0, 0};
      EXPECT_EQ(oci_verdict(p, "socket", a2), process_verdict("socket", a2)) << fam << " proto=0x" << std::hex << v;
    }
}

TEST(OciSeccomp, NotifyWithAListener) {
  json p = seccomp_profile("/run/exg/notify.sock");
  EXPECT_EQ(p["listenerPath"], "/run/exg/notify.sock");
  for (const auto& r : p["syscalls"]) {
    bool clone3 = std::find(r["names"].begin(), r["names"].end(), "clone3") != r["names"].end();
    EXPECT_EQ(r["action"], clone3 ? "SCMP_ACT_ERRNO" : "SCMP_ACT_NOTIFY");
  }
}

TEST(OciSeccomp, RunscLeavesClone3ToGvisor) {
  json p = seccomp_profile("", Runtime::Runsc);
  uint64_t none[6] = {};
  EXPECT_EQ(oci_verdict(p, "clone3", none), 0);
  EXPECT_EQ(oci_verdict(p, "ptrace", none), EPERM);
}

// gVisor does not shield pid 1 from its own namespace's SIGKILL: signals aimed
// at pid 1 are refused there (and only there: Linux does it on the others).
TEST(OciSeccomp, RunscRefusesSignalsToPid1) {
  json p = seccomp_profile("", Runtime::Runsc);
  for (const char* name : {"kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"}) {
    uint64_t to_init[6] = {1, 9}, to_other[6] = {2, 9}, high_bits[6] = {0x100000002ull, 9};
    uint64_t to_init_high[6] = {0xffffffff00000001ull, 9};  // the kernel reads an int
    EXPECT_EQ(oci_verdict(p, name, to_init), EPERM) << name;
    EXPECT_EQ(oci_verdict(p, name, to_init_high), EPERM) << name;
    EXPECT_EQ(oci_verdict(p, name, to_other), 0) << name;
    EXPECT_EQ(oci_verdict(p, name, high_bits), 0) << name;
  }
  uint64_t to_init[6] = {1, 9};
  EXPECT_EQ(oci_verdict(seccomp_profile("", Runtime::Crun), "kill", to_init), 0);
}

TEST(OciSeccomp, ComplementBlocksAreExact) {
  const uint32_t allowed[] = {0, 5, 6, 0xfffffffe};
  auto blocks = rules::complement_blocks(0, allowed);
  auto refused = [&](uint64_t v) {
    return std::any_of(blocks.begin(), blocks.end(), [&](auto& b) { return (v & b.mask) == b.value; });
  };
  for (uint64_t v : {0ull, 5ull, 6ull, 0xfffffffeull, 0x1fffffffeull}) EXPECT_FALSE(refused(v)) << v;
  for (uint64_t v : {1ull, 4ull, 7ull, 0xffffffffull, 0xfffffffdull, 0x80000000ull}) EXPECT_TRUE(refused(v)) << v;
  EXPECT_LE(blocks.size(), 64u);
}

}  // namespace
}  // namespace exg::oci
