// The cgroups exguardian runtime records for a container at create and makes
// sure of at delete (runtime/container_cgroups.hpp): which are the container's
// (never the caller's own or an ancestor), where the mounts show them, and a
// removal deepest first that names what stays.
#include <gtest/gtest.h>

#include "temp_dir.hpp"
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "runtime/container_cgroups.hpp"

namespace {

using exg::runtime::container_cgroup_dirs;
using exg::runtime::remove_container_cgroups;
using Dirs = std::vector<std::string>;

// A hybrid host as Debian's: v1 controllers, cpu and cpuacct co-mounted (and
// mounted twice), an empty v2 hierarchy.
const char* kHybridMounts =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
    "33 31 0:29 / /mnt/again rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

TEST(ContainerCgroups, TheContainersOwnInEveryHierarchy) {
  auto dirs = container_cgroup_dirs("4:memory:/c1\n3:cpu,cpuacct:/c1\n1:name=systemd:/c1\n0::/\n",
                                    "4:memory:/agent/x\n3:cpu,cpuacct:/\n1:name=systemd:/\n0::/\n", kHybridMounts);
  // One directory for the hierarchy mounted twice; none in v2, where the
  // runtime left the container in the root (ours too).
  EXPECT_EQ(dirs, (Dirs{"/sys/fs/cgroup/memory/c1", "/sys/fs/cgroup/cpu,cpuacct/c1", "/sys/fs/cgroup/systemd/c1"}));
}

TEST(ContainerCgroups, NeverTheCallersOwnOrAnAncestorOfIt) {
  // A rootless runtime that made no cgroup: the container is in ours; nested
  // below an engine's: the engine's cgroup (an ancestor of ours) is not the container's.
  auto dirs = container_cgroup_dirs("4:memory:/user.slice/me\n3:cpu,cpuacct:/user.slice\n1:name=systemd:/pod/c2\n",
                                    "4:memory:/user.slice/me\n3:cpu,cpuacct:/user.slice/me/shim\n1:name=systemd:/pod\n",
                                    kHybridMounts);
  EXPECT_EQ(dirs, (Dirs{"/sys/fs/cgroup/systemd/pod/c2"}));
  // A hierarchy of the container's that is not ours (another namespace's
  // numbering): not known to be the container's alone, left alone.
  EXPECT_TRUE(container_cgroup_dirs("9:pids:/c3\n", "4:memory:/\n", kHybridMounts).empty());
}

TEST(ContainerCgroups, PureV2AndAMountOfASubtree) {
  const char* v2 = "30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n";
  EXPECT_EQ(container_cgroup_dirs("0::/system.slice/crun-c4.scope\n", "0::/user.slice/u/session\n", v2),
            (Dirs{"/sys/fs/cgroup/system.slice/crun-c4.scope"}));
  // A mount of /kubepods only: what is under it maps below the mount point,
  // what is not (or climbs out with "..") is nowhere here.
  const char* sub = "30 23 0:26 /kubepods /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
  EXPECT_EQ(container_cgroup_dirs("0::/kubepods/pod1/c5\n", "0::/agent\n", sub), (Dirs{"/sys/fs/cgroup/pod1/c5"}));
  EXPECT_TRUE(container_cgroup_dirs("0::/other/c5\n", "0::/agent\n", sub).empty());
  EXPECT_TRUE(container_cgroup_dirs("0::/../../c5\n", "0::/agent\n", v2).empty());
  EXPECT_TRUE(container_cgroup_dirs("", "0::/agent\n", v2).empty());
}

class ContainerCgroupsRemoval : public ::testing::Test {
 protected:
  exg::test_support::TempDir dir_{"exg-cgroups"};
  const std::string& root_ = dir_.path();
};

// (Plain directories stand for cgroups: no cgroup.procs, no process inside.)
TEST_F(ContainerCgroupsRemoval, DeepestFirstAndGoneIsFine) {
  std::filesystem::create_directories(root_ + "/memory/c1/sub/deeper");
  std::filesystem::create_directories(root_ + "/pids/c1");
  EXPECT_TRUE(remove_container_cgroups({root_ + "/memory/c1", root_ + "/pids/c1", root_ + "/gone/c1"}, false));
  EXPECT_FALSE(std::filesystem::exists(root_ + "/memory/c1"));
  EXPECT_FALSE(std::filesystem::exists(root_ + "/pids/c1"));
  EXPECT_TRUE(std::filesystem::exists(root_ + "/memory"));  // the hierarchy's own: not the container's
  EXPECT_TRUE(remove_container_cgroups({}, true));
}

TEST_F(ContainerCgroupsRemoval, ACgroupThatStaysIsAnErrorNamingIt) {
  std::filesystem::create_directories(root_ + "/memory/c1");
  std::filesystem::create_directories(root_ + "/pids/c1");
  std::ofstream(root_ + "/memory/c1/not-a-cgroup-file") << "x";
  auto r = remove_container_cgroups({root_ + "/memory/c1", root_ + "/pids/c1"}, true);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().str().find(root_ + "/memory/c1"), std::string::npos) << r.error().str();
  EXPECT_FALSE(std::filesystem::exists(root_ + "/pids/c1"));  // the others still went
}

}  // namespace
