#include "microvm/launch.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "agent/protocol.hpp"
#include "egress/transparent.hpp"
#include "microvm/egress_bridge.hpp"
#include "microvm/guest/boot_record.hpp"
#include "microvm/guest/guest_abi.hpp"
#include "microvm/guest_image.hpp"
#include "microvm/qmp.hpp"
#include "microvm/scratch_disk.hpp"
#include "microvm/snapshot.hpp"
#include "microvm/view.hpp"
#include "plan/limits.hpp"
#include "util/syscalls.hpp"

namespace exg::microvm {

namespace {

static_assert(guest::kTransparentPort == egress::kTransparentPort, "the guest's capture listener is the proxy's port");

constexpr uint64_t kMiB = 1024 * 1024;
// What qemu needs beside the guest's RAM (its own code, the TCG translation
// cache of 64 MiB, 9p buffers), inside the same cgroup.
constexpr uint64_t kVmmOverheadMiB = 256;
constexpr uint64_t kMinGuestMiB = 128;
constexpr uint64_t kDefaultGuestMaxMiB = 1024;  // without an explicit --memory
// Where qemu's sandbox sees the guest image.
constexpr char kImageAt[] = "/.exg-vm/image";
// qemu's channels: its ends of socket pairs, passed as these descriptors
// (layer::LaunchOptions::pass_fds, in this order).
constexpr int kQemuAgentFd = 3;
constexpr int kQemuEgressFd = 4;
constexpr int kQemuMonitorFd = 5;
// The scratch disk's file: the next descriptor after the channels.
int qemu_disk_fd(bool monitor) { return monitor ? kQemuMonitorFd + 1 : kQemuMonitorFd; }
constexpr int kConnectTimeoutMs = 30000;
// A cold boot under TCG takes 3-5 s on an idle host, above 10 s on a loaded one.
constexpr int kBootTimeoutMs = 90000;
// The pids limit is the guest's (its own cgroup, guest/walls.hpp); qemu's
// cgroup on the host gets this much room beside it for qemu's own threads
// (vCPU, RCU, I/O, up to 64 9p workers): a thread qemu cannot make aborts it.
constexpr uint32_t kQemuThreads = 256;

// One channel: the host's end and qemu's (passed into its sandbox), a stream
// as a virtio-serial port's chardev takes it.
struct Channel {
  UniqueFd here, qemu;
};
Result<Channel> channel_pair(const char* what) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return fail(Error::sys(std::string("microvm: socketpair for ") + what));
  return Channel{UniqueFd(sv[0]), UniqueFd(sv[1])};
}

// The init's boot frame (guest/guest_abi.hpp): the sandbox's environment,
// working directory, whether egress is served (with the resolver, with the
// transparent capture), the walls around the command and the guest's own
// tmpfs directories. Per sandbox: sent after the boot record, past the point
// where a template is saved.
Result<std::string> boot_frame(const plan::Plan& plan, const LayerOptions& vm) {
  const bool disk = scratch_disk_bytes(plan, vm) > 0;
  agent::Frame f{agent::Kind::Request,
                 0,
                 {{"op", guest::kBootOp},
                  {"env", plan.env},
                  {"cwd", plan.cwd},
                  {"egress", plan.proxy.enabled},
                  {"resolver", plan.proxy.resolver},
                  {"transparent", plan.proxy.transparent},
                  {"walls", guest::walls_to_json(guest_walls(plan, vm))},
                  {"scratch", guest::scratch_to_json(guest_scratch_dirs(plan, disk))},
                  {"disk", disk}},
                 {}};
  std::string bytes = agent::encode(f);
  if (bytes.size() > agent::kFixedBytes + agent::kMaxHeader + agent::kPrefixBytes)
    return fail(Error::msg("microvm: the sandbox's environment", "too large for the guest's boot frame (64 KiB)"));
  return bytes;
}

Result<void> send_all(int channel, const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t w = ::send(channel, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return fail(Error::sys("microvm: send the boot record and frame to the guest"));
    off += static_cast<size_t>(w);
  }
  return {};
}

// Inserted before the plan's "ReadOnly /" (mount points are made in the root
// tmpfs while it is still writable), else at the end.
void insert_before_seal(plan::Plan& p, plan::Step s) {
  auto it = std::find_if(p.steps.begin(), p.steps.end(),
                         [](const plan::Step& x) { return x.kind == plan::StepKind::ReadOnly && x.target == "/"; });
  p.steps.insert(it, std::move(s));
}

// The host's TSC rate (kHz) as /proc/cpuinfo says, which TCG's guest TSC follows; 0 unknown.
uint64_t host_tsc_khz() {
  FILE* f = std::fopen("/proc/cpuinfo", "re");
  if (!f) return 0;
  char line[512];
  double mhz = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "cpu MHz : %lf", &mhz) == 1 || std::sscanf(line, "cpu MHz\t: %lf", &mhz) == 1) break;
  std::fclose(f);
  return mhz > 0 ? static_cast<uint64_t>(mhz * 1000) : 0;
}

