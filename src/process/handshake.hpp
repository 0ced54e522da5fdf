// The setup socket's handshake, both halves: the supervisor's (spawn.cpp) and
// the sandbox's first process's (the process layer's child and init, the OCI
// layers' runtime host). The message table and the helpers both halves use.
//
// Protocol on the setup socket (SOCK_SEQPACKET), the first byte the type:
//   parent -> child  G[PEM]           id maps written, go on
//                    I + fds          the idmapped mounts' trees, in step
//                                     order, up to 8 a message (made after
//                                     "go", taken before the mounts)
//                    C [+ fds]        the sandbox's cgroup is ready (v1: with
//                                     its tasks files, to move in through):
//                                     nothing of the sandbox may start before
//                                     the child has read it (init, the runtime)
//                    K                init's seccomp listener is taken (read by
//                                     init's command before its execve, or by
//                                     init itself before it serves an agent)
//   child -> parent  P + fd           pty master
//                    L + fd fd [fd]   HTTP and SOCKS listeners [DNS socket]
//                    D + fd           a NETLINK_SOCK_DIAG socket of the sandbox's netns
//                    T + fd fd fd     transparent egress: its listener, and
//                                     rtnetlink and nftables sockets of the
//                                     sandbox's netns, on which this side sends
//                                     the capture's route and rules
//                                     (SpawnSpec::capture_port: "C" waits for them)
//                    S number         init's seccomp listener, by its number
//                                     ("R" follows "K": init serving an agent)
//                    A number         init's seccomp listener, by its number, and
//                                     its last word: everything else is set up,
//                                     and once "K" is sent the sandbox is ready
//                                     (no "R": init's command reads "K" before
//                                     its execve and says nothing more)
//                    R [+ fd]         set up; the seccomp notify fd when there is one
//                    E text           a setup step failed
//
// The child's helpers allocate nothing (they run in the cloned child), but
// die(), whose message is built as a string.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "util/unique_fd.hpp"

namespace exg {
class StepTimer;
}

namespace exg::process {

// Messages on the sync socket (SOCK_SEQPACKET), first byte is the type.
inline constexpr char kMsgGo = 'G';      // parent -> child: id maps written, go on
inline constexpr char kMsgIdmapped = 'I';  // parent -> child: idmapped mounts' trees (SCM_RIGHTS), in step order
inline constexpr char kMsgInCgroup = 'C';  // parent -> child: the sandbox's cgroup is ready (v1: + its tasks files); init may start
inline constexpr char kMsgPty = 'P';     // child -> parent: pty master fd attached (SCM_RIGHTS)
inline constexpr char kMsgListeners = 'L';  // child -> parent: proxy listeners (HTTP, SOCKS5[, DNS UDP]) made in the sandbox's netns
inline constexpr char kMsgSockDiag = 'D';  // child -> parent: a NETLINK_SOCK_DIAG socket of the sandbox's netns (sandbox/socket_address_gate.hpp)
inline constexpr char kMsgTransparent = 'T';  // child -> parent: the transparent egress listener and netlink sockets (process/transparent_capture.hpp)
inline constexpr char kMsgSeccomp = 'S';  // init -> parent: its seccomp listener's descriptor number, as text (hand_over_listener)
inline constexpr char kMsgSeccompLast = 'A';  // init -> parent: the same, and ready once "K" is sent (offer_listener)
inline constexpr char kMsgListenerTaken = 'K';  // parent -> init: the listener is taken (pidfd_getfd); init closes its copy
inline constexpr char kMsgReady = 'R';   // child -> parent: set up, command started (an OCI runtime host: the listener attached)
inline constexpr char kMsgError = 'E';   // child -> parent: setup failed, text follows
inline constexpr size_t kMaxTrustAnchor = 16384;  // the PEM that may follow kMsgGo

// ---- the parent's half (process/spawn.cpp) ----

// "Go", followed by the trust anchor when there is one. False (errno set)
// when it did not go out whole.
bool send_go(int sock, std::string_view trust_anchor);
// "I": the trees, in order, up to kMaxPassedFds a message. 0 or the errno
// of the send that failed.
int send_idmapped_trees(int sock, const std::vector<UniqueFd>& trees);
// "C", with the v1 tasks files (at most kMaxPassedFds; none on v2). 0 or errno.
int send_in_cgroup(int sock, const std::vector<UniqueFd>& tasks);
// "K": init's listener is taken. False (errno set) when not sent.
bool send_listener_taken(int sock);

// ---- the child's half ----

// Waits for "go". The PEM that came with it into *trust_anchor (nullptr:
// the caller takes none). False when the parent sent something else or is gone.
bool await_go(int sync_fd, std::string* trust_anchor);
// The same without a copy: the PEM as a view into this process's static
// buffer, valid while nothing else reads "go" (nothing allocated: for a
// child that must not, the landlock layer's).
bool await_go_view(int sync_fd, std::string_view* trust_anchor);

// The child's side of "I": takes `count` trees, in order, into `trees`. False
// when the parent sent something else or is gone (what came is closed). No
// allocation.
bool await_idmapped_trees(int sync_fd, int* trees, size_t count);

// The child's side of "in cgroup": waits for it and, on v1, moves itself into
// the sandbox's cgroup through the tasks files that came with it (the timer's
// "cgroup attach"). 0 when in; -1 when the message was not "in cgroup" (the
// parent is gone or said something else); else the errno of the move. No
// allocation: it runs in the cloned child. `moved` (unless null): whether it
// moved into a v1 cgroup made after the clone (the message carried its tasks
// files; none when no cgroup could be made, SpawnFds::cgroup_made).
int await_in_cgroup(int sync_fd, StepTimer* timer, bool* moved = nullptr);

// The seccomp listener to the supervisor, by its descriptor number. Not the
// descriptor itself (SCM_RIGHTS): init is under the filter now, which sends
// every sendmsg() to the supervisor (sandbox/socket_address_gate.hpp), and
// the supervisor has no listener yet to hear it: init would wait forever.
// send() is not judged; the supervisor takes the descriptor (pidfd_getfd,
// which needs init dumpable: see the caller) and says so; then init closes
// its copy. False when the supervisor did not answer.
bool hand_over_listener(int sync_fd, int listener);
// Its two halves, for a caller that waits for "taken" in another process
// (init's command, before its execve: process/init.cpp) and has set up
// everything else: "A" sent (the supervisor counts the sandbox ready once it
// has answered "K": no "R" follows, and it does not wait for one), false when
// it did not go out; "K" read, false when something else came or the
// supervisor is gone. No allocation.
bool offer_listener(int sync_fd, int listener);
bool await_listener_taken(int sync_fd);

// "Ready": set up, the command started; with the seccomp listener when
// there is one to pass (an OCI runtime host's: it is under no filter).
void send_ready(int sync_fd, int listener = -1);

// "E": what failed (and strerror(err) when err != 0), then exit 125.
[[noreturn]] void die(int sync_fd, const std::string& what, int err);

}  // namespace exg::process
