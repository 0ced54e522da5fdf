// The snapshot fast path's data: the boot record the host pushes into a
// parked (or restored) guest, the template's key, where templates may be
// read from, and the qemu command line of a template and of a restore.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "microvm/guest/boot_record.hpp"
#include "microvm/snapshot.hpp"
#include "microvm/vmm.hpp"

namespace exg::microvm {
namespace {

namespace fs = std::filesystem;
using guest::BootRecord;
using guest::format_boot_record;
using guest::parse_boot_record;

const std::string kSeed(64, 'a');

TEST(MicrovmBootRecord, RoundTripsAndRefusesAnythingMalformed) {
  BootRecord r;
  r.uid = 1500;
  r.gid = 1501;
  r.hostname = "exguardian";
  r.time_sec = 1796144300;
  r.time_nsec = 123456789;
  r.seed_hex = kSeed;
  std::string line = format_boot_record(r);
  ASSERT_EQ(line.back(), '\n');
  line.pop_back();
  auto p = parse_boot_record(line);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->uid, 1500u);
  EXPECT_EQ(p->gid, 1501u);
  EXPECT_EQ(p->hostname, "exguardian");
  EXPECT_EQ(p->time_sec, 1796144300);
  EXPECT_EQ(p->time_nsec, 123456789);
  EXPECT_EQ(p->seed_hex, kSeed);
  const std::string ok_tail = " time=1.2 seed=" + kSeed;
  for (const std::string& bad : {
           std::string("exg-boot 2 uid=1 gid=1 host=h") + ok_tail,                // another version
           std::string("exg-boot 1 gid=1 host=h") + ok_tail,                      // no uid
           std::string("exg-boot 1 uid=-1 gid=1 host=h") + ok_tail,               // not a number
           std::string("exg-boot 1 uid=4294967295 gid=1 host=h") + ok_tail,       // (uid_t)-1
           std::string("exg-boot 1 uid=1 gid=1 host=a/b") + ok_tail,              // a path in the hostname
           std::string("exg-boot 1 uid=1 gid=1 host=") + ok_tail,                 // empty hostname
           std::string("exg-boot 1 uid=1 gid=1 host=h time=1 seed=") + kSeed,      // no nanoseconds
           std::string("exg-boot 1 uid=1 gid=1 host=h time=1.1000000000 seed=") + kSeed,
           std::string("exg-boot 1 uid=1 gid=1 host=h time=1.2 seed=") + kSeed.substr(2),  // short seed
           std::string("exg-boot 1 uid=1 gid=1 host=h time=1.2 seed=") + std::string(64, 'G'),
       })
    EXPECT_FALSE(parse_boot_record(bad)) << bad;
}

VmSpec spec() {
  VmSpec s;
  s.vmm = kQemuBinary;
  s.kernel = "/.exg-vm/image/vmlinux";
  s.initramfs = "/.exg-vm/image/initramfs.cpio";
  s.view_dir = "/.exg-view";
  s.channel_fd = 3;
  s.egress_fd = 4;
  s.monitor_fd = 5;
  s.memory_mib = 768;
  s.name = "exguardian-0123456789abcdef";
  return s;
}

TEST(MicrovmSnapshot, TemplateAndRestoreCommandLinesDifferOnlyInIncomingAndName) {
  VmSpec s = spec();
  auto saved = QemuMicrovm().command(s);
  s.incoming = true;
  s.name = "exguardian-fedcba9876543210";
  auto restored = QemuMicrovm().command(s);
  auto it = std::find(restored.begin(), restored.end(), "-incoming");
  ASSERT_NE(it, restored.end());
  EXPECT_EQ(*(it + 1), "defer");  // the state comes as an fd over QMP: no path, no exec
  EXPECT_NE(std::find(saved.begin(), saved.end(), "chardev=qmp,mode=control"), saved.end());
  auto strip = [](std::vector<std::string> a) {
    for (size_t i = 0; i < a.size();)
      if (a[i] == "-incoming" || a[i] == "-name") a.erase(a.begin() + i, a.begin() + i + 2);
      else ++i;
    return a;
  };
  EXPECT_EQ(strip(saved), strip(restored));
}

struct ScratchDir {
  std::string dir;
  ScratchDir() {
    char t[] = "/tmp/exg-unit-snapshot-XXXXXX";
    dir = ::mkdtemp(t);
    ::chmod(dir.c_str(), 0755);
    ::setenv("EXG_MICROVM_SNAPSHOT_DIR", dir.c_str(), 1);
  }
  ~ScratchDir() {
    ::unsetenv("EXG_MICROVM_SNAPSHOT_DIR");
    fs::remove_all(dir);
  }
};

TEST(MicrovmSnapshot, KeyFollowsTheConfigurationButNotTheVmsName) {
  ScratchDir d;
  std::ofstream(d.dir + "/vmlinux") << "kernel";
  std::ofstream(d.dir + "/initramfs.cpio") << "initramfs one";
  GuestImage img{d.dir, d.dir + "/vmlinux", d.dir + "/initramfs.cpio", "6.1"};
  VmSpec s = spec();
  auto k1 = template_key(img, QemuMicrovm().command(s));
  ASSERT_TRUE(k1);
  EXPECT_EQ(k1->size(), 64u);
  s.name = "exguardian-other";
  EXPECT_EQ(*template_key(img, QemuMicrovm().command(s)), *k1);
  s.memory_mib = 1024;  // another guest RAM size: another template
  EXPECT_NE(*template_key(img, QemuMicrovm().command(s)), *k1);
  s.memory_mib = 768;
  std::ofstream(d.dir + "/initramfs.cpio") << "initramfs two, another init";
  EXPECT_NE(*template_key(img, QemuMicrovm().command(s)), *k1);
}

TEST(MicrovmSnapshot, TemplatesAreUsedOnlyFromFilesNoOneElseCanWrite) {
  ScratchDir d;
  const std::string key(64, 'b');
  EXPECT_FALSE(find_template(key));
  const std::string path = d.dir + "/" + key + ".state";
  std::ofstream(path) << "state";
  ::chmod(path.c_str(), 0644);
  auto t = find_template(key);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->path, path);
  EXPECT_EQ(::fcntl(t->fd.get(), F_GETFL) & O_ACCMODE, O_RDONLY);  // qemu gets a read-only fd
  ::chmod(path.c_str(), 0666);  // writable by others: not used
  EXPECT_FALSE(find_template(key));
  ::chmod(path.c_str(), 0644);
  ::chmod(d.dir.c_str(), 0777);  // its directory writable by others: not used
  EXPECT_FALSE(find_template(key));
  ::chmod(d.dir.c_str(), 0755);
  fs::remove(path);
  fs::create_symlink("/etc/hostname", path);  // a link: not followed
  EXPECT_FALSE(find_template(key));
}

}  // namespace
}  // namespace exg::microvm
