// The audit log's hold (a warm pool's sandbox, session --audit-hold): lines wait
// until add_tags() brings the tenant, then every one carries it; add_tags is once only.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "sandbox/audit.hpp"

namespace {

std::vector<nlohmann::json> lines_of(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  for (std::string l; std::getline(in, l);) out.push_back(nlohmann::json::parse(l));
  return out;
}

std::string temp_path() {
  char p[] = "/tmp/exg_audit_hold_XXXXXX";
  int fd = ::mkstemp(p);
  if (fd >= 0) ::close(fd);
  return p;
}

TEST(AuditHold, HeldLinesGetTheLateTagsAndKeepTheirOrder) {
  std::string path = temp_path();
  {
    auto log = exg::sandbox::AuditLog::open(path, "sb1", {{"e2b_sandbox", "abc"}});
    ASSERT_TRUE(log) << log.error().str();
    log->hold();
    log->write({{"event", "weakened"}, {"what", "first"}});
    log->write({{"event", "weakened"}, {"what", "second"}});
    EXPECT_TRUE(lines_of(path).empty()) << "a held line was written before its tenant was known";
    ASSERT_TRUE(log->add_tags({{"tenant", "acme"}}));
    log->write({{"event", "egress"}, {"host", "example.com"}});
  }
  auto lines = lines_of(path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["what"], "first");
  EXPECT_EQ(lines[1]["what"], "second");
  EXPECT_EQ(lines[2]["host"], "example.com");
  for (auto& l : lines) {
    EXPECT_EQ(l["tenant"], "acme");
    EXPECT_EQ(l["e2b_sandbox"], "abc");
    EXPECT_EQ(l["sandbox"], "sb1");
    EXPECT_TRUE(l.contains("time"));
  }
  ::unlink(path.c_str());
}

TEST(AuditHold, TagsOnceOnlyAndNeverOverAFieldOfEveryLine) {
  std::string path = temp_path();
  auto log = exg::sandbox::AuditLog::open(path, "sb2", {{"e2b_sandbox", "abc"}});
  ASSERT_TRUE(log);
  EXPECT_FALSE(log->add_tags({{"tenant", "x"}})) << "tags added to a log that was not held";
  log->hold();
  EXPECT_FALSE(log->add_tags({{"e2b_sandbox", "other"}})) << "a tag given at the start was replaced";
  EXPECT_FALSE(log->add_tags({{"sandbox", "other"}}));
  EXPECT_TRUE(log->holding()) << "a refused add_tags released the held lines";
  EXPECT_TRUE(log->add_tags({{"tenant", "acme"}}));
  EXPECT_FALSE(log->add_tags({{"tenant", "evil"}})) << "the tenant was changed a second time";
  log->write({{"event", "x"}});
  auto lines = lines_of(path);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["tenant"], "acme");
  ::unlink(path.c_str());
}

TEST(AuditHold, LinesStillHeldAtTheEndAreWrittenNotLost) {
  std::string path = temp_path();
  {
    auto log = exg::sandbox::AuditLog::open(path, "sb3");
    ASSERT_TRUE(log);
    log->hold();
    log->write({{"event", "weakened"}});
  }
  auto lines = lines_of(path);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_FALSE(lines[0].contains("tenant"));
  ::unlink(path.c_str());
}

TEST(AuditHold, WritesFromAnotherThreadWhileTaggingLoseNoLine) {
  // The proxy's thread writes while the supervisor's adds the tags.
  std::string path = temp_path();
  {
    auto log = exg::sandbox::AuditLog::open(path, "sb4");
    ASSERT_TRUE(log);
    log->hold();
    std::thread t([&] {
      for (int i = 0; i < 200; ++i) log->write({{"event", "egress"}, {"n", i}});
    });
    ASSERT_TRUE(log->add_tags({{"tenant", "acme"}}));
    t.join();
  }
  auto lines = lines_of(path);
  ASSERT_EQ(lines.size(), 200u);
  for (auto& l : lines) EXPECT_EQ(l["tenant"], "acme");
}

}  // namespace
