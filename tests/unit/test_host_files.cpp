// escape-test's record of host files no probe may change (HostFiles): kept as the content's
// SHA-256, it still tells a change of one byte at the same size, a file created, a file removed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "evidence/catalog.hpp"
#include "temp_dir.hpp"

namespace exg::evidence {
namespace {

class HostFilesTest : public ::testing::Test {
 protected:
  void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }
  exg::test_support::TempDir tmp_{"exg_host_files"};
  const std::string& dir_ = tmp_.path();
};

TEST_F(HostFilesTest, UnchangedContentIsNotAChange) {
  write(dir_ + "/f", "hook\n");
  HostFiles files;
  files.remember(dir_ + "/f");
  write(dir_ + "/f", "hook\n");  // rewritten with the same bytes
  EXPECT_EQ(files.changed(dir_ + "/f"), "");
  EXPECT_EQ(files.any_changed(), "");
}

TEST_F(HostFilesTest, OneByteChangedAtTheSameSize) {
  write(dir_ + "/f", std::string(100000, 'a'));
  HostFiles files;
  files.remember(dir_ + "/f");
  write(dir_ + "/f", std::string(99999, 'a') + "b");
  EXPECT_EQ(files.changed(dir_ + "/f"), dir_ + "/f changed on the host");
  EXPECT_EQ(files.any_changed(), dir_ + "/f changed on the host");
}

TEST_F(HostFilesTest, CreatedAndRemoved) {
  write(dir_ + "/there", "x");
  HostFiles files;
  files.remember(dir_ + "/absent");
  files.remember(dir_ + "/there");
  write(dir_ + "/absent", "");
  EXPECT_EQ(files.changed(dir_ + "/absent"), dir_ + "/absent created on the host");
  std::filesystem::remove(dir_ + "/there");
  EXPECT_EQ(files.changed(dir_ + "/there"), dir_ + "/there removed on the host");
  EXPECT_EQ(files.changed(dir_ + "/never-remembered"), "");
}

}  // namespace
}  // namespace exg::evidence