// The VM of one configuration; nothing of the sandbox but its name: every
// sandbox of the same configuration boots (or restores) the same guest.
VmSpec vm_spec(const plan::Plan& plan, const LayerOptions& vm, uint64_t mem, bool monitor) {
  VmSpec spec;
  spec.vmm = kQemuBinary;
  spec.kernel = std::string(kImageAt) + "/vmlinux";
  spec.initramfs = std::string(kImageAt) + "/initramfs.cpio";
  spec.view_dir = kViewRoot;
  spec.channel_fd = kQemuAgentFd;
  // With or without a proxy: one template for both (used only when the boot frame says egress).
  spec.egress_fd = kQemuEgressFd;
  if (monitor) spec.monitor_fd = kQemuMonitorFd;
  if (scratch_disk_bytes(plan, vm) > 0) spec.disk_fd = qemu_disk_fd(monitor);
  spec.memory_mib = mem;
  spec.accel = vm.accel;
  if (vm.accel == Accel::Tcg) spec.tsc_khz = host_tsc_khz();
  spec.name = "exguardian-" + plan.sandbox_id;
  return spec;
}

}  // namespace

uint64_t scratch_disk_bytes(const plan::Plan& plan, const LayerOptions& opt) {
  if (!opt.guest_root) return 0;
  return plan.limits.scratch_disk_bytes.value_or(kDefaultScratchDiskBytes);
}

guest::Walls guest_walls(const plan::Plan& plan, const LayerOptions& opt) {
  guest::Walls w;
  w.seccomp = plan.seccomp && !opt.guest_root;
  if (!opt.guest_root || plan.landlock.required) w.landlock = plan.landlock;
  w.pids = plan.limits.pids.value_or(0);
  return w;
}

Result<uint64_t> guest_memory_mib(const plan::Plan& plan) {
  uint64_t limit = plan.limits.memory_bytes.value_or(2048 * kMiB) / kMiB;
  if (limit < kMinGuestMiB + kVmmOverheadMiB)
    return fail(Error::msg("microvm: memory limit " + std::to_string(limit) + "M",
                           "too small for a guest: at least " + std::to_string(kMinGuestMiB + kVmmOverheadMiB) +
                               "M (" + std::to_string(kMinGuestMiB) + "M guest RAM + " +
                               std::to_string(kVmmOverheadMiB) + "M for qemu)"));
  uint64_t mem = limit - kVmmOverheadMiB;
  if (!plan.limits.explicit_memory) mem = std::min(mem, kDefaultGuestMaxMiB);
  return mem;
}

