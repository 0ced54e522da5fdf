// The snapshot fast path's data: the boot record the host pushes into a
// parked (or restored) guest, the template's key, where templates may be
// read from, and the qemu command line of a template and of a restore.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "microvm/guest/boot_record.hpp"
#include "microvm/host_probe.hpp"
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

// The bound on the template directory: the least recently used go first until the rest fit,
// the one just saved stays, and saves that never finished go once they are old.
TEST(MicrovmTemplateCache, PruningRemovesTheLeastRecentlyUsedUntilTheRestFit) {
  constexpr uint64_t MB = 1 << 20;
  const int64_t now = 1'800'000'000;
  auto key = [](char c) { return std::string(64, c) + ".state"; };
  std::vector<CachedTemplate> files = {
      {key('a'), 80 * MB, now - 3000, false},  // used longest ago
      {key('b'), 80 * MB, now - 10, false},    // used a moment ago
      {key('c'), 80 * MB, now - 2000, false},
      {key('d'), 80 * MB, now, false},         // just saved
  };
  // 320 MB in 200: a and c go (the two least recently used), b and d stay.
  auto gone = templates_to_prune(files, 200 * MB, key('d'), now);
  std::sort(gone.begin(), gone.end());
  EXPECT_EQ(gone, (std::vector<std::string>{key('a'), key('c')}));
  EXPECT_TRUE(templates_to_prune(files, 320 * MB, key('d'), now).empty());  // they fit: nothing goes
  // A bound below the new template alone: everything else goes, never the one just saved.
  gone = templates_to_prune(files, 1 * MB, key('d'), now);
  EXPECT_EQ(gone.size(), 3u);
  EXPECT_EQ(std::count(gone.begin(), gone.end(), key('d')), 0);
  // A save that never finished: removed once it is older than any save takes; a young one may
  // be a save in progress in another process, and stays (its bytes still count).
  const std::string old_partial = "." + std::string(64, 'e') + ".Ab12Cd", young_partial = "." + std::string(64, 'f') + ".Xy34Zw";
  files.push_back({old_partial, 80 * MB, now - 3600, true});
  files.push_back({young_partial, 80 * MB, now - 30, true});
  gone = templates_to_prune(files, 1024 * MB, key('d'), now);
  EXPECT_EQ(gone, std::vector<std::string>{old_partial});
  gone = templates_to_prune(files, 200 * MB, key('d'), now);
  std::sort(gone.begin(), gone.end());
  // 400 MB after the old partial: a, c and b go (the young partial and d stay: 160 MB).
  EXPECT_EQ(gone, (std::vector<std::string>{old_partial, key('a'), key('b'), key('c')}));
}

TEST(MicrovmTemplateCache, PruneListsOnlyTemplatesAndRemovesThemFromTheDirectory) {
  ScratchDir d;
  auto put = [&](const std::string& name, size_t bytes, int64_t age_sec) {
    std::ofstream(d.dir + "/" + name) << std::string(bytes, 's');
    ::chmod((d.dir + "/" + name).c_str(), 0644);
    timespec t[2] = {{::time(nullptr) - age_sec, 0}, {::time(nullptr) - age_sec, 0}};
    ::utimensat(AT_FDCWD, (d.dir + "/" + name).c_str(), t, 0);
  };
  const std::string a = std::string(64, 'a') + ".state", b = std::string(64, 'b') + ".state",
                    c = std::string(64, 'c') + ".state", partial = "." + std::string(64, 'd') + ".Qw12Er";
  put(a, 3000, 5000);
  put(b, 3000, 100);
  put(c, 3000, 0);
  put(partial, 500, 4000);
  put("kvm-proof", 10, 9000);            // the KVM proof shares the directory: never a template
  put("notes.state", 10, 9000);          // not a key
  fs::create_directory(d.dir + "/" + std::string(64, 'e') + ".state");  // not a regular file
  auto listed = list_templates(d.dir);
  EXPECT_EQ(listed.size(), 4u);
  auto removed = prune_templates(d.dir, 6000, c);
  std::sort(removed.begin(), removed.end());
  EXPECT_EQ(removed, (std::vector<std::string>{partial, a}));
  for (const auto& gone : {a, partial}) EXPECT_FALSE(fs::exists(d.dir + "/" + gone)) << gone;
  for (const auto& kept : {b, c, std::string("kvm-proof"), std::string("notes.state")})
    EXPECT_TRUE(fs::exists(d.dir + "/" + kept)) << kept;
  // Using a template makes it the most recently used: now b is the one that goes.
  put(b, 3000, 100);
  put(c, 3000, 50);
  ASSERT_TRUE(find_template(std::string(64, 'b')));
  EXPECT_EQ(prune_templates(d.dir, 3000, ""), std::vector<std::string>{c});
}

TEST(MicrovmTemplateCache, TheBoundComesFromTheEnvironmentAndABadOneIsAnError) {
  ::unsetenv("EXG_MICROVM_SNAPSHOT_MAX");
  EXPECT_EQ(*template_cache_limit(), kDefaultTemplateCacheBytes);
  ::setenv("EXG_MICROVM_SNAPSHOT_MAX", "300M", 1);
  EXPECT_EQ(*template_cache_limit(), 300ull << 20);
  ::setenv("EXG_MICROVM_SNAPSHOT_MAX", "lots", 1);
  auto bad = template_cache_limit();
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().str().find("EXG_MICROVM_SNAPSHOT_MAX=lots"), std::string::npos) << bad.error().str();
  ::unsetenv("EXG_MICROVM_SNAPSHOT_MAX");
}

// doctor's line: where the templates are, how many, how big, and the bound.
TEST(MicrovmTemplateCache, DoctorSaysWhereHowManyHowBigAndTheBound) {
  ScratchDir d;
  for (char k : {'a', 'b'}) std::ofstream(d.dir + "/" + std::string(64, k) + ".state") << std::string(3 << 20, 's');
  ::setenv("EXG_MICROVM_SNAPSHOT_MAX", "500M", 1);
  auto c = exg::microvm::template_cache_capability();
  EXPECT_EQ(c.name, "microvm templates");
  EXPECT_TRUE(c.ok);
  EXPECT_TRUE(c.detail.starts_with(d.dir + ": 2 templates, 6 MiB of at most 500 MiB")) << c.detail;
  ::setenv("EXG_MICROVM_SNAPSHOT_MAX", "12Q", 1);
  c = exg::microvm::template_cache_capability();
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.detail.find("EXG_MICROVM_SNAPSHOT_MAX=12Q"), std::string::npos) << c.detail;
  ::unsetenv("EXG_MICROVM_SNAPSHOT_MAX");
}

}  // namespace
}  // namespace exg::microvm
