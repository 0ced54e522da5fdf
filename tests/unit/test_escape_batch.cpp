// Many escape-test probes in one sandbox: the script runs each as its own process between
// markers, and the output is read back into one slice per probe (its output, its status).
// A probe without an end marker is not credited with anything of its neighbours'; the
// userland batch holds only probes whose judgement a shared sandbox cannot change.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "evidence/batch.hpp"
#include "evidence/catalog.hpp"

namespace exg::evidence {
namespace {

// Runs a script with sh, stdin /dev/null, stderr on stdout (as the sandbox runs a batch).
std::string run_sh(const std::string& script, int& status) {
  std::string path = ::testing::TempDir() + "/exg-batch-test.sh";
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs(script.c_str(), f);
  std::fclose(f);
  FILE* p = ::popen(("sh " + path + " </dev/null 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = ::pclose(p);
  status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

TEST(EscapeBatch, EachProbeGetsItsOwnOutputAndStatus) {
  std::vector<BatchProbe> ps = {
      {"echo one; echo err >&2; exit 3", false},
      {"printf 'no newline'", false},
      {"echo \"it's quoted\"; false", false},
      {"cat; echo stdin-closed", false},          // stdin is /dev/null, as alone
      {"exit 0", false},
      {"echo \"$0\" | grep -c sh", false},         // its own sh -c
      {"kill -9 $$", false},                       // killed: 128+9 as a shell reports it
      {"echo last", false},
      {"echo 1", false}, {"echo 10-ish", false}, {"echo ten", false},  // exgp-1 vs exgp-10
  };
  int st = -1;
  std::string out = run_sh(batch_script(ps), st);
  EXPECT_EQ(st, 0) << out;
  auto s = split_batch_output(out, ps.size());
  ASSERT_EQ(s.size(), ps.size());
  for (auto& x : s) EXPECT_TRUE(x.ended && x.begun);
  EXPECT_EQ(s[0].out, "one\nerr\n");
  EXPECT_EQ(s[0].status, 3);
  EXPECT_EQ(s[1].out, "no newline");
  EXPECT_EQ(s[1].status, 0);
  EXPECT_EQ(s[2].out, "it's quoted\n");
  EXPECT_EQ(s[2].status, 1);
  EXPECT_EQ(s[3].out, "stdin-closed\n");
  EXPECT_EQ(s[4].out, "");
  EXPECT_EQ(s[5].out, "1\n");
  EXPECT_EQ(s[6].status, 137);
  EXPECT_EQ(s[7].out, "last\n");
  EXPECT_EQ(s[8].out, "1\n");
  EXPECT_EQ(s[10].out, "ten\n");
}

TEST(EscapeBatch, TaggedProbesGetTheirTagAsAnArgument) {
  auto script = batch_script({{"/run/exguardian/exguardian probe bpf", true}, {"echo x", false}});
  EXPECT_NE(script.find("/run/exguardian/exguardian probe bpf --tag exgp-0 </dev/null 2>&1"), std::string::npos) << script;
  EXPECT_NE(script.find("sh -c 'echo x' </dev/null 2>&1"), std::string::npos) << script;
  EXPECT_EQ(batch_tag(119), "exgp-119");
  EXPECT_LE(batch_tag(999999).size(), 15u);  // a process name
}

TEST(EscapeBatch, AProbeThatNeverEndedIsNotGivenANeighboursOutcome) {
  // The sandbox died in the second probe: the first is whole, the second has only its own
  // beginning, the third never began.
  std::vector<BatchProbe> ps = {{"echo a", false}, {"echo b; kill -9 $PPID", false}, {"echo c", false}};
  int st = -1;
  std::string out = run_sh(batch_script(ps), st);
  auto s = split_batch_output(out, ps.size());
  EXPECT_TRUE(s[0].ended);
  EXPECT_EQ(s[0].out, "a\n");
  EXPECT_TRUE(s[1].begun);
  EXPECT_FALSE(s[1].ended);
  EXPECT_EQ(s[1].out.find("c\n"), std::string::npos);
  EXPECT_FALSE(s[2].begun);
  EXPECT_FALSE(s[2].ended);
}

TEST(EscapeBatch, AForgedOrTruncatedEndMarkerIsNotAnEnd) {
  std::string out = "\n@@exg-probe-begin exgp-0@@\nx\n@@exg-probe-end exgp-0 ";  // cut before the status
  auto s = split_batch_output(out, 1);
  EXPECT_TRUE(s[0].begun);
  EXPECT_FALSE(s[0].ended);
  s = split_batch_output("no markers at all\n", 2);
  EXPECT_FALSE(s[0].begun || s[1].begun);
}

TEST(EscapeBatch, OnlyProbesAShareCannotChangeAreBatched) {
  Context c;
  c.layer = "process";
  c.tools = {{"curl", true}, {"python3", true}, {"bash", true}, {"git", true}, {"gcc", true}};
  c.host_socket = "/tmp/x.sock";
  auto v = build_catalog(c);
  int userland = 0;
  for (const auto& p : v) {
    if (p.batch.empty()) continue;
    EXPECT_TRUE(p.run_args.empty()) << p.id;
    EXPECT_FALSE(p.needs_world) << p.id;
    EXPECT_FALSE(p.destructive) << p.id;
    EXPECT_NE(p.id, "sandbox-in-place");
    EXPECT_EQ(p.tag_arg, p.batch == "kernel") << p.id;
    userland += p.batch == "userland";
  }
  EXPECT_GE(userland, 20);
  // Their commands write the canaries and hooks every judge_secret / judge_unchanged looks at:
  // in a shared sandbox a neighbour would be blamed for their change.
  for (const char* id : {"seed-git-hook", "persist-hookspath", "persist-git-config-append", "persist-home-bashrc",
                         "fd-leak", "stdio-reopen", "persist-background-process", "persist-workspace-bashrc", "persist-envrc",
                         "persist-vscode-tasks", "persist-mcp-json", "persist-policy-file", "planted-config-worktree", "seed-curl-metadata",
                         "limit-pids", "setid-file-left", "move-parent-of-credentials"}) {
    auto it = std::find_if(v.begin(), v.end(), [&](const ProbeSpec& p) { return p.id == id; });
    ASSERT_NE(it, v.end()) << id;
    EXPECT_TRUE(it->batch.empty()) << id;
  }
  // On the microVM layer sandbox-status has its own run arg (-v): never batched there.
  c.layer = "microvm";
  for (const auto& p : build_catalog(c)) {
    if (p.id == "sandbox-status") {
      EXPECT_FALSE(p.run_args.empty());
      EXPECT_TRUE(p.batch.empty());
    }
  }
}

}  // namespace
}  // namespace exg::evidence
