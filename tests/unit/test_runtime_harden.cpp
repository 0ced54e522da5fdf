// exguardian runtime's policy narrowing and config.json hardening (oci/
// runtime_policy.hpp, runtime/harden.hpp), on JSON: never widened, the engine's
// namespaces, hooks and pod paths kept, the pause container recognised.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>

#include "runtime/harden.hpp"
#include "runtime/runtime_policy.hpp"

namespace {

using nlohmann::json;
using namespace exg;

policy::Policy parse(const std::string& text) {
  auto p = policy::parse_policy(text, "h.json", "/");
  EXPECT_TRUE(p.has_value()) << (p ? "" : p.error().message);
  return p ? *p : policy::Policy{};
}

const char* kHandler = R"({
  "network": {"allowedDomains": ["*.example.com", "pypi.org:443"], "deniedDomains": ["bad.example.com"],
              "allowedCidrs": ["10.1.0.0/16"]},
  "filesystem": {"denyRead": ["/etc/shadow"], "allowWrite": ["/work", "/tmp"], "denyWrite": []},
  "resources": {"pids": 100, "memory": "1G"}
})";

std::vector<std::string> patterns(const std::vector<policy::DomainEntry>& v) {
  std::vector<std::string> out;
  for (const auto& d : v) out.push_back(d.pattern);
  return out;
}

TEST(RuntimePolicy, ProfileOnlyNarrows) {
  auto profile = parse(R"({
    "network": {"allowedDomains": ["api.example.com", "example.com", "pypi.org:443", "pypi.org", "evil.org"],
                "deniedDomains": ["x.example.com"], "allowedCidrs": ["10.1.0.0/16", "0.0.0.0/0"]},
    "filesystem": {"denyRead": ["/etc/passwd"], "allowWrite": ["/work/sub", "/data"], "denyWrite": ["/work/.git"]},
    "resources": {"pids": 500, "memory": "512M"}
  })");
  auto n = runtime::narrow_policy(parse(kHandler), profile);
  ASSERT_TRUE(n.has_value()) << n.error().str();
  // *.example.com covers api.example.com but not example.com; pypi.org:443 not pypi.org (any port).
  EXPECT_EQ(patterns(n->network.allowed_domains), (std::vector<std::string>{"api.example.com", "pypi.org:443"}));
  EXPECT_EQ(patterns(n->network.denied_domains), (std::vector<std::string>{"bad.example.com", "x.example.com"}));
  EXPECT_EQ(patterns(n->network.allowed_cidrs), (std::vector<std::string>{"10.1.0.0/16"}));
  ASSERT_EQ(n->filesystem.allow_write.size(), 1u);
  EXPECT_EQ(n->filesystem.allow_write[0].path, "/work/sub");
  EXPECT_EQ(n->filesystem.deny_read.size(), 2u);
  EXPECT_EQ(n->filesystem.deny_write.size(), 1u);
  EXPECT_EQ(n->resources.pids, 100u);                      // the handler's, smaller
  EXPECT_EQ(n->resources.memory_bytes, 512ull << 20);      // the profile's, smaller
}

TEST(RuntimePolicy, ProfileCannotAddSecretsOrEnv) {
  auto env = parse(R"({"env": {"set": {"A": "1"}}})");
  EXPECT_FALSE(runtime::narrow_policy(parse(kHandler), env).has_value());
}

TEST(RuntimePolicy, HandlerNames) {
  EXPECT_TRUE(runtime::valid_handler_name("default"));
  EXPECT_TRUE(runtime::valid_handler_name("gvisor-strict.v2"));
  for (const char* bad : {"", "../x", "a/b", ".hidden", "Upper", "a b"}) EXPECT_FALSE(runtime::valid_handler_name(bad)) << bad;
}