std::vector<std::string> describe_layer(const plan::Plan& plan, const LayerOptions& opt) {
  auto mem = guest_memory_mib(plan);
  auto img = find_guest_image();
  std::vector<std::string> l;
  l.push_back(std::string("layer: microvm (qemu -M microvm, ") + to_string(opt.accel) + ")");
  if (!opt.accel_why.empty()) l.push_back("  accelerator: " + opt.accel_why);
  l.push_back("  guest kernel: " + (img ? img->kernel + " (" + img->kernel_version + ")" : img.error().str()));
  l.push_back("  guest RAM: " + (mem ? std::to_string(*mem) + "M" : mem.error().str()) +
              ", 1 vCPU; qemu runs in the plan's process-layer sandbox below, the cgroup holds both");
  l.push_back(std::string("  guest's root: the view below, exported over 9p from ") + kViewRoot +
              " in qemu's sandbox; own /proc, /sys, /dev in the guest");
  std::string own;
  for (const auto& d : guest_scratch_dirs(plan)) own += " " + d.path;
  if (!own.empty())
    l.push_back("  the guest's own tmpfs (local files: Unix sockets work there):" + own +
                "; what the plan mounts below them is carried from the view");
  l.push_back(snapshots_enabled()
                  ? "  start: restored from this configuration's saved template (first use: a cold boot that saves it)"
                  : "  start: cold boot (EXG_MICROVM_SNAPSHOT=off)");
  l.push_back(plan.proxy.enabled
                  ? "  guest network: no NIC; its 127.0.0.1:3128 and :1080 carried over a virtio-serial port to the proxy"
                  : "  guest network: none (no NIC, no egress)");
  if (plan.proxy.resolver)
    l.push_back("  guest resolver: 127.0.0.53:53 in the guest, each query carried over the same port to the proxy's resolver");
  if (plan.proxy.transparent)
    l.push_back("  transparent egress: carried into the guest: nftables in the guest kernel redirect its TCP to "
                "127.0.0.1:" + std::to_string(guest::kTransparentPort) +
                ", carried with the destination to the proxy's transparent listener; other UDP and IP dropped");
  if (uint64_t disk = scratch_disk_bytes(plan, opt))
    l.push_back("  scratch disk: " + plan::format_bytes(disk) + " (sparse, unnamed, in " + scratch_disk_dir() +
                "; ext4 in the guest: /etc, /var/lib and /var/cache as overlays of the view with their writes on it, /var/tmp "
                "on it; ENOSPC in the guest when full; gone with the sandbox)");
  l.push_back(opt.guest_root ? std::string("  runs as root inside the guest (--microvm-root); qemu as uid ") +
                                  std::to_string(plan.identity.host_uid) + " on the host"
                            : "  runs as uid " + std::to_string(plan.identity.inside_uid) + " inside the guest");
  l.push_back("  in the guest: " + guest_walls_text(plan, opt));
  return l;
}

std::string guest_walls_text(const plan::Plan& plan, const LayerOptions& opt) {
  guest::Walls w = guest_walls(plan, opt);
  std::string t = w.seccomp ? "the process layer's seccomp rules (errno-only: no supervisor inside, not audited)"
                  : !plan.seccomp ? "no seccomp filter (--unsafe-no-seccomp)"
                                  : "no seccomp filter (root inside the guest)";
  t += w.landlock ? std::string(", the plan's Landlock rules") +
                        (w.landlock->required ? " (required)" : " (where the guest kernel has Landlock)")
                  : ", no Landlock (root inside the guest)";
  t += w.pids ? ", pids limit " + std::to_string(w.pids) + " (its own cgroup)" : ", no pids limit";
  return t;
}

