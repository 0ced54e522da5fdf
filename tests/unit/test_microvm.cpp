// The microVM layer's data: qemu's command line (no device but the three we
// name, qemu's own sandbox on) and the guest's exported view (the Plan's
// steps again under kViewRoot, nothing of qemu's /proc, /sys or /dev).
#include <gtest/gtest.h>

#include <algorithm>

#include "cli/make_layer.hpp"
#include "layer/layer.hpp"
#include "microvm/launch.hpp"
#include "microvm/layer.hpp"
#include "microvm/view.hpp"
#include "microvm/vmm.hpp"
#include "sandbox/supervisor.hpp"

namespace exg::microvm {
namespace {

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }
std::string after(const std::vector<std::string>& v, const std::string& flag) {
  auto it = std::find(v.begin(), v.end(), flag);
  return it == v.end() || it + 1 == v.end() ? "" : *(it + 1);
}

TEST(MicrovmQemu, CommandNamesEveryDeviceAndConfinesQemu) {
  VmSpec s;
  s.vmm = "/usr/bin/qemu-system-x86_64";
  s.kernel = "/k/vmlinux";
  s.initramfs = "/k/initramfs.cpio";
  s.view_dir = "/.exg-view";
  s.channel_fd = 3;
  s.memory_mib = 300;
  s.tsc_khz = 2300000;
  auto a = QemuMicrovm().command(s);
  EXPECT_EQ(a[0], s.vmm);
  EXPECT_TRUE(has(a, "-nodefaults"));
  EXPECT_TRUE(has(a, "-no-user-config"));
  EXPECT_TRUE(has(a, "-no-reboot"));
  EXPECT_EQ(after(a, "-M"), "microvm,acpi=on");
  EXPECT_EQ(after(a, "-sandbox"), "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny");
  EXPECT_EQ(after(a, "-m"), "300M");
  EXPECT_EQ(after(a, "-accel"), "tcg,tb-size=64");
  EXPECT_EQ(after(a, "-cpu"), "max");  // (qemu64, TCG's default, lacks what today's binaries use)
  std::string append = after(a, "-append");
  for (const char* p : {"reboot=t", "tsc_early_khz=2300000", "console=ttyS0"})
    EXPECT_NE(append.find(p), std::string::npos) << p;
  // Nothing of one sandbox on the kernel command line: it is every sandbox's template.
  EXPECT_EQ(append.find("exg.uid"), std::string::npos);
  EXPECT_FALSE(has(a, "-incoming"));
  EXPECT_FALSE(has(a, "-mon"));
  EXPECT_NE(after(a, "-fsdev").find("path=/.exg-view,security_model=none"), std::string::npos);
  // A descriptor qemu is given (its end of a socket pair): no socket path anywhere.
  EXPECT_EQ(after(a, "-chardev"), "socket,id=agent,fd=3");
  for (const auto& x : a) EXPECT_EQ(x.find("path=/run"), std::string::npos) << x;
  for (const auto& x : a) {
    EXPECT_EQ(x.find("netdev"), std::string::npos) << x;  // no NIC, ever
    EXPECT_EQ(x.find("-drive"), std::string::npos) << x;
  }
  s.accel = Accel::Kvm;
  EXPECT_EQ(after(QemuMicrovm().command(s), "-accel"), "kvm");
  EXPECT_EQ(after(QemuMicrovm().command(s), "-cpu"), "host");
}

TEST(MicrovmView, PlanStepsAgainUnderTheViewWithoutQemusProcSysDev) {
  plan::Plan p;
  p.steps = {{plan::StepKind::BindRo, "/usr", "/usr", "ro"},
             {plan::StepKind::Tmpfs, "", "/dev", "dev"},
             {plan::StepKind::DevNode, "/dev/null", "/dev/null", "null"},
             {plan::StepKind::Proc, "", "/proc", "proc"},
             {plan::StepKind::ProtectRo, "/proc/sys", "/proc/sys", "knobs"},
             {plan::StepKind::Sysfs, "", "/sys", "sys"},
             {plan::StepKind::BindRw, "/home/a/ws", "/home/a/ws", "ws"},
             {plan::StepKind::MaskFile, "", "/home/a/.netrc", "mask"},
             {plan::StepKind::ReadOnly, "", "/", "seal"}};
  p.landlock.read_write = {"/home/a/ws", "/tmp"};
  p.landlock.write_files = {"/dev", "/proc"};
  auto v = with_exported_view(p);
  // The plan's own steps first, untouched (qemu's own view).
  ASSERT_GT(v.steps.size(), p.steps.size());
  for (size_t i = 0; i < p.steps.size(); ++i) EXPECT_EQ(v.steps[i].target, p.steps[i].target);
  std::vector<std::string> exported;
  for (size_t i = p.steps.size(); i < v.steps.size(); ++i) {
    const auto& s = v.steps[i];
    EXPECT_TRUE(s.target.starts_with(kViewRoot)) << s.target;
    EXPECT_NE(s.kind, plan::StepKind::Proc);
    EXPECT_NE(s.kind, plan::StepKind::Sysfs);
    EXPECT_NE(s.kind, plan::StepKind::DevNode);
    exported.push_back(std::string(plan::to_string(s.kind)) + " " + s.target);
  }
  EXPECT_TRUE(has(exported, "bind-ro /.exg-view/usr"));
  EXPECT_TRUE(has(exported, "bind-rw /.exg-view/home/a/ws"));
  EXPECT_TRUE(has(exported, "mask-file /.exg-view/home/a/.netrc"));
  EXPECT_TRUE(has(exported, "mask-dir /.exg-view/proc"));  // an empty mount point for the guest's own
  EXPECT_EQ(exported.back(), "read-only /.exg-view");      // sealed last
  EXPECT_FALSE(has(exported, "protect-ro /.exg-view/proc/sys"));
  EXPECT_TRUE(has(v.landlock.read_write, "/.exg-view/home/a/ws"));
  EXPECT_EQ(v.landlock.write_files, p.landlock.write_files);
}

// A passed-through mask (0111 on the process layer) is readable in the view:
// qemu's 9p server opens each directory it walks; a closed mask stays closed.
TEST(MicrovmView, PassedThroughMasksAreReadableForTheNinePServer) {
  plan::Plan p;
  plan::Step through{plan::StepKind::MaskDir, "", "/srv/vault", "deny, with an allowRead inside"};
  through.mode = 0111;
  plan::Step closed{plan::StepKind::MaskDir, "", "/srv/other", "deny"};
  closed.mode = 0;
  p.steps = {through, closed};
  auto v = with_exported_view(p);
  auto mode_of = [&](const std::string& t) {
    for (const auto& s : v.steps)
      if (s.target == t) return static_cast<int>(s.mode);
    return -1;
  };
  EXPECT_EQ(mode_of("/srv/vault"), 0111);  // qemu's own view: as the plan says
  EXPECT_EQ(mode_of(std::string(kViewRoot) + "/srv/vault"), 0555);
  EXPECT_EQ(mode_of(std::string(kViewRoot) + "/srv/other"), 0);
}

// The plan's private tmpfs directories are the guest's own (Unix sockets work
// there); what the plan mounts below them is carried, outermost paths only;
// "/", /dev and a tmpfs the plan seals read-only stay the view's.
TEST(MicrovmView, GuestOwnsThePlansTmpfsDirectoriesAndCarriesWhatIsBelow) {
  plan::Plan p;
  plan::Step tmp{plan::StepKind::Tmpfs, "", "/tmp", "private /tmp"};
  tmp.mode = 01777;
  plan::Step run{plan::StepKind::Tmpfs, "", "/run", "runtime"};
  plan::Step sealed{plan::StepKind::Tmpfs, "", "/srv/cache", "sealed"};
  p.steps = {{plan::StepKind::Tmpfs, "", "/", "root"},
             {plan::StepKind::BindRo, "/usr", "/usr", "ro"},
             tmp,
             run,
             sealed,
             {plan::StepKind::ReadOnly, "", "/srv", "sealed above"},
             {plan::StepKind::Tmpfs, "", "/dev", "dev"},
             {plan::StepKind::Tmpfs, "", "/dev/shm", "shm"},
             {plan::StepKind::BindRw, "/tmp/ws", "/tmp/ws", "workspace"},
             {plan::StepKind::ProtectRo, "/tmp/ws/.git/hooks", "/tmp/ws/.git/hooks", "inside the workspace"},
             {plan::StepKind::Symlink, "ws", "/tmp/link", "a symlink"},
             {plan::StepKind::BindRo, "/x", "/run/exguardian/exguardian", "a file"},
             {plan::StepKind::ReadOnly, "", "/tmp/ws", "not a mount of its own"},
             {plan::StepKind::ReadOnly, "", "/", "seal"}};
  auto d = guest_scratch_dirs(p);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].path, "/tmp");
  EXPECT_EQ(d[0].mode, 01777u);
  EXPECT_EQ(d[0].carry, (std::vector<std::string>{"/tmp/ws", "/tmp/link"}));
  EXPECT_EQ(d[1].path, "/run");
  EXPECT_EQ(d[1].carry, (std::vector<std::string>{"/run/exguardian/exguardian"}));
  // A tmpfs nested in another carries its own, and is not carried by the outer one.
  p.steps.push_back({plan::StepKind::Tmpfs, "", "/tmp/inner", "nested"});
  p.steps.push_back({plan::StepKind::File, "", "/tmp/inner/f", "a file in it"});
  d = guest_scratch_dirs(p);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].carry, (std::vector<std::string>{"/tmp/ws", "/tmp/link"}));
  EXPECT_EQ(d[2].path, "/tmp/inner");
  EXPECT_EQ(d[2].carry, (std::vector<std::string>{"/tmp/inner/f"}));
  // What the host sends is what the guest reads.
  std::string why;
  auto back = guest::scratch_from_json(guest::scratch_to_json(d), &why);
  ASSERT_TRUE(back) << why;
  ASSERT_EQ(back->size(), 3u);
  EXPECT_EQ((*back)[0].carry, d[0].carry);
  EXPECT_EQ((*back)[2].path, "/tmp/inner");
}