json engine_config() {
  return json::parse(R"({
    "ociVersion": "1.0.2",
    "process": {"args": ["/bin/app"], "env": ["PATH=/bin", "HTTP_PROXY=http://corp:8080"],
                "capabilities": {"bounding": ["CAP_SYS_ADMIN"], "effective": ["CAP_SYS_ADMIN"]}},
    "root": {"path": "rootfs"},
    "hooks": {"prestart": [{"path": "/usr/bin/hook"}]},
    "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
               {"destination": "/dev", "type": "tmpfs", "source": "tmpfs"},
               {"destination": "/work", "type": "bind", "source": "/srv/w", "options": ["rbind", "rw"]},
               {"destination": "/data", "type": "bind", "source": "/srv/d", "options": ["rbind", "rw"]}],
    "linux": {"namespaces": [{"type": "pid"}, {"type": "network", "path": "/proc/42/ns/net"},
                             {"type": "ipc", "path": "/proc/42/ns/ipc"}, {"type": "mount"}],
              "devices": [{"path": "/dev/null", "type": "c", "major": 1, "minor": 3},
                          {"path": "/dev/sda", "type": "b", "major": 8, "minor": 0}],
              "resources": {"pids": {"limit": 1000}}}
  })");
}

TEST(RuntimeHarden, MergesWithoutWidening) {
  auto pol = parse(kHandler);
  json c = engine_config();
  runtime::HardenInputs in;
  in.policy = &pol;
  in.init_source = "/usr/lib/exguardian/exguardian-init";
  in.netns_path = "/proc/42/ns/net";
  in.http_port = 3128;
  in.socks_port = 1080;
  auto notes = runtime::harden_config(c, in);
  ASSERT_TRUE(notes.has_value()) << notes.error().str();
  EXPECT_TRUE(c["root"]["readonly"]);
  EXPECT_EQ(c["process"]["capabilities"]["effective"], json::array());
  EXPECT_TRUE(c["process"]["noNewPrivileges"]);
  EXPECT_EQ(c["process"]["args"][0], runtime::kInitPath);
  EXPECT_EQ(c["process"]["args"][1], "--walls");
  EXPECT_EQ(c["process"]["args"].back(), "/bin/app");
  auto env = c["process"]["env"];
  EXPECT_NE(std::find(env.begin(), env.end(), "HTTP_PROXY=http://127.0.0.1:3128"), env.end());
  EXPECT_EQ(std::find(env.begin(), env.end(), "HTTP_PROXY=http://corp:8080"), env.end());
  EXPECT_EQ(c["hooks"], engine_config()["hooks"]);  // the engine's hooks, as they were
  // The pod's namespace paths kept; the missing uts added.
  EXPECT_EQ(c["linux"]["namespaces"][2]["path"], "/proc/42/ns/ipc");
  EXPECT_EQ(c["linux"]["namespaces"][1]["path"], "/proc/42/ns/net");
  EXPECT_EQ(c["linux"]["namespaces"].size(), 5u);
  for (const auto& m : c["mounts"]) {
    auto opts = m.value("options", json::array());
    bool ro = std::find(opts.begin(), opts.end(), "ro") != opts.end();
    if (m["destination"] == "/data") {
      EXPECT_TRUE(ro);  // not in allowWrite
    }
    if (m["destination"] == "/work") {
      EXPECT_FALSE(ro);  // allowWrite
    }
  }
  EXPECT_EQ(c["mounts"].back()["destination"], runtime::kInitPath);
  bool tmp = false;
  for (const auto& m : c["mounts"]) tmp |= m["destination"] == "/tmp" && m["type"] == "tmpfs";
  EXPECT_TRUE(tmp);  // allowWrite /tmp with no mount of its own: a tmpfs
  auto masked = c["linux"]["maskedPaths"];
  EXPECT_NE(std::find(masked.begin(), masked.end(), "/etc/shadow"), masked.end());
  EXPECT_EQ(c["linux"]["devices"].size(), 1u);  // /dev/sda left out
  EXPECT_EQ(c["linux"]["resources"]["pids"]["limit"], 100);
  EXPECT_TRUE(c["linux"]["seccomp"].is_object());  // none of the engine's: ExGuardian's

  // Hardened twice (a bundle created again): the same.
  json again = c;
  ASSERT_TRUE(runtime::harden_config(again, in).has_value());
  EXPECT_EQ(again["process"]["args"], c["process"]["args"]);
  EXPECT_EQ(again["mounts"].size(), c["mounts"].size());
}

