// escape-test --sandbox: the parsing of a preset or a prefix, its placeholders, and the
// catalogue's adaptation to a foreign sandbox (evidence/foreign_sandbox.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "evidence/documented_limits.hpp"
#include "evidence/foreign_sandbox.hpp"

namespace exg::evidence {
namespace {

TEST(ForeignSandbox, SplitsLikeAShell) {
  std::vector<std::string> v;
  std::string err;
  ASSERT_TRUE(split_command_line(R"(bwrap --bind "{workspace}" '/a b' x\ y "q\"t" --)", v, err));
  EXPECT_EQ(v, (std::vector<std::string>{"bwrap", "--bind", "{workspace}", "/a b", "x y", "q\"t", "--"}));
  EXPECT_FALSE(split_command_line("bwrap 'open", v, err));
  EXPECT_NE(err.find("unterminated"), std::string::npos);
}

TEST(ForeignSandbox, PresetsAndPrefixes) {
  ForeignSandbox fs;
  std::string err;
  ASSERT_TRUE(parse_foreign_sandbox("sh -c", "", fs, err)) << err;
  EXPECT_EQ(fs.name, "custom");
  EXPECT_EQ(fs.prefix, (std::vector<std::string>{"sh", "-c"}));
  EXPECT_FALSE(parse_foreign_sandbox("exg-no-such-tool --x", "", fs, err));
  EXPECT_NE(err.find("neither a preset"), std::string::npos) << err;
  EXPECT_FALSE(parse_foreign_sandbox("", "", fs, err));
  EXPECT_FALSE(parse_foreign_sandbox("sh", "img", fs, err));  // no {image} to put it in
  // podman needs its image, named by the user (never pulled).
  bool podman = false;
  for (const auto& p : foreign_presets()) podman = podman || (p.name == "podman" && p.needs_image);
  EXPECT_TRUE(podman);
}

// The issue's own spelling, --compare ...,runsc,...: gVisor under an engine, the podman-runsc preset.
TEST(ForeignSandbox, RunscNamesGvisorUnderPodman) {
  EXPECT_EQ(preset_name("runsc"), "podman-runsc");
  EXPECT_EQ(preset_name("bwrap"), "bwrap");
  ForeignSandbox fs;
  std::string err;
  EXPECT_FALSE(parse_foreign_sandbox("runsc", "", fs, err));  // an image to run, as podman-runsc
  EXPECT_NE(err.find("--sandbox-image"), std::string::npos) << err;
}

TEST(ForeignSandbox, BwrapPresetsDifferOnlyInTheNetwork) {
  const ForeignPreset *off = nullptr, *on = nullptr;
  for (const auto& p : foreign_presets()) {
    if (p.name == "bwrap") off = &p;
    if (p.name == "bwrap-net") on = &p;
  }
  ASSERT_TRUE(off && on);
  auto with = off->prefix;
  with.insert(std::find(with.begin(), with.end(), "--unshare-all") + 1, "--share-net");
  EXPECT_EQ(with, on->prefix);
  EXPECT_EQ(shown_command(off->prefix).substr(0, 22), "bwrap --ro-bind / / --");
}

TEST(ForeignSandbox, Placeholders) {
  ForeignPlaces at{"/w s", "/h", "/p/exguardian-probe"};
  EXPECT_EQ(expand_placeholders(std::vector<std::string>{"--bind", "{workspace}", "{workspace}:{home}", "{probe}"}, at),
            (std::vector<std::string>{"--bind", "/w s", "/w s:/h", "/p/exguardian-probe"}));
  EXPECT_EQ(shown_command({"a b", "c'd", "{x}"}), "'a b' 'c'\\''d' {x}");
}

TEST(ForeignSandbox, ExguardianOnlyProbesAreNotApplicableNeverHeld) {
  Context ctx;
  ctx.canary = "EXGCANARY-test";
  ctx.host_marker = "EXGMARK-0123456789";
  ctx.leftover_marker = "EXGLEFT-0123456789";
  ctx.host_marker_pid = 1;
  ctx.world_up = true;
  ctx.ws = "/w/workspace";
  for (auto t : {"curl", "gcc", "python3", "bash", "git"}) ctx.tools[t] = true;
  auto v = build_catalog(ctx);
  adapt_for_foreign(v, ctx, "/x/exguardian-probe");
  for (const char* id : {"net-socks-metadata-ip", "persist-exguardian-binary", "limit-pids", "move-parent-of-denyread",
                         "net-transparent-unassigned"}) {
    const ProbeSpec* p = find_probe(v, id);
    ASSERT_TRUE(p) << id;
    EXPECT_TRUE(p->skip_why.starts_with(kNotApplicable)) << id << ": " << p->skip_why;
    EXPECT_FALSE(p->required) << id;
  }
  const ProbeSpec* k = find_probe(v, "kernel-bpf");
  ASSERT_TRUE(k);
  // Its scratch directory in the workspace (srt's settings keep /tmp read-only).
  EXPECT_EQ(k->command, "/x/exguardian-probe bpf --scratch /w/workspace");
  EXPECT_EQ(k->batch, "kernel");
  Outcome allowed;
  allowed.status = 1;
  allowed.out = "bpf: NOT AS EXPECTED: allowed\n";
  EXPECT_EQ(k->judge(allowed).verdict, Verdict::escaped);
  Outcome eperm;
  eperm.status = 0;
  eperm.out = "bpf: as expected: refused: EPERM\n";
  EXPECT_EQ(k->judge(eperm).verdict, Verdict::held);
  // Judged by what the world's servers saw, not by a proxy's audit line.
  const ProbeSpec* m = find_probe(v, "net-metadata-name");
  ASSERT_TRUE(m);
  Outcome quiet;
  quiet.status = 7;
  quiet.out = "curl: (7) Failed to connect\n";
  EXPECT_EQ(m->judge(quiet).verdict, Verdict::held);
  Outcome reached = quiet;
  reached.world_log = "169.254.169.254 GET / host=meta.test\n";
  EXPECT_EQ(m->judge(reached).verdict, Verdict::escaped);
  // A tool missing from the sandbox's image is not a refusal.
  Outcome missing;
  missing.status = 127;
  missing.out = "sh: curl: not found\n";
  EXPECT_EQ(m->judge(missing).verdict, Verdict::skipped);
  // A small image without the file a set-id probe copies never tried the attack: not held.
  const ProbeSpec* sid = find_probe(v, "setid-file-left");
  ASSERT_TRUE(sid);
  Outcome no_id;
  no_id.status = 1;
  no_id.out = "cp: can't stat '/usr/bin/id': No such file or directory\n";
  EXPECT_EQ(sid->judge(no_id).verdict, Verdict::skipped);
  // Shared sandboxes: the kernel batch and one of shell probes, each batch's members next to each
  // other (judged one after the other, right after their sandbox); never a probe that needs the
  // world's log, a run option, the gate, or one that writes what every judge compares (a canary,
  // the workspace's hook or git config).
  std::set<std::string> seen;
  std::string last;
  for (const auto& p : v) {
    EXPECT_TRUE(p.batch.empty() || p.batch == "kernel" || p.batch == "userland") << p.id;
    if (!p.batch.empty() && p.batch != last) EXPECT_TRUE(seen.insert(p.batch).second) << p.id << " apart from its batch";
    last = p.batch;
    if (p.batch.empty()) continue;
    EXPECT_FALSE(p.needs_world || p.destructive || p.stdio_files || !p.run_args.empty()) << p.id;
  }
  for (const char* id : {"seed-git-hook", "persist-hookspath", "persist-git-config-append", "persist-home-bashrc",
                         "fd-leak", "persist-background-process", "net-udp", "setid-file-left"}) {
    const ProbeSpec* p = find_probe(v, id);
    ASSERT_TRUE(p) << id;
    EXPECT_TRUE(p->batch.empty()) << id;
  }
  for (const char* id : {"work-write", "proc-pid1", "planted-lefthook", "persist-envrc"}) {
    const ProbeSpec* p = find_probe(v, id);
    ASSERT_TRUE(p) << id;
    EXPECT_EQ(p->batch, "userland") << id;
  }
  EXPECT_EQ(v.front().id, "sandbox-in-place");
}

// --sandbox none: every probe of the catalogue was reviewed for a run with no sandbox (in a list
// of build_catalog or its row of probe/probes.cpp); the destructive ones are not run, and say so.
TEST(ForeignSandbox, NoSandboxRunsOnlyWhatIsSafeWithoutOne) {
  Context ctx;
  ctx.canary = "EXGCANARY-test";
  ctx.host_marker = "EXGMARK-0123456789";
  ctx.leftover_marker = "EXGLEFT-0123456789";
  ctx.host_marker_pid = 1;
  ctx.world_up = true;
  for (auto t : {"curl", "gcc", "python3", "bash", "git"}) ctx.tools[t] = true;
  auto v = build_catalog(ctx);
  const WithoutSandbox unreviewed;
  for (const auto& p : v)
    EXPECT_TRUE(p.without_sandbox.safe || (!p.without_sandbox.why.empty() && p.without_sandbox.why != unreviewed.why))
        << p.id << " was not reviewed for --sandbox none";
  adapt_for_foreign(v, ctx, "/x/exguardian-probe", true);
  for (const char* id : {"kernel-reboot", "kernel-kexec-load", "kernel-kexec-file-load", "kernel-init-module",
                         "kernel-finit-module", "kernel-delete-module", "kernel-swapon", "kernel-acct",
                         "kernel-settimeofday", "kernel-clock-settime", "limit-pids", "limit-memory",
                         "proc-pid1-signals", "proc-environ-every", "persist-exguardian-binary"}) {
    const ProbeSpec* p = find_probe(v, id);
    ASSERT_TRUE(p) << id;
    EXPECT_TRUE(p->skip_why.starts_with(kUnsafeWithoutSandbox)) << id << ": " << p->skip_why;
    EXPECT_GT(p->skip_why.size(), std::string(kUnsafeWithoutSandbox).size() + 10) << id;
    EXPECT_FALSE(p->required) << id;
  }
  for (const char* id : {"kernel-bpf", "kernel-mount-tmpfs", "kernel-unshare-newuser", "seed-read-credentials",
                         "proc-host-kill", "setid-file-left", "net-direct-metadata", "sandbox-in-place"}) {
    const ProbeSpec* p = find_probe(v, id);
    ASSERT_TRUE(p) << id;
    EXPECT_TRUE(p->skip_why.empty()) << id << ": " << p->skip_why;
  }
  // With no sandbox a kernel probe's other errno is the host kernel taking the call.
  const ProbeSpec* k = find_probe(v, "kernel-umount2");
  ASSERT_TRUE(k);
  Outcome enoent;
  enoent.status = 1;
  enoent.out = "umount2: NOT AS EXPECTED: failed: ENOENT (not the filter's answer, EPERM)\n";
  EXPECT_EQ(k->judge(enoent).verdict, Verdict::escaped);
  Outcome eperm;
  eperm.status = 0;
  eperm.out = "umount2: as expected: refused: EPERM\n";
  EXPECT_EQ(k->judge(eperm).verdict, Verdict::held);
  // The gate says there is no sandbox: not applicable, never held.
  const ProbeSpec* g = find_probe(v, "sandbox-in-place");
  Outcome ran;
  ran.status = 0;
  ran.out = "0\nns mnt mnt:[1]\n";
  auto j = g->judge(ran);
  EXPECT_EQ(j.verdict, Verdict::skipped);
  EXPECT_TRUE(j.evidence.starts_with(kNotApplicable)) << j.evidence;
}


// A peer's escape is cited against its own documentation only where the documentation says so:
// the probe's own rule first, then its category's; ExGuardian's column and unknown ones never.
TEST(DocumentedLimits, ByProbeThenCategoryAndNeverForExguardian) {
  const auto* env = documented_limit("bwrap-net", "seed-env-secrets", "secrets");
  ASSERT_NE(env, nullptr);
  EXPECT_NE(env->source.find("--clearenv"), std::string::npos);
  const auto* k = documented_limit("bwrap", "kernel-ptrace-attach", "kernel");
  ASSERT_NE(k, nullptr);
  EXPECT_NE(k->source.find("--seccomp"), std::string::npos);
  EXPECT_EQ(documented_limit("bwrap", "net-direct-metadata", "network"), nullptr);  // (no network there)
  ASSERT_NE(documented_limit("bwrap-net", "net-direct-metadata", "network"), nullptr);
  const auto* r = documented_limit("srt", "seed-read-credentials", "secrets");
  ASSERT_NE(r, nullptr);
  EXPECT_NE(r->source.find("sandbox-runtime README"), std::string::npos);
  EXPECT_EQ(documented_limit("srt", "seed-env-secrets", "secrets"), nullptr);  // not documented: reported as seen
  EXPECT_EQ(documented_limit("exguardian", "seed-env-secrets", "secrets"), nullptr);
  EXPECT_EQ(documented_limit("custom", "seed-env-secrets", "secrets"), nullptr);
  ASSERT_NE(documented_limit("podman-hardened", "persist-home-bashrc", "persistence"), nullptr);
  // The hardened flags leave the system calls to podman's seccomp profile (the default's own rule is its capabilities).
  const auto* hk = documented_limit("podman-hardened", "kernel-keyctl", "kernel");
  ASSERT_NE(hk, nullptr);
  EXPECT_NE(hk->source.find("seccomp_profile"), std::string::npos);
  EXPECT_NE(documented_limit("podman", "kernel-keyctl", "kernel"), hk);
  // A probe's own rule before its category's: srt's root capabilities, its search depth for nested hooks.
  const auto* caps = documented_limit("srt", "sandbox-status", "sandbox");
  ASSERT_NE(caps, nullptr);
  EXPECT_NE(caps->source.find("Running as root"), std::string::npos);
  const auto* depth = documented_limit("srt", "cleanup-canaries", "cleanup");
  ASSERT_NE(depth, nullptr);
  EXPECT_NE(depth->source.find("search depth"), std::string::npos);
  EXPECT_EQ(documented_limit("podman-hardened", "sandbox-status", "sandbox"), nullptr);  // (--cap-drop=ALL)
}

TEST(ForeignSandbox, SrtPresetReadsItsSettingsFile) {
  ForeignSandbox fs;
  std::string err;
  if (!parse_foreign_sandbox("srt", "", fs, err)) GTEST_SKIP() << err;  // (srt not in PATH here)
  EXPECT_EQ(fs.prefix, (std::vector<std::string>{"srt", "--settings", "{settings}", "--"}));
  EXPECT_NE(fs.default_settings.find("\"allowedDomains\": [\"allowed.test\"]"), std::string::npos);
  ForeignPlaces at{"/w", "/h", "/p", "/s/settings.json"};
  EXPECT_EQ(expand_placeholders(fs.prefix, at), (std::vector<std::string>{"srt", "--settings", "/s/settings.json", "--"}));
}

}  // namespace
}  // namespace exg::evidence
