// The exit-time set-id check of writable trees: files the run changed lose
// their set-id bits, files set-id before the run are left alone.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <climits>
#include <filesystem>
#include <fstream>

#include "sandbox/setid_sweep.hpp"

namespace exg::sandbox {
namespace {

namespace fs = std::filesystem;

mode_t mode_of(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0 ? st.st_mode & 07777 : 0;
}
void put(const std::string& p, mode_t m) {
  fs::create_directories(fs::path(p).parent_path());
  std::ofstream(p) << "x";
  ::chmod(p.c_str(), m);
}

TEST(SetIdSweep, RemovesBitsOfFilesChangedInTheRunOnly) {
  char t[] = "/tmp/exg_setid_XXXXXX";
  std::string root = ::mkdtemp(t);
  put(root + "/host-suid", 04755);
  // The run starts in a later clock tick than the host's own set-id file.
  struct stat st;
  ::lstat((root + "/host-suid").c_str(), &st);
  int64_t host_ctime = st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec;
  int64_t since;
  while ((since = setid_sweep_start()) <= host_ctime) ::usleep(1000);
  put(root + "/new-suid", 04755);
  put(root + "/a/b/c/new-sgid", 02711);
  put(root + "/plain", 0755);
  put(root + "/locked/inner-suid", 04700);
  ::chmod((root + "/locked").c_str(), 0);
  fs::create_symlink("/usr/bin", root + "/link");  // never followed
  put(root + "/one-file", 06755);

  SetIdSweep sw;
  sweep_setid(root, since, sw);
  EXPECT_TRUE(sw.errors.empty()) << sw.errors.front();
  EXPECT_EQ(mode_of(root + "/host-suid"), 04755u);
  EXPECT_EQ(mode_of(root + "/new-suid"), 0755u);
  EXPECT_EQ(mode_of(root + "/a/b/c/new-sgid"), 0711u);
  EXPECT_EQ(mode_of(root + "/plain"), 0755u);
  EXPECT_EQ(mode_of(root + "/locked/inner-suid"), 0700u);
  EXPECT_EQ(mode_of(root + "/locked"), 0u);  // its mode put back
  EXPECT_EQ(sw.found.size(), 4u);
  for (const auto& f : sw.found) EXPECT_TRUE(f.removed) << f.path;

  SetIdSweep one;  // a single file (allowWrite of a file)
  ::chmod((root + "/one-file").c_str(), 06755);
  sweep_setid(root + "/one-file", since, one);
  ASSERT_EQ(one.found.size(), 1u);
  EXPECT_EQ(mode_of(root + "/one-file"), 0755u);
  ::chmod((root + "/locked").c_str(), 0700);
  fs::remove_all(root);
}

// A tree big enough for the walk to take more threads and to overflow its
// queue (600 directories in one): every new set-id file is found once, none of
// the host's own is touched, each file is counted once, and a locked directory
// deep inside gets its mode back.
TEST(SetIdSweep, BigTreeWalkedByThreadsFindsEachFileOnce) {
  char t[] = "/tmp/exg_setid_big_XXXXXX";
  std::string root = ::mkdtemp(t);
  put(root + "/host/old-suid", 04755);
  struct stat st;
  ::lstat((root + "/host/old-suid").c_str(), &st);
  int64_t host_ctime = st.st_ctim.tv_sec * 1000000000LL + st.st_ctim.tv_nsec;
  int64_t since;
  while ((since = setid_sweep_start()) <= host_ctime) ::usleep(1000);
  size_t files = 1, expected_found = 0;
  for (int a = 0; a < 600; ++a) {
    std::string d = root + "/wide/d" + std::to_string(a);
    put(d + "/plain", 0644);
    ++files;
    if (a % 50 == 0) {
      put(d + "/deep/er/new-suid", 04755);
      ++files;
      ++expected_found;
    }
  }
  for (int a = 0; a < 40; ++a)
    for (int b = 0; b < 10; ++b) {
      put(root + "/tall/" + std::to_string(a) + "/" + std::to_string(b) + "/f", 0600);
      ++files;
    }
  put(root + "/tall/7/3/locked/inner-sgid", 02750);
  ++files;
  ++expected_found;
  ::chmod((root + "/tall/7/3/locked").c_str(), 0);

  SetIdSweep sw;
  sweep_setid(root, since, sw);
  EXPECT_TRUE(sw.errors.empty()) << sw.errors.front();
  EXPECT_EQ(sw.files_checked, files);
  ASSERT_EQ(sw.found.size(), expected_found);
  for (size_t k = 1; k < sw.found.size(); ++k) EXPECT_LT(sw.found[k - 1].path, sw.found[k].path);  // sorted, once each
  for (const auto& f : sw.found) EXPECT_TRUE(f.removed) << f.path;
  EXPECT_EQ(mode_of(root + "/wide/d550/deep/er/new-suid"), 0755u);
  EXPECT_EQ(mode_of(root + "/host/old-suid"), 04755u);
  EXPECT_EQ(mode_of(root + "/tall/7/3/locked"), 0u);
  ::chmod((root + "/tall/7/3/locked").c_str(), 0700);
  EXPECT_EQ(mode_of(root + "/tall/7/3/locked/inner-sgid"), 0750u);
  fs::remove_all(root);
}

}  // namespace
}  // namespace exg::sandbox