// With a scratch disk (guest root): /etc, /var/lib and /var/cache are overlays
// on it, mounted first and carrying what the plan mounts below them; /var/tmp
// is a directory of the disk; the other tmpfs directories stay in the guest's RAM.
TEST(MicrovmView, ScratchDiskTakesEtcVarLibVarCacheAndVarTmp) {
  plan::Plan p;
  p.steps = {{plan::StepKind::Tmpfs, "", "/", "root"},
             {plan::StepKind::BindRo, "/etc", "/etc", "ro"},
             {plan::StepKind::BindRo, "/var", "/var", "ro"},
             {plan::StepKind::Tmpfs, "", "/tmp", "private /tmp"},
             {plan::StepKind::Tmpfs, "", "/var/tmp", "private /var/tmp"},
             {plan::StepKind::BindRw, "/var/lib/ws", "/var/lib/ws", "a workspace under /var/lib"},
             {plan::StepKind::BindRo, "/x/hosts", "/etc/hosts", "the sandbox's hosts file"},
             {plan::StepKind::ReadOnly, "", "/", "seal"}};
  auto d = guest_scratch_dirs(p, true);
  ASSERT_EQ(d.size(), 8u);
  EXPECT_EQ(d[0].path, "/var/cache");
  EXPECT_EQ(d[0].disk, guest::kOnDiskOverlay);
  EXPECT_EQ(d[1].path, "/var/lib");
  EXPECT_EQ(d[1].disk, guest::kOnDiskOverlay);
  EXPECT_EQ(d[1].carry, (std::vector<std::string>{"/var/lib/ws"}));
  // podman writes /etc/cni/net.d (its lock, its default network): on the disk, never the host's.
  EXPECT_EQ(d[2].path, "/etc");
  EXPECT_EQ(d[2].disk, guest::kOnDiskOverlay);
  EXPECT_EQ(d[2].carry, (std::vector<std::string>{"/etc/hosts"}));
  EXPECT_EQ(d[3].path, "/tmp");
  EXPECT_EQ(d[3].disk, guest::kOnTmpfs);
  EXPECT_EQ(d[4].path, "/var/tmp");
  EXPECT_EQ(d[4].disk, guest::kOnDiskDir);
  // podman's and dockerd's storage: the disk's own, over the overlay (the host's may be 0700).
  EXPECT_EQ(d[5].path, "/var/lib/containers");
  EXPECT_EQ(d[5].disk, guest::kOnDiskDir);
  EXPECT_EQ(d[5].mode, 0700u);
  EXPECT_EQ(d[6].path, "/var/lib/docker");
  EXPECT_EQ(d[7].path, "/var/lib/cni");
  std::string why;
  auto back = guest::scratch_from_json(guest::scratch_to_json(d), &why);
  ASSERT_TRUE(back) << why;
  EXPECT_EQ((*back)[1].disk, guest::kOnDiskOverlay);
  EXPECT_EQ((*back)[2].disk, guest::kOnDiskOverlay);
  EXPECT_EQ((*back)[3].disk, guest::kOnTmpfs);
  EXPECT_EQ((*back)[4].disk, guest::kOnDiskDir);
  // Without a disk: the plan's tmpfs directories only, as before.
  d = guest_scratch_dirs(p);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[1].disk, guest::kOnTmpfs);
}

