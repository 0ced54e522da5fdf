// The host's end of the microVM layer's egress channel (egress_mux.hpp): the
// supervisor's proxy listens on unix sockets of a private directory (in place
// of the TCP and UDP sockets the process layer makes in a sandbox's netns:
// qemu's netns is not the guest's), and each stream the guest opens on the
// `exg.egress` port becomes one connection to one of them, on a thread of
// its own: the explicit proxy's HTTP and SOCKS listeners, the transparent
// listener (the bridge writes the guest's claimed destination first, the
// preamble of egress/transparent.hpp, in place of SO_ORIGINAL_DST) and the
// resolver's stream listener (DNS over TCP framing, egress/dns.hpp). So the
// proxy sees every guest connection and query as it sees a process layer's,
// with the same rules, audit and credential injection.
#pragma once
#include <memory>
#include <string>
#include <thread>

#include "microvm/guest/egress_mux.hpp"
#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace exg::microvm {

class EgressBridge {
 public:
  // Binds the four listeners in a fresh /tmp/exguardian-microvm-egress-XXXXXX
  // (mode 0700) and removes their names at once: only this process reaches
  // them (O_PATH descriptors), nothing is left on disk.
  static Result<std::unique_ptr<EgressBridge>> make();
  ~EgressBridge();
  EgressBridge(const EgressBridge&) = delete;
  EgressBridge& operator=(const EgressBridge&) = delete;

  // The proxy's listening sockets (layer::Sandbox's http_listener,
  // socks_listener, transparent_listener and dns_stream_listener take them).
  UniqueFd http_listener, socks_listener, transparent_listener, dns_listener;

  // Carries the guest's streams from `channel` (the port's socket, qemu's
  // end) until it ends or the bridge is destroyed.
  Result<void> start(UniqueFd channel);

 private:
  EgressBridge() = default;
  // A stream to the proxy for a target; -1 refuses it.
  int connect(egress_mux::Target t, std::string_view destination) const;
  struct Endpoint {
    std::string path;  // after make(): /proc/self/fd/N of the inode below
    UniqueFd inode;    // O_PATH: the bound socket, its name removed
  };
  std::string dir_;
  Endpoint http_, socks_, transparent_, dns_;
  UniqueFd channel_, stop_;
  std::thread thread_;
};

}  // namespace exg::microvm
