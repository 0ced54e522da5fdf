// The one mountinfo reader and the one /proc/self/cgroup reader (util/):
// fields, optional fields, escapes, malformed lines; and this process's own
// files read for real (the kernel's format, not ours).
#include <gtest/gtest.h>

#include <algorithm>

#include "util/mountinfo.hpp"
#include "util/proc_cgroup.hpp"

using namespace exg::util;

TEST(MountInfo, FieldsWithAndWithoutOptionalFields) {
  auto m = parse_mountinfo(
      "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 shared:7 - ext3 /dev/root rw,errors=continue\n"
      "40 31 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,nsdelegate\n"
      "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n");
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].id, 36);
  EXPECT_EQ(m[0].parent, 35);
  EXPECT_EQ(m[0].dev, "98:0");
  EXPECT_EQ(m[0].root, "/mnt1");
  EXPECT_EQ(m[0].mount_point, "/mnt2");
  EXPECT_EQ(m[0].options, "rw,noatime");
  EXPECT_EQ(m[0].fstype, "ext3");
  EXPECT_EQ(m[0].source, "/dev/root");
  EXPECT_EQ(m[0].super_options, "rw,errors=continue");
  EXPECT_EQ(m[1].fstype, "cgroup2");
  EXPECT_EQ(m[1].mount_point, "/sys/fs/cgroup/unified");
  EXPECT_EQ(m[2].super_options, "rw,memory");
}

TEST(MountInfo, Escapes) {
  auto m = parse_mountinfo("50 23 0:40 /a\\040b /mnt/with\\040space\\011tab\\134 rw - tmpfs my\\040src rw\n");
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].root, "/a b");
  EXPECT_EQ(m[0].mount_point, "/mnt/with space\ttab\\");
  EXPECT_EQ(m[0].source, "my src");
  EXPECT_EQ(unescape_mountinfo("\\0"), "\\0");         // too short: kept
  EXPECT_EQ(unescape_mountinfo("a\\9xyz"), "a\\9xyz");  // not octal: kept
  EXPECT_EQ(unescape_mountinfo("\\012"), "\n");
}

TEST(MountInfo, MalformedLinesAreSkipped) {
  auto m = parse_mountinfo(
      "\n"
      "garbage\n"
      "1 2 3 4 5\n"                          // too few fields
      "1 2 0:1 / /x rw shared:1\n"            // no separator
      "1 2 0:1 / /y rw - \n"                  // nothing after it
      "7 1 0:2 / /ok rw - proc proc\n");      // no super options: still a mount
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0].mount_point, "/ok");
  EXPECT_EQ(m[0].fstype, "proc");
  EXPECT_EQ(m[0].super_options, "");
  EXPECT_TRUE(parse_mountinfo("").empty());
}

TEST(MountInfo, ThisProcessHasARootAndProc) {
  auto m = read_mountinfo();
  ASSERT_FALSE(m.empty());
  EXPECT_TRUE(std::any_of(m.begin(), m.end(), [](const MountInfo& e) { return e.mount_point == "/"; }));
  EXPECT_TRUE(std::any_of(m.begin(), m.end(), [](const MountInfo& e) { return e.fstype == "proc"; }));
  EXPECT_TRUE(read_mountinfo("/nonexistent/mountinfo").empty());
}

TEST(ProcCgroup, HybridAndV2Lines) {
  auto c = parse_proc_cgroup("12:name=systemd:/\n8:pids:/a\n4:memory:/process_api/x\n1:cpu,cpuacct:/c\n0::/u\n");
  ASSERT_EQ(c.size(), 5u);
  EXPECT_EQ(c[0].controllers, std::vector<std::string>{"name=systemd"});
  EXPECT_EQ(c[3].controllers, (std::vector<std::string>{"cpu", "cpuacct"}));
  EXPECT_EQ(c[3].hierarchy, "1");
  EXPECT_FALSE(c[3].v2());
  EXPECT_TRUE(c[4].v2());
  EXPECT_EQ(c[4].path, "/u");
  EXPECT_EQ(cgroup_path_of(c, ""), "/u");
  EXPECT_EQ(cgroup_path_of(c, "memory"), "/process_api/x");
  EXPECT_EQ(cgroup_path_of(c, "cpuacct"), "/c");
  EXPECT_FALSE(cgroup_path_of(c, "blkio"));
  EXPECT_FALSE(cgroup_path_of(parse_proc_cgroup("4:memory:/m\n"), ""));
}

TEST(ProcCgroup, PathsMayHoldColonsAndBadLinesAreSkipped) {
  auto c = parse_proc_cgroup("no colon\none:colon\n0::/a:b:c\n");
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].path, "/a:b:c");
  EXPECT_TRUE(c[0].v2());
}

TEST(ProcCgroup, ThisProcessIsInSomeCgroup) {
  auto c = read_proc_cgroup();
  ASSERT_FALSE(c.empty());
  for (const auto& l : c) EXPECT_EQ(l.path.rfind('/', 0), 0u) << l.path;
}
