// The Layer interface's pure decisions: the name table, what each layer says
// about itself (describe) and what it enforces, the plan text with a layer's
// lines, and the factory's refusals. No kernel needed: the layers are made by
// hand with the host facts they would read.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "cli/make_layer.hpp"
#include "layer/layer.hpp"
#include "oci/layer.hpp"
#include "process/layer.hpp"
#include "util/layer_kind.hpp"

using namespace exg;

namespace {

plan::Plan small_plan() {
  plan::Plan p;
  p.sandbox_id = "abc123";
  p.seccomp = true;
  p.identity.invoked_as_root = true;
  p.identity.host_uid = 1000;
  p.identity.host_gid = 1000;
  return p;
}

oci::LayerOptions oci_options(layer::Kind kind, oci::Runtime rt, const char* path) {
  oci::LayerOptions o;
  o.kind = kind;
  o.runtime.runtime = rt;
  o.runtime.path = path;
  o.cgroups.why = "pure cgroup v2";
  o.pid1_installed = "/usr/lib/exguardian/exguardian-init";
  return o;
}

}  // namespace

TEST(LayerKind, NamesRoundTrip) {
  std::set<std::string_view> seen;
  for (auto k : layer::all_kinds()) {
    auto n = layer::name(k);
    EXPECT_TRUE(seen.insert(n).second) << n;
    ASSERT_TRUE(layer::parse_kind(n)) << n;
    EXPECT_EQ(*layer::parse_kind(n), k);
  }
  EXPECT_EQ(seen, (std::set<std::string_view>{"process", "container", "gvisor", "microvm", "landlock"}));
  EXPECT_EQ(layer::all_kinds().front(), layer::Kind::Process);  // the default comes first
  EXPECT_EQ(layer::all_names().size(), layer::all_kinds().size());
}

TEST(LayerKind, UnknownNamesAreRefused) {
  for (const char* n : {"", "Process", "PROCESS", "docker", "vm", "process ", "gvisor\n"})
    EXPECT_FALSE(layer::parse_kind(n)) << n;
}

TEST(LayerKind, NamesText) {
  EXPECT_EQ(layer::names_text(layer::all_kinds()), "process, container, gvisor, microvm or landlock");
  EXPECT_EQ(layer::names_text({layer::Kind::Gvisor}), "gvisor");
  EXPECT_EQ(layer::names_text({layer::Kind::Process, layer::Kind::Container}, ", "), "process, container");
}

TEST(LayerKind, BuildableKindsAreKnown) {
  for (auto k : cli::buildable_kinds())
    EXPECT_TRUE(std::find(layer::all_kinds().begin(), layer::all_kinds().end(), k) != layer::all_kinds().end());
  // Every kind of the table is in this build (microvm: tests/unit/test_microvm.cpp).
  EXPECT_EQ(cli::buildable_kinds(), layer::all_kinds());
  for (auto k : {layer::Kind::Process, layer::Kind::Microvm}) {
    auto l = cli::make_layer(k);
    ASSERT_TRUE(l) << l.error().str();
    EXPECT_EQ((*l)->kind(), k);
  }
}

TEST(ProcessLayer, Describe) {
  process::ProcessLayer l({});
  EXPECT_EQ(l.kind(), layer::Kind::Process);
  EXPECT_EQ(l.describe(small_plan()), std::vector<std::string>{"layer: process"});
  EXPECT_TRUE(l.supports_agent());
}

TEST(ProcessLayer, EnforcesLandlockAsTheKernelOffers) {
  walls::LandlockFeatures full;
  full.abi = 7;
  full.fs = true;
  full.scope = true;
  auto e = process::ProcessLayer(full).enforces(small_plan());
  EXPECT_TRUE(e.landlock);
  EXPECT_EQ(e.landlock_text, "ABI 7: filesystem writes, signal and abstract-unix scoping");

  walls::LandlockFeatures old;
  old.abi = 3;
  old.fs = true;
  e = process::ProcessLayer(old).enforces(small_plan());
  EXPECT_TRUE(e.landlock);
  EXPECT_EQ(e.landlock_text, "ABI 3: filesystem writes (no signal/abstract-unix scoping: needs ABI 6)");

  e = process::ProcessLayer({}).enforces(small_plan());
  EXPECT_FALSE(e.landlock);
  EXPECT_EQ(e.landlock_text, "not available on this kernel: writes are guarded by the mounts only");
}