namespace {

enum class Start { Cold, ColdSave, Restore };

std::string boot_record(const plan::Plan& plan, const LayerOptions& vm) {
  guest::BootRecord r;
  r.uid = vm.guest_root ? 0 : plan.identity.inside_uid;
  r.gid = vm.guest_root ? 0 : plan.identity.inside_gid;
  r.hostname = plan.hostname;
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  r.time_sec = now.tv_sec;
  r.time_nsec = now.tv_nsec;
  unsigned char seed[guest::kSeedBytes];
  size_t got = 0;
  while (got < sizeof seed) {
    ssize_t n = ::getrandom(seed + got, sizeof seed - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return "";
    got += static_cast<size_t>(n);
  }
  static const char hex[] = "0123456789abcdef";
  for (unsigned char b : seed) r.seed_hex += hex[b >> 4], r.seed_hex += hex[b & 15];
  return guest::format_boot_record(r);
}

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

Result<process::Launched> launch_as(const plan::Plan& plan, const process::LaunchOptions& opt, const LayerOptions& vm,
                                    const GuestImage& img, uint64_t mem, Start how, std::optional<Template>& tmpl,
                                    const std::string& key) {
  auto t0 = std::chrono::steady_clock::now();
  const bool monitor = how != Start::Cold;
  auto frame = boot_frame(plan, vm);
  if (!frame) return fail(frame.error());
  // The channels (agent, egress, QMP): socket pairs, qemu's ends passed into
  // its sandbox as descriptors; no socket has a path anywhere.
  auto agent = channel_pair("the agent's channel");
  if (!agent) return fail(agent.error());
  // Egress: a second port, its streams bridged to the proxy (egress_bridge.hpp).
  // There in every configuration (the template's device set).
  auto egress = channel_pair("the egress channel");
  if (!egress) return fail(egress.error());
  std::unique_ptr<EgressBridge> bridge;
  if (plan.proxy.enabled) {
    auto b = EgressBridge::make();
    if (!b) return fail(b.error());
    bridge = std::move(*b);
  }
  // The scratch disk (guest root only): made before qemu, given to it as a descriptor.
  std::optional<ScratchDisk> disk;
  if (uint64_t bytes = scratch_disk_bytes(plan, vm)) {
    auto d = make_scratch_disk(bytes);
    if (!d) return fail(d.error());
    disk = std::move(*d);
  }
  std::optional<Channel> monitor_pair;
  if (monitor) {
    auto q = channel_pair("its monitor");
    if (!q) return fail(q.error());
    monitor_pair = std::move(*q);
  }

  // qemu's own sandbox: the plan's view for itself, the guest's view beside it.
  plan::Plan vp = with_exported_view(plan);
  if (vp.limits.pids) {
    vp.limits.pids = *vp.limits.pids + kQemuThreads;
    vp.limits.explicit_pids = false;  // enforced in the guest; qemu's room is ours, not the user's limit
  }
  insert_before_seal(vp, {plan::StepKind::BindRo, img.dir, kImageAt, "microvm: the guest kernel and initramfs"});
  if (vm.accel == Accel::Kvm)  // proved by a guest boot (accel_probe.hpp); untested on TCG-only hosts
    insert_before_seal(vp, {plan::StepKind::DevNode, "/dev/kvm", "/dev/kvm", "microvm: KVM for qemu"});
  VmSpec spec = vm_spec(plan, vm, mem, monitor);
  spec.incoming = how == Start::Restore;
  // The kernel's boot messages on -v only for a cold boot that saves nothing:
  // a template's command line is the same with and without -v.
  spec.verbose = opt.verbose && how == Start::Cold;
  vp.argv = QemuMicrovm().command(spec);
  vp.env = {"PATH=/usr/bin:/bin", "HOME=/"};
  vp.cwd = "/";

  process::LaunchOptions qo = opt;
  qo.agent = false;
  qo.freezer = opt.agent;  // a session's guest: serve pauses qemu through its freezer cgroup
  for (bool& t : qo.tty_fds) t = false;
  // qemu's stdin is /dev/null (the agent carries the command's stdin), its
  // stdout the host's stderr (the guest console: errors only). Given to its
  // sandbox alone (LaunchOptions::stdio_fds): this process's own 0 and 1 stay,
  // so it can launch other sandboxes meanwhile.
  UniqueFd null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!null) return fail(Error::sys("open /dev/null for qemu's stdin"));
  qo.stdio_fds[0] = null.get();
  qo.stdio_fds[1] = 2;
  qo.stdio_fds[2] = -1;
  qo.pass_fds = {agent->qemu.get(), egress->qemu.get()};  // kQemuAgentFd, kQemuEgressFd
  if (monitor_pair) qo.pass_fds.push_back(monitor_pair->qemu.get());  // kQemuMonitorFd
  if (disk) qo.pass_fds.push_back(disk->fd.get());                     // qemu_disk_fd(monitor)
  Result<process::Launched> l = process::launch(vp, qo);
  // qemu's ends are its own now: one that ends closes them all, and the host's reads see it.
  agent->qemu.reset();
  egress->qemu.reset();
  if (monitor_pair) monitor_pair->qemu.reset();
  disk.reset();  // qemu's now: the file goes when qemu ends
  if (!l) return fail(l.error());

  auto kill_vm = [&] {
    sys::pidfd_send_signal(l->pidfd.get(), SIGKILL);
    ::waitpid(l->pid, nullptr, 0);
    l->cgroup.kill_all();
  };
  // Meanwhile qemu's start-up probes (io_uring_setup) hit the sandbox's
  // filter, whose refusals wait for an answer: answered here (not audited:
  // nothing of the command runs yet), by the supervisor from then on.
  // (The supervisor's judgement, through opt.early_refusals: qemu reaches no Unix socket by name.)
  std::unique_ptr<layer::EarlyRefusals> early;
  if (l->seccomp_listener) {
    if (!opt.early_refusals) {
      kill_vm();
      return fail(Error::msg("microvm: qemu's seccomp refusals",
                             "nothing answers them before the supervisor's loop (LaunchOptions::early_refusals unset)"));
    }
    early = opt.early_refusals(UniqueFd(::fcntl(l->seccomp_listener.get(), F_DUPFD_CLOEXEC, 3)),
                               UniqueFd(l->sock_diag ? ::fcntl(l->sock_diag.get(), F_DUPFD_CLOEXEC, 3) : -1));
  }
  // Waits until `fd` is readable: 1; 0 on timeout; -1 when qemu ended first.
  auto wait_readable = [&](int fd, int timeout_ms) {
    pollfd pf[3] = {{fd, POLLIN, 0}, {l->pidfd.get(), POLLIN, 0}, {early ? early->fd() : -1, POLLIN, 0}};
    for (int waited = 0;;) {
      int r = ::poll(pf, 3, 100);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return -1;
      if (pf[2].revents & POLLIN) early->on_readable();
      if (pf[2].revents & (POLLHUP | POLLERR)) pf[2].fd = -1;
      if (pf[0].revents) return 1;
      if (pf[1].revents) return -1;
      if (r == 0 && (waited += 100) >= timeout_ms) return 0;
    }
  };
  UniqueFd* ch = &agent->here;
  UniqueFd* eg = &egress->here;
  std::optional<Qmp> qmp;
  if (monitor) {
    qmp.emplace(std::move(monitor_pair->here), kConnectTimeoutMs);
    if (early) qmp->serve_meanwhile(early->fd(), [&] { early->on_readable(); });
    if (auto q = qmp->start(); !q) {
      kill_vm();
      return fail(q.error());
    }
  }
  std::string started;
  if (how == Start::Restore) {
    if (auto r = restore_template(*qmp, tmpl->fd.get()); !r) {
      kill_vm();
      return fail(r.error());
    }
    started = "restored from the template " + tmpl->path;
  } else {
    // The guest's init says it is parked at the hand-over point once booted.
    const std::string want = guest::kParkedLine;
    std::string got;
    while (got.size() < want.size()) {
      int w = wait_readable(ch->get(), kBootTimeoutMs);
      char b[64];
      ssize_t n = w == 1 ? ::read(ch->get(), b, std::min(sizeof b, want.size() - got.size())) : -1;
      if (n < 0 && w == 1 && errno == EINTR) continue;
      if (n <= 0) {
        kill_vm();
        return fail(Error::msg("microvm: the guest", w == 0 ? "did not boot within " + std::to_string(kBootTimeoutMs / 1000) + " s"
                                                            : "ended during its boot (its console's messages are above)"));
      }
      got.append(b, static_cast<size_t>(n));
    }
    if (got != want) {
      kill_vm();
      return fail(Error::msg("microvm: the guest", "said something else than parked at its boot"));
    }
    started = "cold boot";
    if (how == Start::ColdSave) {
      auto ts = std::chrono::steady_clock::now();
      auto saved = save_template(*qmp, key);
      char ms[32];
      std::snprintf(ms, sizeof ms, "%.0f", ms_since(ts));
      started += saved ? ", template saved to " + *saved + " in " + ms + " ms" : ", no template saved: " + saved.error().str();
      // A failed save leaves the guest running (save_template's cont): it serves this sandbox cold.
      if (!saved && !qmp->execute("query-status")) {
        kill_vm();
        return fail(Error::msg("microvm: qemu", "ended while its template was saved"));
      }
    }
  }
  // Who this sandbox is, its clock and its entropy, then its env, cwd and
  // egress (the boot frame): the guest goes on from here.
  std::string rec = boot_record(plan, vm);
  if (rec.empty()) {
    kill_vm();
    return fail(Error::sys("microvm: the boot record's seed (getrandom)"));
  }
  rec += *frame;
  if (auto b = send_all(ch->get(), rec); !b) {
    kill_vm();
    return fail(b.error());
  }
  if (opt.verbose) {
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.0f", ms_since(t0));
    layer::say(opt, "microvm: " + started + ", guest up in " + ms + " ms");
  }
  l->agent_channel = std::move(*ch);
  // The process layer's proxy sockets are in qemu's netns, where no guest
  // connection or query ever arrives: the bridge's take their place.
  l->http_listener.reset();
  l->socks_listener.reset();
  l->dns_socket.reset();
  l->transparent_listener.reset();
  if (bridge) {
    if (auto s = bridge->start(std::move(*eg)); !s) {
      kill_vm();
      return fail(s.error());
    }
    l->http_listener = std::move(bridge->http_listener);
    l->socks_listener = std::move(bridge->socks_listener);
    if (plan.proxy.resolver) l->dns_socket = std::move(bridge->dns_listener);
    if (plan.proxy.transparent) l->transparent_listener = std::move(bridge->transparent_listener);
    l->relayed_egress = true;
    l->companion = std::shared_ptr<EgressBridge>(std::move(bridge));
  }
  return l;
}

}  // namespace

