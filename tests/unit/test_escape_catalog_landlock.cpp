// The escape-test catalogue on the landlock layer: the probes run in the host's namespaces, the
// probe program at its host path; what the layer says it cannot do (docs/layers.md) comes out
// "not applicable" naming the limit, never held; an outcome no limit explains keeps its verdict.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace exg::evidence
