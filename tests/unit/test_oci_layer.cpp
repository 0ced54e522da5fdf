// The container/gVisor layer's pure decisions: what to do about the host's
// cgroup mounts, which gVisor platform, runsc's platform list and its cache,
// subordinate id ranges, the runtime's command line, and the read-only binds
// the runtime host makes itself.
#include <gtest/gtest.h>

#include <algorithm>

#include "oci/layer.hpp"

using namespace exg::oci;

namespace {

const char* kHybrid =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n"
    "36 31 0:33 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
    "40 31 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate\n";

const char* kPureV2 = "30 23 0:27 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw\n";

const char* kV1NamedOnly =
    "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"
    "32 31 0:29 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd\n"
    "40 31 0:37 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n";

bool has(const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); }

}  // namespace

TEST(CgroupView, HybridHidesTheEmptyV2Mount) {
  auto v = decide_cgroup_view(kHybrid);
  EXPECT_TRUE(v.hide_unified);
  EXPECT_EQ(v.unified_path, "/sys/fs/cgroup/unified");
  EXPECT_FALSE(v.pure_v2);
  EXPECT_NE(v.why.find("hybrid"), std::string::npos);
}

TEST(CgroupView, PureV2NeedsNothing) {
  auto v = decide_cgroup_view(kPureV2);
  EXPECT_TRUE(v.pure_v2);
  EXPECT_FALSE(v.hide_unified);
}

TEST(CgroupView, ANamedV1HierarchyAloneIsNotHybrid) {
  // name=systemd has no controllers: crun is not confused by it, v2 is the real one.
  auto v = decide_cgroup_view(kV1NamedOnly);
  EXPECT_FALSE(v.hide_unified);
}

TEST(CgroupView, V1OnlyAndNothing) {
  std::string v1 = "32 31 0:29 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n";
  auto a = decide_cgroup_view(v1);
  EXPECT_FALSE(a.hide_unified);
  EXPECT_FALSE(a.pure_v2);
  EXPECT_NE(a.why.find("v1 only"), std::string::npos);
  auto b = decide_cgroup_view("");
  EXPECT_FALSE(b.hide_unified);
  EXPECT_NE(b.why.find("no cgroup"), std::string::npos);
}

TEST(CgroupView, MalformedLinesAreSkipped) {
  auto v = decide_cgroup_view(std::string("garbage\n- -\n1 2 3\n") + kHybrid);
  EXPECT_TRUE(v.hide_unified);
}

TEST(GvisorPlatform, SystrapFirst) {
  std::vector<std::string> notes;
  EXPECT_EQ(pick_gvisor_platform({"ptrace", "kvm", "systrap"}, true, &notes), "systrap");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("systrap"), std::string::npos);
}

TEST(GvisorPlatform, KvmOnlyWhenTheProbeWorked) {
  EXPECT_EQ(pick_gvisor_platform({"ptrace", "kvm"}, true, nullptr), "kvm");
  std::vector<std::string> notes;
  EXPECT_EQ(pick_gvisor_platform({"ptrace", "kvm"}, false, &notes), "ptrace");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("EXGUARDIAN_GVISOR_PLATFORM=kvm"), std::string::npos);
}

TEST(GvisorPlatform, PtraceAsTheLastResort) {
  std::vector<std::string> notes;
  EXPECT_EQ(pick_gvisor_platform({}, true, &notes), "ptrace");
  EXPECT_NE(notes[0].find("last resort"), std::string::npos);
}

TEST(RunscFlags, PlatformsFromTheHelpText) {
  auto p = parse_platforms("  -platform string\n    \tspecifies which platform to use: ptrace (default), kvm. (default \"ptrace\")\n");
  EXPECT_TRUE(has(p, "ptrace"));
  EXPECT_TRUE(has(p, "kvm"));
  EXPECT_FALSE(has(p, "systrap"));
  auto q = parse_platforms("which platform to use: systrap (default), kvm, ptrace.\n-other flag mentions kvm\n");
  EXPECT_EQ(q.size(), 3u);
  EXPECT_EQ(parse_platforms("nothing here"), std::vector<std::string>{"ptrace"});
}