TEST(ProcessLayer, SeccompIsOursAndNotified) {
  auto p = small_plan();
  auto e = process::ProcessLayer({}).enforces(p);
  EXPECT_TRUE(e.seccomp);
  EXPECT_TRUE(e.seccomp_notify);
  EXPECT_EQ(e.seccomp_by, "exguardian");
  EXPECT_EQ(e.seccomp_text, "filter installed, refusals reported to the supervisor");
  p.seccomp = false;
  e = process::ProcessLayer({}).enforces(p);
  EXPECT_FALSE(e.seccomp);
  EXPECT_FALSE(e.seccomp_notify);
  EXPECT_EQ(e.seccomp_text, "OFF (--unsafe-no-seccomp)");
}

TEST(OciLayer, ContainerEnforces) {
  oci::OciLayer l(oci_options(layer::Kind::Container, oci::Runtime::Crun, "/usr/bin/crun"));
  EXPECT_EQ(l.kind(), layer::Kind::Container);
  auto e = l.enforces(small_plan());
  EXPECT_FALSE(e.landlock);
  EXPECT_EQ(e.landlock_text, "not used on the container layer (the runtime's mounts and user namespace are the walls)");
  EXPECT_TRUE(e.seccomp);
  EXPECT_TRUE(e.seccomp_notify);  // listenerPath
  EXPECT_EQ(e.seccomp_by, "crun");
  EXPECT_EQ(e.seccomp_text, "ExGuardian's filter (the process layer's program, compiled at build time), installed by crun, "
                            "refusals reported to the supervisor");
  EXPECT_TRUE(l.supports_agent());
  // runc has no annotation for a compiled program: it gets the rules.
  oci::OciLayer r(oci_options(layer::Kind::Container, oci::Runtime::Runc, "/usr/bin/runc"));
  auto er = r.enforces(small_plan());
  EXPECT_EQ(er.seccomp_by, "runc");
  EXPECT_EQ(er.seccomp_text, "ExGuardian's profile in config.json, applied by the runtime, refusals reported to the supervisor");
}

TEST(OciLayer, GvisorEnforces) {
  oci::OciLayer l(oci_options(layer::Kind::Gvisor, oci::Runtime::Runsc, "/usr/bin/runsc"));
  EXPECT_EQ(l.kind(), layer::Kind::Gvisor);
  auto e = l.enforces(small_plan());
  EXPECT_FALSE(e.landlock);
  EXPECT_EQ(e.landlock_text, "not used on the gvisor layer (the runtime's mounts and user namespace are the walls)");
  EXPECT_TRUE(e.seccomp);
  EXPECT_FALSE(e.seccomp_notify);  // runsc has no seccomp notify
  EXPECT_EQ(e.seccomp_by, "exguardian-init");  // exguardian-init --seccomp, inside gVisor
  EXPECT_NE(e.seccomp_text.find("installed by pid 1"), std::string::npos);
  auto p = small_plan();
  p.seccomp = false;
  e = l.enforces(p);
  EXPECT_FALSE(e.seccomp);
  EXPECT_EQ(e.seccomp_text, "OFF (--unsafe-no-seccomp)");
  EXPECT_TRUE(l.supports_agent());  // its channel is the container's stdin (docs/agent-protocol.md)
}

TEST(OciLayer, DescribeFromTheHostFactsItWasMadeWith) {
  auto o = oci_options(layer::Kind::Container, oci::Runtime::Crun, "/usr/bin/crun");
  o.runtime.notes = {"crun is the default"};
  oci::OciLayer l(o);
  auto d = l.describe(small_plan());
  ASSERT_GE(d.size(), 5u);
  EXPECT_EQ(d[0], "layer: container via crun (/usr/bin/crun)");
  EXPECT_EQ(d[1], "  runtime: crun is the default");
  EXPECT_EQ(d[2], "  root: the host's, read-only");
  EXPECT_EQ(d[3], "  cgroups: pure cgroup v2; the container stays in the sandbox's cgroup");
  EXPECT_NE(std::find(d.begin(), d.end(), "  identity: crun as root sets the mounts up, the command runs as uid 1000"), d.end());
  EXPECT_NE(d.back().find("bound from the installed /usr/lib/exguardian/exguardian-init"), std::string::npos) << d.back();
}

TEST(LayerPlanText, LayerLinesFollowTheSandboxLine) {
  auto p = small_plan();
  std::string t = layer::plan_text(p, process::ProcessLayer({}));
  EXPECT_EQ(t.rfind("sandbox abc123\nlayer: process\n", 0), 0u) << t;
  oci::OciLayer c(oci_options(layer::Kind::Container, oci::Runtime::Crun, "/usr/bin/crun"));
  t = layer::plan_text(p, c);
  EXPECT_EQ(t.rfind("sandbox abc123\nlayer: container via crun (/usr/bin/crun)\n  root: ", 0), 0u) << t;
  EXPECT_EQ(t.find("layer: process"), std::string::npos);
  // The Plan alone names no layer.
  EXPECT_EQ(p.to_text().find("layer:"), std::string::npos);
}
