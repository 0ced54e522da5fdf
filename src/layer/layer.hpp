// The Layer interface: what runs a Plan. The process layer (process/layer.hpp),
// the container and gVisor layers (oci/layer.hpp) and the microVM layer
// (microvm/layer.hpp) implement it. Everything above a layer (the supervisor, the front ends
// run / session / escape-test, later serve) sees only this interface.
//
// Design
// ------
// A layer is chosen once per sandbox (make_layer: kind + its options) and
// then asked four things:
//   describe(plan)  the lines --dry-run and -v print for the layer, in place
//                   of the layer line of Plan::to_text (the Plan itself is
//                   layer-independent);
//   enforces(plan)  which of the walls it puts up itself (Landlock, seccomp
//                   and who applies it, whether refusals reach the supervisor
//                   through seccomp notify): the supervisor's -v narration and
//                   the evidence read this instead of asking which layer it is;
//   launch(plan)    clone/start the sandbox and hand back a running Sandbox
//                   once it is set up (or an error, with nothing left running);
//   after_run(plan) after the sandbox is gone: what the layer's own machinery
//                   could not clean up when killed (runc's cgroups).
// A layer holds no process-wide state and changes none: the signal mask,
// RLIMIT_NOFILE, the terminal, the supervisor's supplementary groups and the
// sweep of stale cgroups belong to the front end (cli/host_setup.hpp), done
// once per process. launch() may be called for many sandboxes in one process.
//
// A new layer: a class implementing Layer in its own module (as
// src/microvm/ does), a case in make_layer (cli/make_layer.cpp) and its row in
// util/layer_kind.hpp's table. Its launch() must hand back a pidfd whose
// exit is the sandbox's end, the proxy's listening sockets made in the
// sandbox's network (or equivalents the supervisor can accept on), and the
// agent channel when LaunchOptions::agent is set; the spawn helper
// (process/spawn.hpp) does the clone/handshake part for layers that start a
// first process of their own.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cgroup/cgroup.hpp"
#include "plan/plan.hpp"
#include "util/error.hpp"
#include "util/layer_kind.hpp"
#include "util/unique_fd.hpp"

namespace exg {
class StepTimer;
}