Result<process::Launched> launch(const plan::Plan& plan, const process::LaunchOptions& opt, const LayerOptions& vm) {
  auto img = find_guest_image();
  if (!img) return fail(img.error());
  if (::access(kQemuBinary, X_OK) != 0)
    return fail(Error::msg(std::string("microvm: ") + kQemuBinary, "not found: install Debian's qemu-system-x86"));
  auto mem = guest_memory_mib(plan);
  if (!mem) return fail(mem.error());
  if (!snapshots_enabled()) {
    std::optional<Template> none;
    return launch_as(plan, opt, vm, *img, *mem, Start::Cold, none, "");
  }
  // The key from the command line of this configuration (every sandbox's is
  // the same but for the VM's name), with the monitor a template needs.
  auto key = template_key(*img, QemuMicrovm().command(vm_spec(plan, vm, *mem, true)));
  if (!key) return fail(key.error());
  std::optional<Template> tmpl = find_template(*key);
  if (!tmpl) return launch_as(plan, opt, vm, *img, *mem, Start::ColdSave, tmpl, *key);
  auto l = launch_as(plan, opt, vm, *img, *mem, Start::Restore, tmpl, *key);
  if (l) return l;
  // A template that does not restore (another qemu build, a damaged file) is
  // dropped when it is ours, and this sandbox boots cold (saving a new one).
  layer::say(opt, "microvm: " + tmpl->path + ": " + l.error().str() + "; booting cold");
  struct stat st;
  if (::fstat(tmpl->fd.get(), &st) == 0 && st.st_uid == ::geteuid()) ::unlink(tmpl->path.c_str());
  tmpl.reset();
  return launch_as(plan, opt, vm, *img, *mem, Start::ColdSave, tmpl, *key);
}

}  // namespace exg::microvm