TEST(RuntimeHarden, AForgedWeakerPrefixGetsOursInFront) {
  auto pol = parse(kHandler);
  runtime::HardenInputs in;
  in.policy = &pol;
  json proc = {{"args", {runtime::kInitPath, "--walls", R"({"seccomp":false,"pids":0,"landlock":null})", "--", "sh"}}};
  ASSERT_TRUE(runtime::harden_process(proc, in).has_value());
  EXPECT_EQ(proc["args"][2], runtime::walls_for(pol).dump());
  EXPECT_EQ(proc["args"].size(), 9u);  // ours, then the forged one (walls only add up)
  json again = proc;
  ASSERT_TRUE(runtime::harden_process(again, in).has_value());
  EXPECT_EQ(again["args"], proc["args"]);  // ours exactly: not twice
}

TEST(RuntimeHarden, KeepsTheEnginesSeccompProfile) {
  auto pol = parse(kHandler);
  json c = engine_config();
  c["linux"]["seccomp"] = {{"defaultAction", "SCMP_ACT_ERRNO"}, {"syscalls", json::array()}};
  runtime::HardenInputs in;
  in.policy = &pol;
  ASSERT_TRUE(runtime::harden_config(c, in).has_value());
  EXPECT_EQ(c["linux"]["seccomp"]["defaultAction"], "SCMP_ACT_ERRNO");  // ours is stacked by the init
}

TEST(RuntimeHarden, PodSandboxAndOwnNamespace) {
  json c = engine_config();
  EXPECT_FALSE(runtime::is_pod_sandbox(c));
  c["annotations"] = {{"io.kubernetes.cri.container-type", "sandbox"}};
  EXPECT_TRUE(runtime::is_pod_sandbox(c));
  c["annotations"] = {{"io.kubernetes.cri-o.ContainerType", "sandbox"}};
  EXPECT_TRUE(runtime::is_pod_sandbox(c));

  EXPECT_EQ(runtime::engine_netns_path(engine_config()), "/proc/42/ns/net");
  json fresh = engine_config();
  fresh["linux"]["namespaces"][1].erase("path");
  EXPECT_EQ(runtime::engine_netns_path(fresh), "");
  auto pol = parse(kHandler);
  runtime::HardenInputs in;
  in.policy = &pol;
  in.netns_path = "/proc/7/fd/5";
  ASSERT_TRUE(runtime::harden_config(fresh, in).has_value());
  EXPECT_EQ(fresh["linux"]["namespaces"][1]["path"], "/proc/7/fd/5");
  EXPECT_EQ(runtime::engine_netns_path(fresh), "");  // the holder's own, not the engine's
}

// A pod's container under runsc: the CRI's annotations that would make runsc
// look for the pod's gVisor sandbox (the pause container is crun's) are left
// out; the pod's names stay (audit tags); crun keeps everything.
TEST(RuntimeHarden, RunscContainerOfAPodIsASandboxOfItsOwn) {
  auto pol = parse(kHandler);
  const json cri = {{"io.kubernetes.cri.container-type", "container"},
                    {"io.kubernetes.cri.sandbox-id", "abc"},
                    {"io.kubernetes.cri.sandbox-name", "agent-1"},
                    {"io.kubernetes.cri.container-name", "worker"},
                    {"io.kubernetes.cri-o.ContainerType", "container"},
                    {"io.kubernetes.cri-o.SandboxID", "abc"}};
  runtime::HardenInputs in;
  in.policy = &pol;
  json c = engine_config();
  c["annotations"] = cri;
  in.runtime = oci::Runtime::Runsc;
  ASSERT_TRUE(runtime::harden_config(c, in).has_value());
  EXPECT_EQ(c["annotations"], (json{{"io.kubernetes.cri.sandbox-name", "agent-1"}, {"io.kubernetes.cri.container-name", "worker"}}));
  json k = engine_config();
  k["annotations"] = cri;
  in.runtime = oci::Runtime::Crun;
  ASSERT_TRUE(runtime::harden_config(k, in).has_value());
  EXPECT_EQ(k["annotations"], cri);
}

