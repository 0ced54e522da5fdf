// What a sandbox refused, read from its audit log (sandbox/refusals.hpp): the
// summaries an agent sees, and the windows that make every refusal reported
// once (the offsets serve's GET /sandboxes/{id}/refusals hands out).
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "sandbox/refusals.hpp"

namespace exg::sandbox {
namespace {

using json = nlohmann::json;

TEST(Refusals, AuditLinesBecomeSummaries) {
  auto eg = refusal_of(json{{"event", "egress"}, {"host", "evil.example"}, {"port", 443}, {"decision", "refused"},
                            {"reason", "host is not on the allow list"}, {"rule", "default deny"}});
  ASSERT_TRUE(eg.is_object());
  EXPECT_EQ(eg["summary"], "egress to evil.example:443 refused: host is not on the allow list (rule: default deny)");
  EXPECT_TRUE(refusal_of(json{{"event", "egress"}, {"host", "ok.example"}, {"decision", "allowed"}}).is_null());
  auto sc = refusal_of(json{{"event", "syscall_refused"}, {"syscall", "ptrace"}, {"errno", 1}, {"command", "gdb"}});
  EXPECT_EQ(sc["summary"], "syscall ptrace refused (errno 1) for gdb");
  auto pl = refusal_of(json{{"event", "planted"}, {"path", "/w/.git/hooks/pre-commit"}, {"why", "a git hook"}});
  EXPECT_NE(pl["summary"].get<std::string>().find("quarantined"), std::string::npos);
  // Only a host the secret is not meant for gets "exfiltration" (issue 45); a
  // placeholder passed to its own host is no refusal.
  auto ex = refusal_of(json{{"event", "exfiltration"}, {"protocol", "connect"}, {"secret", "KEY"}, {"where", "body"},
                            {"host", "evil.example"}, {"decision", "refused"}});
  EXPECT_EQ(ex["summary"], "placeholder of secret KEY on its way to evil.example, which it is not meant for (connect, body): blocked");
  EXPECT_TRUE(refusal_of(json{{"event", "placeholder_passed"}, {"secret", "KEY"}, {"host", "api.example"}}).is_null());
}

class RefusalWindows : public ::testing::Test {
 protected:
  std::string log = ::testing::TempDir() + "exg-refusals-" + std::to_string(::getpid()) + ".jsonl";
  void TearDown() override { ::unlink(log.c_str()); }
  void append(const std::string& text) { std::ofstream(log, std::ios::app | std::ios::binary) << text; }
  static std::string refused(const std::string& host) {
    return json{{"event", "egress"}, {"host", host}, {"decision", "refused"}}.dump() + "\n";
  }
};

TEST_F(RefusalWindows, EachRefusalIsInOneWindowOnly) {
  uint64_t end = 99;
  EXPECT_TRUE(refusals_since(log, 0, &end).empty());  // no log yet
  EXPECT_EQ(end, 0u);
  append(refused("a.example") + json{{"event", "egress"}, {"host", "ok.example"}, {"decision", "allowed"}}.dump() + "\n");
  auto first = refusals_since(log, 0, &end);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0]["detail"]["host"], "a.example");
  EXPECT_EQ(end, audit_offset(log));
  append(refused("b.example"));
  auto second = refusals_since(log, end, &end);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0]["detail"]["host"], "b.example");
  EXPECT_TRUE(refusals_since(log, end, &end).empty());
}

TEST_F(RefusalWindows, ALineStillBeingWrittenWaitsForTheNextWindow) {
  std::string whole = refused("c.example");
  append(whole.substr(0, 10));  // the supervisor's write, cut in the middle
  uint64_t end = 0;
  EXPECT_TRUE(refusals_since(log, 0, &end).empty());
  EXPECT_EQ(end, 0u);  // not consumed
  append(whole.substr(10));
  auto got = refusals_since(log, end, &end);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]["detail"]["host"], "c.example");
  EXPECT_EQ(end, whole.size());
}

TEST_F(RefusalWindows, AFloodIsCountedNotListedAndTheWindowStillEndsAtTheLogsEnd) {
  std::string many;
  for (int i = 0; i < 150; ++i) many += refused("h" + std::to_string(i) + ".example");
  append(many);
  uint64_t end = 0;
  auto got = refusals_since(log, 0, &end);
  ASSERT_EQ(got.size(), 101u);
  EXPECT_EQ(got[100]["event"], "more");
  EXPECT_EQ(end, many.size());  // the next window does not list the rest of this flood again
  EXPECT_TRUE(refusals_since(log, end, &end).empty());
}

TEST_F(RefusalWindows, ALineThatIsNotJsonIsSkipped) {
  append("not json\n" + refused("d.example"));
  auto got = refusals_since(log, 0);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]["detail"]["host"], "d.example");
}

}  // namespace
}  // namespace exg::sandbox
