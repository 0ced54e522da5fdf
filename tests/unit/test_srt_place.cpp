// srt's settings read with srt's meaning (issue 40): which files are srt's
// (is_srt_settings), and what relative paths in them are relative to.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "policy/policy.hpp"
#include "policy/srt_settings.hpp"
#include "temp_dir.hpp"

namespace exg {
namespace {

using policy::is_srt_settings;
using policy::RelativeTo;

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(SrtShape, SrtsOwnFilesAreSrts) {
  // srt's README example, and the fixture holding every key srt 0.0.83 accepts.
  EXPECT_TRUE(is_srt_settings(R"({"network": {"allowedDomains": ["github.com"], "deniedDomains": []},
      "filesystem": {"denyRead": ["~/.ssh"], "allowWrite": [".", "/tmp"], "denyWrite": [".env"]}})"));
  EXPECT_TRUE(is_srt_settings(read_all(std::string(EXG_SOURCE_DIR) + "/tests/data/srt-0.0.83-settings.json")));
  EXPECT_TRUE(is_srt_settings("{}"));
  EXPECT_TRUE(is_srt_settings(R"({"$schema": "x", "filesystem": {"allowWrite": ["."]}})"));
  // Values that are maps of the user's own names are data, not keys.
  EXPECT_TRUE(is_srt_settings(R"({"network": {"deniedDomainReasons": {"*:22": "no ssh"}},
      "ignoreViolations": {"git push": ["/usr/bin/nc"]}})"));
}

TEST(SrtShape, AnExGuardianKeyMakesItExGuardians) {
  EXPECT_FALSE(is_srt_settings(R"({"filesystem": {"allowWrite": ["."]}, "resources": {"pids": 10}})"));
  EXPECT_FALSE(is_srt_settings(R"({"network": {"allowedCidrs": ["10.0.0.0/8"]}})"));
  EXPECT_FALSE(is_srt_settings(R"({"network": {"parentProxy": {"http": "http://p:1", "caFile": "/c.pem"}}})"));
  EXPECT_FALSE(is_srt_settings(R"({"filesystem": {"protect": ["x"]}})"));
  EXPECT_FALSE(is_srt_settings(R"({"credentials": {"envVars": [{"name": "T", "hosts": []}]}})"));
  EXPECT_FALSE(is_srt_settings("[]"));
  EXPECT_FALSE(is_srt_settings("{ not json"));
}

class SrtPlace : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& text) {
    std::string p = dir_.path() + "/" + name;
    std::ofstream(p) << text;
    return p;
  }
  test_support::TempDir dir_{"exg-srt-place"};
  const std::string cwd_ = "/work/somewhere";
};

TEST_F(SrtPlace, SrtFileByShapeIsRelativeToTheWorkingDirectory) {
  auto path = write("srt.json", R"({"filesystem": {"allowWrite": ["."], "denyWrite": [".env"]}})");
  auto p = policy::load_policy_file(path, RelativeTo::ByShape, cwd_);
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_EQ(p->filesystem.allow_write.size(), 1u);
  EXPECT_EQ(p->filesystem.allow_write[0].base_dir, cwd_);
  EXPECT_EQ(p->filesystem.deny_write[0].base_dir, cwd_);
  ASSERT_FALSE(p->notes.empty());
  EXPECT_EQ(p->notes.back(), path + ": read as srt settings: relative paths are relative to the working directory " +
                                 cwd_ + " (srt's rule)");
}

TEST_F(SrtPlace, ExGuardiansFileKeepsItsOwnRule) {
  auto path = write("own.json", R"({"filesystem": {"allowWrite": ["."]}, "resources": {"pids": 10}})");
  auto p = policy::load_policy_file(path, RelativeTo::ByShape, cwd_);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->filesystem.allow_write[0].base_dir, dir_.path());
  // ExGuardian's own places: the file's directory whatever the keys.
  auto srt_shaped = write("p.json", R"({"filesystem": {"allowWrite": ["."]}})");
  auto q = policy::load_policy_file(srt_shaped, RelativeTo::File, cwd_);
  ASSERT_TRUE(q) << q.error().message;
  EXPECT_EQ(q->filesystem.allow_write[0].base_dir, dir_.path());
}

TEST_F(SrtPlace, SrtsPlaceAndSettingsAreSrtsRuleWhateverTheKeys) {
  auto path = write("s.json", R"({"filesystem": {"allowWrite": ["."]}, "resources": {"pids": 10}})");
  auto p = policy::load_policy_file(path, RelativeTo::WorkingDirectory, cwd_);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->filesystem.allow_write[0].base_dir, cwd_);
}

}  // namespace
}  // namespace exg