// The guest's init refuses a bad list, naming the entry and field.
TEST(MicrovmView, GuestRefusesABadScratchList) {
  struct Bad {
    const char* json;
    const char* what;
  };
  for (const Bad& b : {Bad{R"({})", "scratch: not an array"},
                       {R"([1])", "scratch[0]: not an object"},
                       {R"([{"path":"/tmp","mode":1023}])", "scratch[0].carry"},
                       {R"([{"path":"/","mode":0,"carry":[]}])", "scratch[0].path"},
                       {R"([{"path":"tmp","mode":0,"carry":[]}])", "scratch[0].path"},
                       {R"([{"path":"/tmp/../etc","mode":0,"carry":[]}])", "scratch[0].path"},
                       {R"([{"path":"/tmp/","mode":0,"carry":[]}])", "scratch[0].path"},
                       {R"([{"path":"/tmp","mode":4096,"carry":[]}])", "scratch[0].mode"},
                       {R"([{"path":"/tmp","mode":0,"carry":["/etc/passwd"]}])", "scratch[0].carry"},
                       {R"([{"path":"/tmp","mode":0,"carry":["/tmp"]}])", "scratch[0].carry"},
                       {R"([{"path":"/tmp","mode":0,"carry":["/tmp/a/../../etc"]}])", "scratch[0].carry"},
                       {R"([{"path":"/tmp","mode":0,"carry":[],"x":1}])", "scratch[0].x: unknown field"},
                       {R"([{"path":"/tmp","mode":0,"carry":[],"disk":"tmpfs"}])", "scratch[0].disk"},
                       {R"([{"path":"/tmp","mode":0,"carry":[],"disk":1}])", "scratch[0].disk"}}) {
    std::string why;
    EXPECT_FALSE(guest::scratch_from_json(nlohmann::json::parse(b.json), &why)) << b.json;
    EXPECT_NE(why.find(b.what), std::string::npos) << b.json << ": " << why;
  }
  nlohmann::json many = nlohmann::json::array();
  for (int i = 0; i < 33; ++i) many.push_back({{"path", "/d" + std::to_string(i)}, {"mode", 0}, {"carry", nlohmann::json::array()}});
  std::string why;
  EXPECT_FALSE(guest::scratch_from_json(many, &why));
  EXPECT_NE(why.find("more than 32"), std::string::npos) << why;
}