// A root like an image's: /var/run links to /run, and links that try to leave.
struct ImageRoot {
  std::string dir;
  ImageRoot() {
    char t[] = "/tmp/exg-rootfs-XXXXXX";
    dir = ::mkdtemp(t);
    namespace fs = std::filesystem;
    fs::create_directories(dir + "/run");
    fs::create_directories(dir + "/var");
    fs::create_directories(dir + "/usr/lib");
    fs::create_symlink("../run", dir + "/var/run");
    fs::create_symlink("/usr/lib", dir + "/lib");
    fs::create_symlink("../../../../../../etc", dir + "/usr/lib/up");
    fs::create_symlink("/proc/self/root/etc", dir + "/magic");
    fs::create_symlink("loop2", dir + "/loop1");
    fs::create_symlink("loop1", dir + "/loop2");
  }
  ~ImageRoot() { std::filesystem::remove_all(dir); }
};

TEST(RootfsPaths, ResolvesLinksInsideTheRoot) {
  ImageRoot img;
  auto r = runtime::RootfsPaths::open(img.dir);
  ASSERT_TRUE(r.has_value()) << r.error().str();
  EXPECT_EQ(r->resolve("/var/run/secrets/kubernetes.io/serviceaccount"), "/run/secrets/kubernetes.io/serviceaccount");
  EXPECT_EQ(r->resolve("/var/run"), "/run");
  EXPECT_EQ(r->resolve("/lib/x"), "/usr/lib/x");           // an absolute link: from the root
  EXPECT_EQ(r->resolve("/lib/up/passwd"), "/etc/passwd");  // ".." stops at the root
  EXPECT_EQ(r->resolve("/magic/x"), "/proc/self/root/etc/x");  // not the host's /proc: the image's path
  EXPECT_EQ(r->resolve("/../../workspace/./data/"), "/workspace/data");
  EXPECT_EQ(r->resolve("/loop1/x"), "/loop1/x");  // ELOOP for the runtime too: as written
  EXPECT_EQ(r->resolve("/"), "/");
  EXPECT_EQ(runtime::RootfsPaths().resolve("/var/run//x/../y"), "/var/run/y");
  EXPECT_FALSE(runtime::RootfsPaths::open(img.dir + "/nope").has_value());
}