TEST(RunscPlatformCache, HitOnlyForTheSameBinary) {
  std::string key = "/usr/bin/runsc\t24013136\t1681030439.0\t10977364";
  std::string text = "/usr/bin/runsc\t1\t2.0\t3\tsystrap\n" + key + "\tkvm,ptrace\n";
  auto hit = parse_platform_cache(text, key);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(*hit, (std::vector<std::string>{"kvm", "ptrace"}));
  EXPECT_FALSE(parse_platform_cache(text, "/usr/bin/runsc\t9\t9.0\t9").has_value());
  EXPECT_FALSE(parse_platform_cache(text, "").has_value());
  // A prefix of the key is not the key.
  EXPECT_FALSE(parse_platform_cache(text, "/usr/bin/runsc\t24013136\t1681030439.0\t1097736").has_value());
}

TEST(RunscPlatformCache, UnknownNamesAreNotTrusted) {
  std::string key = "/x\t1\t1.0\t1";
  EXPECT_FALSE(parse_platform_cache(key + "\tptrace,--debug\n", key).has_value());
  EXPECT_FALSE(parse_platform_cache(key + "\t\n", key).has_value());
}

TEST(Subuid, ByNameOrNumber) {
  std::string text = "# comment\nalice:100000:65536\n1002:300000:65536\nbob:x:1\n";
  EXPECT_EQ(subordinate_start(text, 1001, "alice"), 100000ul);
  EXPECT_EQ(subordinate_start(text, 1002, "carol"), 300000ul);
  EXPECT_FALSE(subordinate_start(text, 1003, "bob").has_value());  // malformed
  EXPECT_FALSE(subordinate_start(text, 1004, "").has_value());
  EXPECT_FALSE(subordinate_start("dave:0:0\n", 1, "dave").has_value());
}

TEST(RuntimeArgv, PerRuntime) {
  RuntimeChoice crun{Runtime::Crun, "/usr/bin/crun", "", {}};
  auto a = runtime_argv(crun, true, "/s", "/b", "exg-1");
  EXPECT_EQ(a, (std::vector<std::string>{"/usr/bin/crun", "--root", "/s", "--cgroup-manager=disabled", "run", "--bundle",
                                         "/b", "exg-1"}));
  RuntimeChoice runc{Runtime::Runc, "/usr/sbin/runc", "", {}};
  auto b = runtime_argv(runc, false, "/s", "/b", "exg-1");
  EXPECT_EQ(b, (std::vector<std::string>{"/usr/sbin/runc", "--root", "/s", "run", "--bundle", "/b", "exg-1"}));
  RuntimeChoice runsc{Runtime::Runsc, "/usr/bin/runsc", "ptrace", {}};
  auto c = runtime_argv(runsc, true, "/s", "/b", "exg-1");
  EXPECT_TRUE(has(c, "--network=host"));
  EXPECT_TRUE(has(c, "--platform=ptrace"));
  EXPECT_FALSE(has(c, "--oci-seccomp"));  // pid 1 installs the filter (SpecOptions::seccomp_by_pid1)
  EXPECT_TRUE(has(c, "--ignore-cgroups"));
  EXPECT_TRUE(has(c, "--rootless"));
  EXPECT_EQ(std::vector<std::string>(c.end() - 4, c.end()), (std::vector<std::string>{"run", "--bundle", "/b", "exg-1"}));
  EXPECT_FALSE(has(runtime_argv(runsc, false, "/s", "/b", "x"), "--rootless"));
}

// ---- take_host_binds: which read-only binds the runtime host makes itself ----

namespace {

nlohmann::json bind(const std::string& dest, const std::string& src, std::vector<std::string> options) {
  return {{"destination", dest}, {"type", "bind"}, {"source", src}, {"options", options}};
}

nlohmann::json tmpfs(const std::string& dest) {
  return {{"destination", dest}, {"type", "tmpfs"}, {"source", "tmpfs"}, {"options", {"nosuid"}}};
}

SourceKind kind_by_name(const std::string& src) {
  if (src.ends_with(".sock") || src.starts_with("/missing")) return SourceKind::Other;
  bool file = src.find('.') != std::string::npos || src.ends_with("/hosts") || src.ends_with("/passwd");
  return file ? SourceKind::File : SourceKind::Dir;
}

std::vector<std::string> dests(const nlohmann::json& mounts) {
  std::vector<std::string> out;
  for (const auto& m : mounts) out.push_back(m["destination"]);
  return out;
}

}  // namespace