TEST(MicrovmLayer, GuestMemoryLeavesRoomForQemuAndRefusesTooLittle) {
  plan::Plan p;
  p.limits.memory_bytes = 512ull << 20;
  p.limits.explicit_memory = true;
  EXPECT_EQ(*guest_memory_mib(p), 256u);
  p.limits.memory_bytes = 300ull << 20;
  auto r = guest_memory_mib(p);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().str().find("too small"), std::string::npos);
  p.limits.memory_bytes = 8ull << 30;
  p.limits.explicit_memory = false;
  EXPECT_EQ(*guest_memory_mib(p), 1024u);  // the default limit is the host's: the guest keeps 1G
}

TEST(MicrovmLayer, MadeByTheFactoryAndDrivenThroughTheAgent) {
  auto l = cli::make_layer(layer::Kind::Microvm);
  ASSERT_TRUE(l) << l.error().str();
  EXPECT_EQ((*l)->kind(), layer::Kind::Microvm);
  EXPECT_TRUE((*l)->command_through_agent());  // a plain run needs microvm::RunFrontEnd
  EXPECT_TRUE((*l)->supports_agent());         // sessions: the guest's agent on its port
}

TEST(MicrovmLayer, DescribeSaysWhoTheCommandIsInsideTheGuest) {
  plan::Plan p;
  p.identity.host_uid = 1000;
  p.identity.inside_uid = 1000;
  auto d = MicrovmLayer({}, {}).describe(p);
  ASSERT_FALSE(d.empty());
  EXPECT_EQ(d.front().rfind("layer: microvm (qemu -M microvm, ", 0), 0u) << d.front();
  EXPECT_TRUE(has(d, "  runs as uid 1000 inside the guest"));
  LayerOptions root;
  root.guest_root = true;
  EXPECT_TRUE(has(MicrovmLayer(root, {}).describe(p), "  runs as root inside the guest (--microvm-root); qemu as uid 1000 on the host"));
  layer::LayerConfig cfg;
  cfg.guest_root = true;  // --microvm-root reaches the layer through the factory
  EXPECT_EQ(layer::plan_text(p, **cli::make_layer(layer::Kind::Microvm, cfg)).find("runs as uid 1000"), std::string::npos);
}