// The runtime's tmpfs for an allowWrite path goes before the engine's mounts
// below it (mounted later it would cover them): kubelet's token under /var/run
// (a link to /run) and a volume under /workspace stay, as writable as asked.
TEST(RuntimeHarden, OwnMountsGoBeforeTheEnginesBelowThem) {
  ImageRoot img;
  auto root = runtime::RootfsPaths::open(img.dir);
  ASSERT_TRUE(root.has_value());
  auto pol = parse(R"({"filesystem": {"allowWrite": ["/workspace", "/var/run", "/tmp"]}})");
  json c = json::parse(R"({
    "process": {"args": ["/bin/app"]}, "root": {"path": "rootfs"},
    "mounts": [{"destination": "/proc", "type": "proc", "source": "proc"},
               {"destination": "/dev", "type": "tmpfs", "source": "tmpfs"},
               {"destination": "/workspace/data", "type": "bind", "source": "/srv/d", "options": ["rbind", "rw"]},
               {"destination": "/var/run/secrets/kubernetes.io/serviceaccount", "type": "bind", "source": "/srv/t",
                "options": ["rbind", "ro"]},
               {"destination": "/run/x", "type": "bind", "source": "/srv/x", "options": ["rbind", "rw"]}]
  })");
  runtime::HardenInputs in;
  in.policy = &pol;
  in.rootfs = &*root;
  ASSERT_TRUE(runtime::harden_config(c, in).has_value());
  auto index = [&](const std::string& dest, const std::string& type) {
    for (size_t i = 0; i < c["mounts"].size(); ++i)
      if (c["mounts"][i]["destination"] == dest && c["mounts"][i]["type"] == type) return static_cast<int>(i);
    return -1;
  };
  auto opts = [&](const std::string& dest) { return c["mounts"][index(dest, "bind")]["options"]; };
  auto has = [](const json& o, const char* x) { return std::find(o.begin(), o.end(), x) != o.end(); };
  ASSERT_GE(index("/workspace", "tmpfs"), 0);
  ASSERT_GE(index("/var/run", "tmpfs"), 0);
  EXPECT_LT(index("/workspace", "tmpfs"), index("/workspace/data", "bind"));
  EXPECT_LT(index("/var/run", "tmpfs"), index("/var/run/secrets/kubernetes.io/serviceaccount", "bind"));
  EXPECT_LT(index("/var/run", "tmpfs"), index("/run/x", "bind"));  // /run/x: below /var/run resolved
  EXPECT_GT(index("/var/run", "tmpfs"), index("/dev", "tmpfs"));
  EXPECT_FALSE(has(opts("/workspace/data"), "ro"));  // writable as the engine asked
  EXPECT_TRUE(has(opts("/var/run/secrets/kubernetes.io/serviceaccount"), "ro"));
  EXPECT_FALSE(has(opts("/run/x"), "ro"));  // in allowWrite /var/run, which is /run
  // Nothing of the engine's below /tmp or the init's path: at the end.
  EXPECT_EQ(index("/tmp", "tmpfs"), static_cast<int>(c["mounts"].size()) - 2);
  EXPECT_EQ(c["mounts"].back()["destination"], runtime::kInitPath);

  // An engine's tmpfs at /run is the allowWrite /var/run's place: no tmpfs of ours over it.
  json d = json::parse(R"({"process": {"args": ["/bin/app"]}, "root": {"path": "rootfs"},
    "mounts": [{"destination": "/run", "type": "tmpfs", "source": "tmpfs"}]})");
  ASSERT_TRUE(runtime::harden_config(d, in).has_value());
  for (const auto& m : d["mounts"]) EXPECT_NE(m["destination"], "/var/run");
}

}  // namespace

// A handler's cpus: a CFS quota over the engine's period, the engine's kept
// when smaller; none or unlimited (kubelet's 0, runc's -1) is the handler's.
TEST(RuntimeHarden, HandlerCpusCapTheEnginesQuota) {
  auto pol = parse(R"({"resources": {"cpus": 0.5}})");
  runtime::HardenInputs in;
  in.policy = &pol;
  in.init_source = "/usr/lib/exguardian/exguardian-init";
  auto cpu_of = [&](json engine_cpu) {
    json c = engine_config();
    if (!engine_cpu.is_null()) c["linux"]["resources"]["cpu"] = engine_cpu;
    auto notes = runtime::harden_config(c, in);
    EXPECT_TRUE(notes.has_value());
    return c["linux"]["resources"]["cpu"];
  };
  EXPECT_EQ(cpu_of(nullptr), (json{{"period", 100000}, {"quota", 50000}}));
  EXPECT_EQ(cpu_of({{"shares", 2}, {"period", 100000}}), (json{{"shares", 2}, {"period", 100000}, {"quota", 50000}}));
  EXPECT_EQ(cpu_of({{"period", 100000}, {"quota", 400000}}), (json{{"period", 100000}, {"quota", 50000}}));
  EXPECT_EQ(cpu_of({{"period", 100000}, {"quota", -1}}), (json{{"period", 100000}, {"quota", 50000}}));
  EXPECT_EQ(cpu_of({{"period", 200000}, {"quota", 30000}}), (json{{"period", 200000}, {"quota", 30000}}));
  EXPECT_EQ(runtime::cpu_quota_for(0.001, 100000), 1000);  // the kernel's floor of 1 ms
}
