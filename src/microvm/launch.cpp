#include "microvm/launch.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "agent/protocol.hpp"
#include "microvm/egress_bridge.hpp"
#include "microvm/guest/guest_abi.hpp"
#include "microvm/guest_image.hpp"
#include "microvm/view.hpp"
#include "process/syscalls.hpp"
#include "sandbox/violations.hpp"

namespace exg::microvm {

namespace {

constexpr uint64_t kMiB = 1024 * 1024;
// What qemu needs beside the guest's RAM (its own code, the TCG translation
// cache of 64 MiB, 9p buffers), inside the same cgroup.
constexpr uint64_t kVmmOverheadMiB = 256;
constexpr uint64_t kMinGuestMiB = 128;
constexpr uint64_t kDefaultGuestMaxMiB = 1024;  // without an explicit --memory
// Where qemu's sandbox sees the guest image and the channel's socket.
constexpr char kImageAt[] = "/.exg-vm/image";
constexpr char kRunAt[] = "/.exg-vm/run";
constexpr int kConnectTimeoutMs = 30000;

// The directory of the channel's socket: private to this run, gone once qemu
// has connected (or the launch failed).
struct RunDir {
  std::string dir;
  std::vector<std::string> socks;
  ~RunDir() {
    for (const auto& s : socks) ::unlink(s.c_str());
    if (!dir.empty()) ::rmdir(dir.c_str());
  }
};

// A unix socket qemu connects to (path based: qemu is in another network
// namespace), owned by qemu's host uid when we are root.
Result<UniqueFd> listen_for_qemu(RunDir& run, const std::string& name, const plan::Identity& id) {
  std::string path = run.dir + "/" + name;
  UniqueFd listener(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!listener) return fail(Error::sys("microvm: socket"));
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (path.size() >= sizeof sa.sun_path) return fail(Error::msg("microvm: " + path, "socket path too long"));
  std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path.c_str());
  if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(listener.get(), 1) != 0)
    return fail(Error::sys("microvm: listen on " + path));
  run.socks.push_back(path);
  if (::geteuid() == 0 && id.host_uid != 0 && ::chown(path.c_str(), id.host_uid, id.host_gid) != 0)
    return fail(Error::sys("microvm: chown " + path));
  return listener;
}

// The init's boot frame (guest/guest_abi.hpp): the sandbox's environment and
// working directory. Written before the guest reads anything: it waits in
// the socket's buffer (a few KiB; the buffer holds far more) until the init
// opens the port.
Result<void> send_boot(int channel, const plan::Plan& plan) {
  agent::Frame f{agent::Kind::Request, 0, {{"op", guest::kBootOp}, {"env", plan.env}, {"cwd", plan.cwd}}, {}};
  std::string bytes = agent::encode(f);
  if (bytes.size() > agent::kFixedBytes + agent::kMaxHeader + agent::kPrefixBytes)
    return fail(Error::msg("microvm: the sandbox's environment", "too large for the guest's boot frame (64 KiB)"));
  size_t off = 0;
  while (off < bytes.size()) {
    ssize_t w = ::send(channel, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return fail(Error::sys("microvm: send the guest's boot frame"));
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

// qemu's stdin is /dev/null (the agent carries the command's stdin), its
// stdout the host's stderr (the guest console: errors only): set around the
// clone, which inherits them, and put back after.
struct StdioForQemu {
  int saved0 = -1, saved1 = -1;
  StdioForQemu() {
    saved0 = ::fcntl(0, F_DUPFD_CLOEXEC, 3);
    saved1 = ::fcntl(1, F_DUPFD_CLOEXEC, 3);
    int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null >= 0) {
      ::dup2(null, 0);
      ::close(null);
    }
    ::dup2(2, 1);
  }
  ~StdioForQemu() {
    if (saved0 >= 0) ::dup2(saved0, 0), ::close(saved0);
    if (saved1 >= 0) ::dup2(saved1, 1), ::close(saved1);
  }
};

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

}  // namespace

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
  l.push_back("  guest kernel: " + (img ? img->kernel + " (" + img->kernel_version + ")" : img.error().str()));
  l.push_back("  guest RAM: " + (mem ? std::to_string(*mem) + "M" : mem.error().str()) +
              ", 1 vCPU; qemu runs in the plan's process-layer sandbox below, the cgroup holds both");
  l.push_back(std::string("  guest's root: the view below, exported over 9p from ") + kViewRoot +
              " in qemu's sandbox; own /proc, /sys, /dev in the guest");
  l.push_back(plan.proxy.enabled
                  ? "  guest network: no NIC; its 127.0.0.1:3128 and :1080 carried over a virtio-serial port to the proxy"
                  : "  guest network: none (no NIC, no egress)");
  l.push_back(opt.guest_root ? std::string("  runs as root inside the guest (--microvm-root); qemu as uid ") +
                                  std::to_string(plan.identity.host_uid) + " on the host"
                            : "  runs as uid " + std::to_string(plan.identity.inside_uid) + " inside the guest");
  return l;
}