TEST(MicrovmLayer, EnforcesTheProcessLayersWallsOnQemu) {
  plan::Plan p;
  p.seccomp = true;
  walls::LandlockFeatures ll;
  ll.abi = 6;
  ll.fs = true;
  ll.scope = true;
  auto e = MicrovmLayer({}, ll).enforces(p);
  EXPECT_TRUE(e.landlock);
  EXPECT_TRUE(e.seccomp);
  EXPECT_TRUE(e.seccomp_notify);  // qemu's refusals reach the supervisor
  EXPECT_EQ(e.seccomp_by, "exguardian");
  EXPECT_EQ(e.landlock_text.rfind("on qemu (host side): ABI 6", 0), 0u) << e.landlock_text;
  EXPECT_NE(e.seccomp_text.find("in the guest: the same rules, errno-only"), std::string::npos) << e.seccomp_text;
  EXPECT_NE(e.landlock_text.find("in the guest: the plan's rules where its kernel has Landlock"), std::string::npos);
  p.seccomp = false;
  e = MicrovmLayer({}, {}).enforces(p);
  EXPECT_FALSE(e.seccomp);
  EXPECT_FALSE(e.landlock);
  EXPECT_NE(e.seccomp_text.find("OFF (--unsafe-no-seccomp); in the guest: OFF"), std::string::npos) << e.seccomp_text;
}

// What the guest's init is asked to put around the command: the process
// layer's walls, but for root inside the guest (privileged tools need mounts
// and namespaces), who keeps only what the policy requires.
TEST(MicrovmLayer, GuestWallsFollowThePlanAndRootInside) {
  plan::Plan p;
  p.landlock.read_only = {"/"};
  p.landlock.read_write = {"/home/a/ws", "/tmp"};
  p.limits.pids = 64;
  guest::Walls w = guest_walls(p, {});
  EXPECT_TRUE(w.seccomp);
  ASSERT_TRUE(w.landlock);
  EXPECT_EQ(w.landlock->read_write, p.landlock.read_write);  // the plan's own paths: the guest's root is the view
  EXPECT_EQ(w.pids, 64u);
  EXPECT_NE(guest_walls_text(p, {}).find("seccomp rules (errno-only"), std::string::npos);
  EXPECT_NE(guest_walls_text(p, {}).find("pids limit 64 (its own cgroup)"), std::string::npos);
  LayerOptions root;
  root.guest_root = true;
  w = guest_walls(p, root);
  EXPECT_FALSE(w.seccomp);
  EXPECT_FALSE(w.landlock);
  EXPECT_EQ(w.pids, 64u);
  p.landlock.required = true;
  EXPECT_TRUE(guest_walls(p, root).landlock);
  p.seccomp = false;
  p.limits.pids.reset();
  w = guest_walls(p, {});
  EXPECT_FALSE(w.seccomp);
  EXPECT_EQ(w.pids, 0u);
  EXPECT_TRUE(has(MicrovmLayer({}, {}).describe(p), "  in the guest: " + guest_walls_text(p, {})));
}

