// The stdio-reopen probe's judge (issue 39): a stdin file changed on the host, an output file
// whose first line (the harness's) is gone, or that line read back into the output is an
// escape; the probe's own "stdin-is-..." line with all three intact is held.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "evidence/catalog.hpp"

namespace exg::evidence {
namespace {

struct StdioProbe : ::testing::Test {
  std::string dir;
  Context c;
  const ProbeSpec* p = nullptr;
  std::vector<ProbeSpec> v;

  void SetUp() override {
    char tmpl[] = "/tmp/exg-stdio-probe.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir = tmpl;
    c.layer = "process";
    c.stdio_dir = dir;
    c.stdin_file = dir + "/setup.sh";
    c.stdio_marker = "EXGSTDOUT-test";
    std::ofstream(c.stdin_file) << "echo setup\n";
    c.targets.remember(c.stdin_file);
    v = build_catalog(c);
    p = find_probe(v, "stdio-reopen");
    ASSERT_NE(p, nullptr);
  }
  void TearDown() override {
    ::unlink((dir + "/setup.sh").c_str());
    ::rmdir(dir.c_str());
  }
  static Outcome out(std::string text, bool kept = true) {
    Outcome o{0, false, std::move(text), {}, ""};
    o.stdio_marker_kept = kept;
    return o;
  }
};

TEST_F(StdioProbe, RunsWithItsOwnStdioAndTheDirectoryHiddenByPath) {
  EXPECT_TRUE(p->stdio_files);
  EXPECT_TRUE(p->destructive);
  EXPECT_TRUE(p->batch.empty());
  ASSERT_EQ(p->run_args.size(), 2u);
  EXPECT_EQ(p->run_args[0], "--deny-read");
  EXPECT_EQ(p->run_args[1], dir);
}

TEST_F(StdioProbe, IntactFilesHold) {
  auto j = p->judge(out("stdin-is-fifo\n"));
  EXPECT_EQ(j.verdict, Verdict::held) << j.evidence;
  EXPECT_NE(j.evidence.find("fifo"), std::string::npos) << j.evidence;
}

TEST_F(StdioProbe, EachWayThroughIsAnEscape) {
  EXPECT_EQ(p->judge(out("stdin-is-fifo\n", /*kept=*/false)).verdict, Verdict::escaped);
  EXPECT_EQ(p->judge(out("EXGSTDOUT-test\nstdin-is-regular-file\n")).verdict, Verdict::escaped);
  std::ofstream(c.stdin_file, std::ios::app) << "pwned\n";
  auto j = p->judge(out("stdin-is-fifo\n"));
  EXPECT_EQ(j.verdict, Verdict::escaped);
  EXPECT_NE(j.evidence.find("setup.sh changed"), std::string::npos) << j.evidence;
}

TEST_F(StdioProbe, AProbeThatDidNotFinishFails) {
  EXPECT_EQ(p->judge(out("sh: 1: cannot create /dev/stdin\n")).verdict, Verdict::failed);
}

}  // namespace
}  // namespace exg::evidence
