// `exguardian session`'s front end: a control socket (unix:PATH, owner-only,
// peers of the same uid only) whose clients' frames are relayed to the agent
// and back. Request ids are rewritten (each client numbers its own); a
// process's output and exit go to the client that started or attached it, a
// watch's events to the client that set it. Clients come and go; the sandbox
// stays until `shutdown`, its timeout, or the supervisor's end. One request,
// set_network and audit_tags, are the supervisor's own: answered here, never relayed. Bounded: at
// most 16 clients, and reading from one side stops while the other side's
// queue is past 8 MiB.
#pragma once
#include <map>
#include <memory>
#include <set>
#include <string>

#include "agent/client.hpp"
#include "agent/front_end.hpp"
#include "agent/inside_report.hpp"

namespace exg::agent {

class ControlRelay : public FrontEnd {
 public:
  // Makes nothing yet: the socket is bound in start(), once the sandbox is up,
  // so its existence means the session is ready.
  explicit ControlRelay(std::string path, bool verbose) : path_(std::move(path)), verbose_(verbose) {}
  ~ControlRelay() override;

  Result<void> start(UniqueFd agent_channel, const std::string& sandbox_id) override;
  size_t poll_fds(pollfd* out, size_t max) override;
  void on_ready(const pollfd* fds, size_t n) override;
  void set_network_changer(NetworkChanger f) override { network_changer_ = std::move(f); }
  void set_audit_tagger(AuditTagger f) override { audit_tagger_ = std::move(f); }
  // SIGTERM/SIGINT/SIGHUP end a session on every layer (the agent exits
  // 128+N); on the microVM layer the signal ends qemu, which exits 0: the
  // session's status is 128+N there too.
  bool forward_signal(int sig) override;
  int final_status(int sandbox_status) override;
  uint64_t inside_pids_refused() const override { return inside_.pids_refused(); }

 private:
  struct Conn {
    Channel ch;
    uint32_t uid = 0;
  };
  struct Pending {
    Conn* client;
    uint32_t client_id;
    std::string op;
    int pid = 0;
    int watch = 0;
  };
  std::string path_;
  bool verbose_;
  std::string sandbox_id_;
  bool user_said_ = false;  // the agent's ready event, said once as "session ID user ..." (relay.cpp)
  UniqueFd listener_;
  Channel agent_;
  InsideReport inside_;  // the walls and limits the agent says it runs in (the microVM guest's)
  std::vector<std::unique_ptr<Conn>> clients_;
  uint32_t next_agent_id_ = 1;
  std::map<uint32_t, Pending> pending_;             // agent-side id -> who asked
  std::map<int, std::set<Conn*>> process_owners_;   // pid -> clients that get its events
  std::map<int, Conn*> watch_owner_;                // watch id -> client

  NetworkChanger network_changer_;  // empty: the sandbox has no egress proxy
  AuditTagger audit_tagger_;        // empty: the audit log is not held (session --audit-hold)

  void accept_client();
  // The supervisor's own requests (not relayed): true when `f` was one.
  bool supervisor_request(Conn* c, const Frame& f);
  void from_client(Conn* c);
  void from_agent();
  void drop(Conn* c);
  bool bound_ = false;
  int ending_signal_ = 0;
};

}  // namespace exg::agent