TEST(HostBinds, ReadOnlyDirsAndFilesOutsideTheRuntimesMountsGo) {
  nlohmann::json mounts = {
      tmpfs("/tmp"),
      bind("/usr", "/usr", {"rbind", "ro"}),
      bind("/etc", "/etc", {"bind", "ro"}),                     // the root's own top-level dir: whole, recursive
      bind("/etc/hosts", "/run/f/hosts", {"bind", "ro", "noexec"}),  // a file over a host-side dir
      bind("/work", "/home/u/work", {"rbind", "rw"}),           // read-write: the runtime's
      bind("/work/.git/hooks", "/home/u/work/.git/hooks", {"rbind", "ro"}),  // below a kept mount
      tmpfs("/run"),
      bind("/run/exguardian/init", "/opt/init.bin", {"bind", "ro"}),         // over the kept /run tmpfs
      bind("/opt/data", "/srv/data", {"bind", "ro"}),           // a directory, not recursive: the runtime's
      bind("/var/x.sock", "/var/x.sock", {"bind", "ro"}),       // neither a file nor a directory
      bind("/tmp/seen.txt", "/srv/seen.txt", {"bind", "ro"}),   // below the kept /tmp
  };
  auto taken = take_host_binds(mounts, "/skel", "", kind_by_name);
  ASSERT_EQ(taken.size(), 3u);
  EXPECT_EQ(taken[0].source, "/usr");
  EXPECT_EQ(taken[0].target, "/skel/usr");
  EXPECT_TRUE(taken[0].recursive);
  EXPECT_EQ(taken[1].target, "/skel/etc");
  EXPECT_TRUE(taken[1].recursive);
  EXPECT_FALSE(taken[1].noexec);
  EXPECT_EQ(taken[2].source, "/run/f/hosts");
  EXPECT_EQ(taken[2].target, "/skel/etc/hosts");  // after /etc: over it, as in the spec's order
  EXPECT_TRUE(taken[2].noexec);
  EXPECT_EQ(dests(mounts), (std::vector<std::string>{"/tmp", "/work", "/work/.git/hooks", "/run", "/run/exguardian/init",
                                                     "/opt/data", "/var/x.sock", "/tmp/seen.txt"}));
}

// A kept mount before a bind, at its path or any ancestor or descendant,
// decides: moving the bind ahead of it would put one under the other the other
// way round. A kept mount after it changes nothing (it comes last either way).
TEST(HostBinds, AnEarlierKeptMountThatOverlapsKeepsTheBindInOrder) {
  nlohmann::json mounts = {
      bind("/home/u", "/home/u", {"rbind", "rw"}),
      bind("/home/u/.npmrc", "/run/f/empty.txt", {"bind", "ro"}),  // a mask over the rw HOME: stays over it
      bind("/opt/a/b", "/srv/b.d", {"rbind", "rw"}),
      bind("/opt/a", "/srv/a", {"rbind", "ro"}),                    // an ancestor of the kept /opt/a/b
      bind("/srv", "/srv", {"rbind", "ro"}),
      tmpfs("/srv/cache"),                                          // after: the same either way
  };
  auto taken = take_host_binds(mounts, "/skel", "", kind_by_name);
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].target, "/skel/srv");
  EXPECT_EQ(dests(mounts), (std::vector<std::string>{"/home/u", "/home/u/.npmrc", "/opt/a/b", "/opt/a", "/srv/cache"}));
}

// --rootfs DIR: its own top-level directories are the root's (whole);
// missing sources and writable binds stay the runtime's, which reports them.
TEST(HostBinds, RootfsTopLevelAndMissingSources) {
  nlohmann::json mounts = {
      bind("/bin", "/r/bin", {"bind", "ro"}),
      bind("/lib", "/elsewhere/lib", {"bind", "ro"}),   // not DIR's own, not recursive: the runtime's
      bind("/etc/passwd", "/r/etc/passwd", {"bind", "ro"}),
      bind("/data", "/missing/data", {"rbind", "ro"}),
  };
  auto taken = take_host_binds(mounts, "/skel", "/r", kind_by_name);
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(taken[0].target, "/skel/bin");
  EXPECT_TRUE(taken[0].recursive);
  EXPECT_EQ(taken[1].target, "/skel/etc/passwd");
  EXPECT_FALSE(taken[1].recursive);
  EXPECT_EQ(dests(mounts), (std::vector<std::string>{"/lib", "/data"}));
}
