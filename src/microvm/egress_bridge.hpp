// The host's end of the microVM layer's egress channel (egress_mux.hpp): the
// supervisor's proxy listens on two unix sockets of a private directory (in
// place of the TCP listeners the process layer makes in a sandbox's netns:
// qemu's netns is not the guest's), and each stream the guest opens on the
// `exg.egress` port becomes one connection to one of them, on a thread of
// its own. So the proxy sees every guest connection as it sees a process
// layer's, with the same rules, audit and credential injection.
#pragma once
#include <memory>
#include <string>
#include <thread>

#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace exg::microvm {

class EgressBridge {
 public:
  // Binds the two listeners in a fresh /tmp/exguardian-microvm-egress-XXXXXX
  // (mode 0700) and removes their names at once: only this process reaches
  // them (O_PATH descriptors), nothing is left on disk.
  static Result<std::unique_ptr<EgressBridge>> make();
  ~EgressBridge();
  EgressBridge(const EgressBridge&) = delete;
  EgressBridge& operator=(const EgressBridge&) = delete;

  // The proxy's listening sockets (layer::Sandbox::http_listener/socks_listener take them).
  UniqueFd http_listener, socks_listener;

  // Carries the guest's streams from `channel` (the port's socket, qemu's
  // end) until it ends or the bridge is destroyed.
  Result<void> start(UniqueFd channel);

 private:
  EgressBridge() = default;
  std::string dir_, http_path_, socks_path_;  // after make(): /proc/self/fd/N of the inodes below
  UniqueFd http_inode_, socks_inode_;          // O_PATH: the bound sockets, their names removed
  UniqueFd channel_, stop_;
  std::thread thread_;
};

}  // namespace exg::microvm
