// The escape-test catalogue on the landlock layer: the probes run in the host's namespaces, the
// probe program at its host path; what the layer says it cannot do (docs/layers.md) comes out
// "not applicable" naming the limit, never held; an outcome no limit explains keeps its verdict.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "evidence/catalog.hpp"

namespace exg::evidence {
namespace {

Context landlock_context() {
  Context c;
  c.layer = "landlock";
  c.exe = "/opt/exg bin/exguardian";
  c.ws = "/nonexistent/ws";
  c.home = "/nonexistent/home";
  c.tools = {{"curl", true}, {"python3", true}, {"bash", true}, {"git", true}, {"gcc", true}};
  return c;
}

bool not_applicable(const Judgement& j, const std::string& words) {
  return j.verdict == Verdict::skipped && j.evidence.starts_with("not applicable: a documented limit of the landlock layer") &&
         j.evidence.find(words) != std::string::npos;
}

TEST(EscapeCatalogLandlock, TheProbeProgramIsAtItsHostPath) {
  Context c = landlock_context();
  auto v = build_catalog(c);
  const ProbeSpec* k = find_probe(v, "kernel-mount-tmpfs");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->command, "'/opt/exg bin/exguardian' probe mount-tmpfs");
  const ProbeSpec* bin = find_probe(v, "persist-exguardian-binary");
  ASSERT_NE(bin, nullptr);
  EXPECT_EQ(bin->command, "echo pwned >> '/opt/exg bin/exguardian'");
  Context p;
  p.layer = "process";
  auto pv = build_catalog(p);
  EXPECT_EQ(find_probe(pv, "kernel-mount-tmpfs")->command, "/run/exguardian/exguardian probe mount-tmpfs");
}

TEST(EscapeCatalogLandlock, DocumentedLimitsAreNotApplicableOtherOutcomesKeepTheirVerdict) {
  Context c = landlock_context();
  auto v = build_catalog(c);
  auto judge = [&](const char* id, const Outcome& o) {
    const ProbeSpec* p = find_probe(v, id);
    EXPECT_NE(p, nullptr) << id;
    return p ? p->judge(o) : Judgement{Verdict::failed, ""};
  };
  EXPECT_TRUE(not_applicable(judge("proc-pid1", Outcome{0, false, "systemd\n/sbin/init\n", {}, ""}), "no pid namespace"));
  EXPECT_TRUE(not_applicable(judge("proc-host-processes", Outcome{0, false, "visible: /proc/1/cmdline\n", {}, ""}),
                             "host processes are visible"));
  EXPECT_TRUE(not_applicable(judge("kernel-socket-inet-udp-allowed",
                                   Outcome{1, false, "socket-inet-udp-allowed: NOT AS EXPECTED: refused: EPERM\n", {}, ""}),
                             "UDP sockets are refused"));
  // A denyWrite inside the workspace: the layer refuses the run (it was left writable before).
  auto dw = judge("move-parent-of-denywrite",
                  Outcome{125, false, "exguardian: landlock layer: cannot deny writing /nonexistent/ws/config/prod.yaml\n", {}, ""});
  EXPECT_TRUE(not_applicable(dw, "refuses the run")) << dw.evidence;
  // The same probe allowed to run and finding nothing changed: held, as on every layer.
  EXPECT_EQ(judge("move-parent-of-denywrite", Outcome{1, false, "mv: Permission denied\n", {}, ""}).verdict, Verdict::held);
  // A kernel probe the filter let through is still an escape.
  EXPECT_EQ(judge("kernel-mount-tmpfs", Outcome{1, false, "mount-tmpfs: NOT AS EXPECTED: allowed\n", {}, ""}).verdict,
            Verdict::escaped);
  // TIOCSTI with no pty to open: refused before the ioctl, said so.
  auto t = judge("kernel-tiocsti", Outcome{1, false, "tiocsti: NOT AS EXPECTED: failed: EACCES (not the filter's answer, EPERM)\n", {}, ""});
  EXPECT_EQ(t.verdict, Verdict::held) << t.evidence;
  EXPECT_NE(t.evidence.find("/dev/ptmx"), std::string::npos) << t.evidence;
  // In place: no capabilities, no_new_privs, a filter; HOME not writable.
  Outcome in{0, false, "1000\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\ntouch: Permission denied\n", {}, ""};
  EXPECT_EQ(judge("sandbox-in-place", in).verdict, Verdict::held);
  Outcome no_filter{0, false, "1000\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t0\n", {}, ""};
  EXPECT_EQ(judge("sandbox-in-place", no_filter).verdict, Verdict::failed);
}

// Another sandbox's files in the host's temporary trees (issue 42): read by path, O_PATH,
// listed or found is an escape; refused on the landlock layer (said so), absent on a layer with
// its own temp trees (held by construction, said so); the secret anywhere in the output escapes.
TEST(EscapeCatalogLandlock, SiblingFilesInTheHostsTempTrees) {
  Context c = landlock_context();
  c.sibling_dirs = {"/tmp/exguardian-exgsib1", "/var/tmp/exg-sibling.2"};
  c.sibling_secret = "EXGSIBLING-42";
  auto v = build_catalog(c);
  const ProbeSpec* p = find_probe(v, "sibling-tmp-read");
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(p->skip_why.empty()) << p->skip_why;
  EXPECT_NE(p->command.find("'/var/tmp/exg-sibling.2'"), std::string::npos) << p->command;
  EXPECT_NE(p->command.find("O_PATH"), std::string::npos);
  auto out = [](const std::string& a, const std::string& b) {
    return "== /tmp/exguardian-exgsib1\n" + a + "== /var/tmp/exg-sibling.2\n" + b + "sibling-tries-done\n";
  };
  const std::string refused = "cat: x: Permission denied\nO_PATH opened, read through /proc/self/fd: Permission denied\n";
  auto j = p->judge(Outcome{0, false, out(refused, refused), {}, ""});
  EXPECT_EQ(j.verdict, Verdict::held) << j.evidence;
  EXPECT_NE(j.evidence.find("refused by Landlock"), std::string::npos) << j.evidence;
  j = p->judge(Outcome{0, false, out(refused, "O_PATH read: EXGSIBLING-42\n"), {}, ""});
  EXPECT_EQ(j.verdict, Verdict::escaped) << j.evidence;
  EXPECT_NE(j.evidence.find("/var/tmp/exg-sibling.2"), std::string::npos) << j.evidence;
  j = p->judge(Outcome{0, false, out(refused, "/var/tmp/exg-sibling.2\n/var/tmp/exg-sibling.2/secret\n"), {}, ""});
  EXPECT_EQ(j.verdict, Verdict::escaped) << j.evidence;
  j = p->judge(Outcome{0, false, out("-rw------- 1 u u 28 Dec  7 09:00 secret\n", refused), {}, ""});
  EXPECT_EQ(j.verdict, Verdict::escaped) << j.evidence;
  // Cut short: not held.
  EXPECT_EQ(p->judge(Outcome{137, false, "== /tmp/exguardian-exgsib1\n", {}, ""}).verdict, Verdict::failed);
  // A layer with its own /tmp: the paths are not there.
  Context pc = c;
  pc.layer = "process";
  auto pv = build_catalog(pc);
  const std::string absent = "cat: x: No such file or directory\nO_PATH open: No such file or directory\n";
  j = find_probe(pv, "sibling-tmp-read")->judge(Outcome{0, false, out(absent, absent), {}, ""});
  EXPECT_EQ(j.verdict, Verdict::held) << j.evidence;
  EXPECT_TRUE(j.evidence.starts_with("held by construction")) << j.evidence;
  // No sibling directories could be made: not run, saying why, not required.
  Context none = landlock_context();
  none.sibling_why = "/dev/shm: No such file or directory";
  auto nv = build_catalog(none);
  EXPECT_FALSE(find_probe(nv, "sibling-tmp-read")->required);
  EXPECT_NE(find_probe(nv, "sibling-tmp-read")->skip_why.find("/dev/shm"), std::string::npos);
}

// A fabricated snapshot git directory whose core.worktree is HOME: held only when the sweep
// quarantined its config (exit 123, a planted line); still on the host it is an escape that
// names where a later git would check out.
TEST(EscapeCatalogLandlock, SnapshotWorktreeAtHome) {
  char tmpl[] = "/tmp/exg-unit-snap.XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  Context c = landlock_context();
  c.ws = tmpl;
  c.home = "/home/someone";
  auto v = build_catalog(c);
  const ProbeSpec* p = find_probe(v, "planted-snapshot-worktree");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->category, "persistence");
  EXPECT_NE(p->command.find("worktree = %s"), std::string::npos) << p->command;
  EXPECT_NE(p->command.find("'/home/someone'"), std::string::npos) << p->command;
  const std::string cfg = std::string(tmpl) + "/snap-x/config";
  Outcome swept{123, false, "", {nlohmann::json{{"event", "planted"}, {"path", cfg}, {"quarantined_to", "/q/config"}}}, ""};
  auto j = p->judge(swept);
  EXPECT_EQ(j.verdict, Verdict::held) << j.evidence;
  EXPECT_NE(j.evidence.find("finds no core.worktree"), std::string::npos) << j.evidence;
  ::mkdir((std::string(tmpl) + "/snap-x").c_str(), 0755);
  { std::ofstream(cfg) << "[core]\n\tbare = false\n\tworktree = /home/someone\n"; }
  j = p->judge(Outcome{0, false, "", {}, ""});
  EXPECT_EQ(j.verdict, Verdict::escaped) << j.evidence;
  EXPECT_NE(j.evidence.find("core.worktree is HOME"), std::string::npos) << j.evidence;
  std::error_code ec;
  std::filesystem::remove_all(tmpl, ec);
}

}  // namespace
}  // namespace exg::evidence