namespace exg::layer {

// Answers a sandbox's seccomp notifications while launch() still runs, before
// the supervisor's loop takes the listener over (the microVM layer's qemu
// probes io_uring at its start and waits for each answer). The supervisor
// makes it (LaunchOptions::early_refusals) with its own judgement of syscalls
// and sockets, so that no layer judges them itself; nothing is audited
// (nothing of the command runs yet).
class EarlyRefusals {
 public:
  virtual ~EarlyRefusals() = default;
  virtual int fd() const = 0;      // poll it for POLLIN
  virtual void on_readable() = 0;  // answers one notification
};

struct LaunchOptions {
  bool tty_fds[3] = {false, false, false};  // which of 0..2 get the sandbox's pty
  // What the sandbox's first process gets as fds 0..2 instead of the caller's
  // own (-1: the caller's), so that one process can launch sandboxes with
  // different stdio at once (the microVM layer's qemu), and so that the
  // supervisor's stdio relay stands in for the caller's files (process,
  // container and gVisor layers).
  int stdio_fds[3] = {-1, -1, -1};
  // The supervisor's own ends of the pipes behind stdio_fds (sandbox/stdio_relay.hpp):
  // the sandbox's first process closes them right after the clone (it would
  // otherwise hold the command's stdin open, and its stdout).
  std::vector<int> supervisor_fds;
  // The process layer: descriptors the sandbox's command gets as 3, 4, ...
  // (at most kMaxPassFds; the microVM layer's qemu: its channels, connected
  // sockets whose other ends the host holds, so that qemu needs no socket path).
  std::vector<int> pass_fds;
  bool verbose = false;
  // Plans with trust_bundle steps: called after the clone, before the child
  // goes on; returns the PEM certificate the child appends to those steps'
  // content. What the supervisor makes in it (the CA and its key) is
  // therefore never in the child's copy of the supervisor's memory.
  std::function<Result<std::string>()> trust_anchor;
  // The sandbox's pid 1 is the agent (agent/agent.hpp) instead of the Plan's
  // command: a sandbox that lives across commands, driven over agent_channel.
  bool agent = false;
  // A freezer cgroup (cgroup v1) although the sandbox's pid 1 is not the
  // agent: a microVM's qemu, which serve pauses through it. The agent's
  // sandboxes get one anyway; a plain run's needs none (its kill stops forks
  // with pids.max).
  bool freezer = false;
  // `-v`: the launch's steps are timed here (util/step_timer.hpp), the
  // sandbox side's through the timer's shared page; null: not timed.
  StepTimer* timer = nullptr;
  // What a layer tells the user while it launches (microvm: "guest up in N ms",
  // a template that would not restore): one line, as SupervisorIo::say takes
  // it, so that a server's sandboxes speak to their own front end and never on
  // the server's stderr. Null: stderr with the "exguardian: " prefix.
  std::function<void(const std::string&)> say;
  // The supervisor's own setup that the sandbox's start need not wait for
  // (the egress rules, the workspace's snapshot): every layer runs it once,
  // while the sandbox sets itself up and before anything of it starts (the
  // snapshot must see the workspace as the command will find it). Its failure
  // stops the launch. Null: nothing to run.
  std::function<Result<void>()> meanwhile;
  // Makes the answerer of the refusals that come before the supervisor's loop
  // (EarlyRefusals), from duplicates of the sandbox's seccomp listener and its
  // sock_diag socket (-1: none). Null: a layer that needs one refuses to launch.
  std::function<std::unique_ptr<EarlyRefusals>(UniqueFd listener, UniqueFd sock_diag)> early_refusals;
};

// LaunchOptions::say, or stderr when it is not set.
void say(const LaunchOptions& opt, const std::string& line);

// A running sandbox, as the supervisor drives it.
struct Sandbox {
  pid_t pid = -1;       // the sandbox's first process (its init, or the runtime host), as the host sees it
  UniqueFd pidfd;       // for signals and exit without pid reuse races; its exit is the sandbox's end
  UniqueFd pty_master;  // when a pty was asked for
  cgroup::Cgroup cgroup;  // the sandbox's own cgroup (inactive when none could be made)
  UniqueFd seccomp_listener;  // refused syscalls arrive here (Enforcement::seccomp_notify)
  UniqueFd sock_diag;  // NETLINK_SOCK_DIAG in the sandbox's netns: which Unix sockets it bound (sandbox/socket_address_gate.hpp)
  UniqueFd http_listener, socks_listener;  // the proxy's sockets, in the sandbox's netns
  UniqueFd dns_socket;  // UDP 127.0.0.53:53 in the sandbox's netns (network.resolver / --dns), else empty
  UniqueFd transparent_listener;  // TCP 127.0.0.1:15001 in the sandbox's netns, its redirected TCP (network.transparent)
  // microvm: dns_socket and transparent_listener are the egress bridge's
  // listening unix sockets instead: queries framed as DNS over TCP, captured
  // connections that begin with their destination (egress/transparent.hpp).
  bool relayed_egress = false;
  UniqueFd agent_channel;  // LaunchOptions::agent: the stream socket to the agent (agent/protocol.hpp)
  // The landlock layer: the sandbox shares the host's network namespace. The
  // proxy's listeners are then on the host's loopback, where any host process
  // could reach them: their clients must present proxy_token (the proxy
  // variables inside carry it); and the supervisor's socket gate lets an IPv4
  // or IPv6 connect()/sendto() through only to the loopback address on one of
  // loopback_ports (Landlock's TCP rule names a port, not an address).
  bool host_network = false;
  std::string proxy_token;
  std::vector<uint16_t> loopback_ports;
  // What the layer keeps running beside the sandbox while it lives (microvm:
  // the egress bridge's thread; process: its idmaps' killed holders, reaped
  // here); released with the Sandbox, after the proxy stopped.
  std::shared_ptr<void> companion;
};

// The walls a layer puts up itself, for -v and the evidence.
struct Enforcement {
  bool landlock = false;        // a Landlock domain around the command
  std::string landlock_text;    // -v "landlock: ..." (ABI and scope, or what guards instead)
  bool seccomp = false;         // ExGuardian's syscall profile applies (false: --unsafe-no-seccomp)
  std::string seccomp_by;       // who installs it: "exguardian", "crun", "runc", "exguardian-init" (gVisor)
  bool seccomp_notify = false;  // refusals reach the supervisor (Sandbox::seccomp_listener)
  std::string seccomp_text;     // -v "seccomp: ..."
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual Kind kind() const = 0;
  // --dry-run / -v lines (the first is "layer: NAME..."); pure but for what
  // the layer learnt about the host when it was made.
  virtual std::vector<std::string> describe(const plan::Plan& plan) const = 0;
  virtual Enforcement enforces(const plan::Plan& plan) const = 0;
  // Whether pid 1 can be the agent (exguardian session); why not otherwise.
  virtual Result<void> supports_agent() const { return {}; }
  // Whether pid 1 is always the agent, whatever LaunchOptions::agent says
  // (microvm: the guest's init runs it): a plain run then drives the Plan's
  // command through it (SuperviseOptions::agent must be set; supervise()
  // refuses otherwise).
  virtual bool command_through_agent() const { return false; }
  // Whether a host Unix socket the policy lets through (network.allowUnixSockets,
  // allowAllUnixSockets) reaches the command; supervise() refuses such a plan
  // on a layer that cannot carry one (gVisor's gofer: --host-uds none; the
  // microVM's 9p view carries no sockets), rather than drop it silently.
  virtual bool carries_host_unix_sockets() const { return true; }
  // What the user must hear even without -v: a part of the plan this layer
  // cannot keep yet (said once, before the launch).
  virtual std::vector<std::string> cautions(const plan::Plan& /*plan*/) const { return {}; }
  // Starts the sandbox; on error nothing of it is left running.
  virtual Result<Sandbox> launch(const plan::Plan& plan, const LaunchOptions& opt) = 0;
  // After the sandbox's processes are gone.
  virtual void after_run(const plan::Plan& /*plan*/) {}
};

// Options of the container and gVisor layers (--runtime, --rootfs,
// --gvisor-root) and of the microVM layer (--microvm-root).
struct LayerConfig {
  std::string runtime;  // binary name or path; empty: the layer's default
  std::string rootfs;   // canonical directory; empty: the host's root, read-only
  bool guest_root = false;  // microvm: the command as root inside the guest
  bool gvisor_root = false;  // gvisor: the command as uid 0 of gVisor's kernel (--gvisor-root)
};

// The Plan's text with the layer's describe() lines in place of its layer line.
std::string plan_text(const plan::Plan& plan, const Layer& layer);

}  // namespace exg::layer