Result<process::Launched> launch(const plan::Plan& plan, const process::LaunchOptions& opt, const LayerOptions& vm) {
  auto img = find_guest_image();
  if (!img) return fail(img.error());
  if (::access(kQemuBinary, X_OK) != 0)
    return fail(Error::msg(std::string("microvm: ") + kQemuBinary, "not found: install Debian's qemu-system-x86"));
  auto mem = guest_memory_mib(plan);
  if (!mem) return fail(mem.error());

  // The channels: unix sockets qemu connects to, in a fresh private directory.
  RunDir run;
  {
    char tmpl[] = "/tmp/exguardian-microvm-XXXXXX";
    if (!::mkdtemp(tmpl)) return fail(Error::sys("microvm: mkdtemp /tmp/exguardian-microvm-*"));
    run.dir = tmpl;
  }
  const auto& id = plan.identity;
  if (::geteuid() == 0 && id.host_uid != 0 && ::chown(run.dir.c_str(), id.host_uid, id.host_gid) != 0)
    return fail(Error::sys("microvm: chown " + run.dir));
  auto agent_listener = listen_for_qemu(run, "agent.sock", id);
  if (!agent_listener) return fail(agent_listener.error());
  UniqueFd& listener = *agent_listener;
  // Egress: a second port, its streams bridged to the proxy (egress_bridge.hpp).
  std::unique_ptr<EgressBridge> bridge;
  UniqueFd egress_listener;
  if (plan.proxy.enabled) {
    auto b = EgressBridge::make();
    if (!b) return fail(b.error());
    bridge = std::move(*b);
    auto e = listen_for_qemu(run, "egress.sock", id);
    if (!e) return fail(e.error());
    egress_listener = std::move(*e);
  }

  // qemu's own sandbox: the plan's view for itself, the guest's view beside it.
  plan::Plan vp = with_exported_view(plan);
  insert_before_seal(vp, {plan::StepKind::BindRo, img->dir, kImageAt, "microvm: the guest kernel and initramfs"});
  insert_before_seal(vp, {plan::StepKind::BindRo, run.dir, kRunAt, "microvm: the agent channel's socket"});
  VmSpec spec;
  spec.vmm = kQemuBinary;
  spec.kernel = std::string(kImageAt) + "/vmlinux";
  spec.initramfs = std::string(kImageAt) + "/initramfs.cpio";
  spec.view_dir = kViewRoot;
  spec.channel_socket = std::string(kRunAt) + "/agent.sock";
  if (bridge) spec.egress_socket = std::string(kRunAt) + "/egress.sock";
  spec.memory_mib = *mem;
  spec.accel = vm.accel;
  if (vm.accel == Accel::Tcg) spec.tsc_khz = host_tsc_khz();
  spec.guest_uid = vm.guest_root ? 0 : id.inside_uid;
  spec.guest_gid = vm.guest_root ? 0 : id.inside_gid;
  spec.hostname = plan.hostname;
  spec.name = "exguardian-" + plan.sandbox_id;
  spec.verbose = opt.verbose;
  vp.argv = QemuMicrovm().command(spec);
  vp.env = {"PATH=/usr/bin:/bin", "HOME=/"};
  vp.cwd = "/";

  process::LaunchOptions qo = opt;
  qo.agent = false;
  for (bool& t : qo.tty_fds) t = false;
  Result<process::Launched> l = [&] {
    StdioForQemu stdio;
    return process::launch(vp, qo);
  }();
  if (!l) return fail(l.error());

  // qemu connects while it starts; its sandbox ending first means it failed
  // (its own message is on stderr already).
  auto kill_vm = [&] {
    sys::pidfd_send_signal(l->pidfd.get(), SIGKILL);
    ::waitpid(l->pid, nullptr, 0);
    l->cgroup.kill_all();
  };
  // Meanwhile qemu's start-up probes (io_uring_setup) hit the sandbox's
  // filter, whose refusals wait for an answer: answered here (not audited:
  // nothing of the command runs yet), by the supervisor from then on.
  std::optional<sandbox::SyscallViolations> early;
  if (l->seccomp_listener) early.emplace(UniqueFd(::fcntl(l->seccomp_listener.get(), F_DUPFD_CLOEXEC, 3)), nullptr);
  int r;
  pollfd pf[3] = {{listener.get(), POLLIN, 0}, {l->pidfd.get(), POLLIN, 0}, {early ? early->fd() : -1, POLLIN, 0}};
  for (int waited = 0;;) {
    r = ::poll(pf, 3, 100);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) break;
    if (pf[2].revents & POLLIN) early->on_readable();
    if (pf[2].revents & (POLLHUP | POLLERR)) pf[2].fd = -1;
    if (pf[0].revents || pf[1].revents) break;
    if (r == 0 && (waited += 100) >= kConnectTimeoutMs) break;
  }
  if (r <= 0 || !(pf[0].revents & POLLIN)) {
    kill_vm();
    return fail(Error::msg("microvm: qemu", r == 0 ? "did not connect to the agent's channel within 30 s"
                                                    : "ended before it connected to the agent's channel"));
  }
  UniqueFd ch(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  if (!ch) {
    int e = errno;
    kill_vm();
    return fail(Error::sys("microvm: accept the agent's channel", e));
  }
  if (auto b = send_boot(ch.get(), plan); !b) {
    kill_vm();
    return fail(b.error());
  }
  l->agent_channel = std::move(ch);
  // The process layer's proxy listeners are in qemu's netns, where no guest
  // connection ever arrives: the bridge's take their place.
  l->http_listener.reset();
  l->socks_listener.reset();
  l->dns_socket.reset();
  if (bridge) {
    // qemu connects its chardevs one after the other at start: this one follows at once.
    pollfd ep{egress_listener.get(), POLLIN, 0};
    UniqueFd eg;
    if (::poll(&ep, 1, kConnectTimeoutMs) == 1) eg.reset(::accept4(egress_listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!eg) {
      kill_vm();
      return fail(Error::msg("microvm: qemu", "did not connect to the egress channel"));
    }
    if (auto s = bridge->start(std::move(eg)); !s) {
      kill_vm();
      return fail(s.error());
    }
    l->http_listener = std::move(bridge->http_listener);
    l->socks_listener = std::move(bridge->socks_listener);
    l->companion = std::shared_ptr<EgressBridge>(std::move(bridge));
  }
  return l;
}

}  // namespace exg::microvm