// The boot frame's "walls", as the host writes them and the guest's init reads them.
TEST(MicrovmGuestWalls, RoundTripAndEveryBadFieldNamed) {
  guest::Walls w;
  w.seccomp = true;
  w.pids = 4096;
  w.landlock = walls::LandlockRules{};
  w.landlock->read_only = {"/"};
  w.landlock->read_write = {"/ws"};
  w.landlock->write_files = {"/dev", "/proc"};
  w.landlock->handle_net = true;
  w.landlock->connect_tcp = {3128};
  std::string why;
  auto back = guest::walls_from_json(guest::walls_to_json(w), &why);
  ASSERT_TRUE(back) << why;
  EXPECT_TRUE(back->seccomp);
  EXPECT_EQ(back->pids, 4096u);
  ASSERT_TRUE(back->landlock);
  EXPECT_EQ(back->landlock->write_files, w.landlock->write_files);
  EXPECT_TRUE(back->landlock->handle_net);
  EXPECT_EQ(back->landlock->connect_tcp, std::vector<uint16_t>{3128});
  w.landlock.reset();
  back = guest::walls_from_json(guest::walls_to_json(w), &why);
  ASSERT_TRUE(back) << why;
  EXPECT_FALSE(back->landlock);

  struct Bad {
    const char* json;
    const char* field;
  };
  for (const Bad& b : {Bad{R"([])", "walls: not an object"},
                       {R"({"seccomp":1,"pids":0,"landlock":null})", "walls.seccomp"},
                       {R"({"seccomp":true,"pids":-1,"landlock":null})", "walls.pids"},
                       {R"({"seccomp":true,"pids":4194305,"landlock":null})", "walls.pids"},
                       {R"({"seccomp":true,"pids":0})", "walls.landlock"},
                       {R"({"seccomp":true,"pids":0,"landlock":null,"x":1})", "walls.x: unknown field"},
                       {R"({"seccomp":true,"pids":0,"landlock":{"read_only":["rel"]}})", "walls.landlock.read_only"},
                       {R"({"seccomp":true,"pids":0,"landlock":{"bogus":true}})", "walls.landlock.bogus"}}) {
    why.clear();
    EXPECT_FALSE(guest::walls_from_json(nlohmann::json::parse(b.json), &why)) << b.json;
    EXPECT_NE(why.find(b.field), std::string::npos) << b.json << ": " << why;
  }
  // A complete rule set but one bad port.
  auto j = guest::walls_to_json(guest::Walls{true, walls::LandlockRules{}, 0});
  j["landlock"]["bind_tcp"] = {70000};
  EXPECT_FALSE(guest::walls_from_json(j, &why));
  EXPECT_NE(why.find("walls.landlock.bind_tcp"), std::string::npos) << why;
}

// Egress, the resolver and transparent capture are all carried into the
// guest (egress_bridge.hpp): nothing to caution about, and -v says so.
TEST(MicrovmLayer, EgressResolverAndTransparentCarried) {
  plan::Plan p;
  MicrovmLayer l({}, {});
  p.network.allowed_domains.push_back({"pypi.org", {}});
  p.proxy.enabled = p.proxy.resolver = p.proxy.transparent = true;
  p.network.resolver = true;
  EXPECT_TRUE(l.cautions(p).empty());
  std::string text;
  for (const auto& line : describe_layer(p, {})) text += line + "\n";
  EXPECT_NE(text.find("transparent egress: carried into the guest"), std::string::npos) << text;
  EXPECT_NE(text.find("guest resolver: 127.0.0.53:53"), std::string::npos) << text;
  EXPECT_EQ(text.find("not carried"), std::string::npos) << text;
}

// launch.cpp gives every configuration the egress port (one template serves
// sandboxes with and without a proxy); whether it is used comes in the boot
// frame, never on the kernel command line.
TEST(MicrovmQemu, EgressPortOnlyWhenAsked) {
  VmSpec s;
  s.vmm = "/q";
  s.channel_fd = 3;
  auto a = QemuMicrovm().command(s);
  for (const auto& x : a) EXPECT_EQ(x.find("exg.egress"), std::string::npos) << x;
  s.egress_fd = 4;
  a = QemuMicrovm().command(s);
  EXPECT_TRUE(has(a, "socket,id=egress,fd=4"));
  EXPECT_TRUE(has(a, "virtserialport,chardev=egress,name=exg.egress"));
  EXPECT_EQ(after(a, "-append").find("exg."), std::string::npos);
  for (const auto& x : a) EXPECT_EQ(x.find("netdev"), std::string::npos) << x;  // still no NIC
}

// A layer whose pid 1 is always the agent, which must never be launched here.
class AgentOnlyLayer final : public layer::Layer {
 public:
  bool launched = false;
  layer::Kind kind() const override { return layer::Kind::Microvm; }
  std::vector<std::string> describe(const plan::Plan&) const override { return {"layer: microvm"}; }
  layer::Enforcement enforces(const plan::Plan&) const override { return {}; }
  bool command_through_agent() const override { return true; }
  Result<layer::Sandbox> launch(const plan::Plan&, const layer::LaunchOptions&) override {
    launched = true;
    return fail(Error::msg("test", "launch must not be reached"));
  }
};

class SilentIo final : public sandbox::SupervisorIo {
 public:
  std::vector<std::string> lines;
  void say(const std::string& line) override { lines.push_back(line); }
};

TEST(MicrovmLayer, SuperviseRefusesItWithoutAnAgentFrontEnd) {
  AgentOnlyLayer l;
  SilentIo io;
  plan::Plan p;
  auto r = sandbox::supervise(l, p, io, {});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().str().find("runs the command through its agent"), std::string::npos) << r.error().str();
  EXPECT_FALSE(l.launched);
}

}  // namespace
}  // namespace exg::microvm
