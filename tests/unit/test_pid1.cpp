// The sandbox's pid-1 program: the embedded bytes are a static executable
// (it must run on any --rootfs, with no libc there), and an installed copy is
// used only when it is exactly those bytes and nobody else can change it.
#include <gtest/gtest.h>

#include "temp_dir.hpp"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "pid1/image.hpp"
#include "pid1/provide.hpp"

using namespace exg::pid1;

namespace {

using exg::test_support::TempDir;

void write_file(const std::string& path, const void* data, size_t n, mode_t mode) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary).write(static_cast<const char*>(data), static_cast<std::streamsize>(n));
  ASSERT_EQ(::chmod(path.c_str(), mode), 0);
}

std::vector<unsigned char> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// An installed layout in DIR: DIR/bin is where exguardian would be.
std::string installed_path(const TempDir& t) { return t.path() + "/bin/" + std::string(installed_relpath()); }

}  // namespace

TEST(Pid1, EmbeddedIsAStaticX86Executable) {
  auto img = embedded();
  ASSERT_GT(img.size(), sizeof(Elf64_Ehdr));
  Elf64_Ehdr eh;
  std::memcpy(&eh, img.data(), sizeof eh);
  ASSERT_EQ(std::memcmp(eh.e_ident, ELFMAG, SELFMAG), 0);
  EXPECT_EQ(eh.e_ident[EI_CLASS], ELFCLASS64);
  EXPECT_TRUE(eh.e_type == ET_EXEC || eh.e_type == ET_DYN);
  ASSERT_LE(eh.e_phoff + static_cast<size_t>(eh.e_phnum) * sizeof(Elf64_Phdr), img.size());
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, img.data() + eh.e_phoff + static_cast<size_t>(i) * sizeof ph, sizeof ph);
    EXPECT_NE(ph.p_type, static_cast<Elf64_Word>(PT_INTERP)) << "the pid-1 program asks for a dynamic loader";
    EXPECT_NE(ph.p_type, static_cast<Elf64_Word>(PT_DYNAMIC)) << "the pid-1 program has dynamic sections";
  }
}

TEST(Pid1, InstalledRelativeToTheBinaryDir) {
  EXPECT_EQ(installed_relpath(), "../lib/exguardian/" + std::string(name()));
}

TEST(Pid1, InstalledCopyWithTheSameBytesIsUsed) {
  TempDir t;
  auto img = embedded();
  write_file(installed_path(t), img.data(), img.size(), 0755);
  auto found = installed_copy(t.path() + "/bin");
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(*found, installed_path(t));
}

TEST(Pid1, StaleOrForeignInstalledCopyIsNotUsed) {
  TempDir t;
  auto img = embedded();
  std::vector<unsigned char> other(img.begin(), img.end());
  other[other.size() / 2] ^= 0x5a;  // one byte of another build
  write_file(installed_path(t), other.data(), other.size(), 0755);
  EXPECT_FALSE(installed_copy(t.path() + "/bin").has_value());
  write_file(installed_path(t), img.data(), img.size() - 1, 0755);  // shorter
  EXPECT_FALSE(installed_copy(t.path() + "/bin").has_value());
}

TEST(Pid1, InstalledCopyOthersCouldChangeIsNotUsed) {
  TempDir t;
  auto img = embedded();
  write_file(installed_path(t), img.data(), img.size(), 0775);  // group-writable
  EXPECT_FALSE(installed_copy(t.path() + "/bin").has_value());
  ASSERT_EQ(::chmod(installed_path(t).c_str(), 0757), 0);  // world-writable
  EXPECT_FALSE(installed_copy(t.path() + "/bin").has_value());
  ASSERT_EQ(::chmod(installed_path(t).c_str(), 0644), 0);  // not executable
  EXPECT_FALSE(installed_copy(t.path() + "/bin").has_value());
}

TEST(Pid1, NoInstalledCopy) {
  TempDir t;
  EXPECT_FALSE(installed_copy(t.path() + "/bin").has_value());
  EXPECT_FALSE(installed_copy("").has_value());
  // A directory where the file should be.
  std::filesystem::create_directories(installed_path(t));
  EXPECT_FALSE(installed_copy(t.path() + "/bin").has_value());
}

TEST(Pid1, PrivateCopyIsTheEmbeddedProgram) {
  TempDir t;
  std::string p = t.path() + "/pid1";
  ASSERT_TRUE(write_private_copy(p.c_str())) << std::strerror(errno);
  auto img = embedded();
  auto got = read_file(p);
  ASSERT_EQ(got.size(), img.size());
  EXPECT_TRUE(std::equal(got.begin(), got.end(), img.begin()));
  struct stat st;
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0555u);
  // Never over an existing file (or through a planted symlink).
  EXPECT_FALSE(write_private_copy(p.c_str()));
  EXPECT_EQ(errno, EEXIST);
  std::string link = t.path() + "/link";
  ASSERT_EQ(::symlink((t.path() + "/elsewhere").c_str(), link.c_str()), 0);
  EXPECT_FALSE(write_private_copy(link.c_str()));
  EXPECT_FALSE(std::filesystem::exists(t.path() + "/elsewhere"));
}
