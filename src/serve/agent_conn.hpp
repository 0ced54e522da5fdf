// The server's connection to one sandbox's supervisor (`exguardian session`'s
// control socket), asynchronous on the server's io_context: requests with a
// callback for their reply, and the agent's events routed to subscribers by
// process id or watch id. The frames are the agent protocol's
// (docs/agent-protocol.md, agent/protocol.hpp). When the connection ends,
// every pending request is answered with an EPIPE error and every subscriber
// gets an {"event": "closed"} frame.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>

#include "agent/protocol.hpp"

namespace exg::serve {

class AgentConn : public std::enable_shared_from_this<AgentConn> {
 public:
  using FrameFn = std::function<void(const agent::Frame&)>;
  explicit AgentConn(boost::asio::io_context& io) : sock_(io) {}
  // Connects (blocking: a unix socket on this host answers at once).
  bool connect(const std::string& path, std::string* error);
  void start();  // begins reading
  void call(nlohmann::json header, std::string payload, FrameFn on_reply);
  // Events of a process; replay events (from an attach) only to subscribers that asked for them.
  uint64_t subscribe_process(int pid, FrameFn fn, bool replay = false);
  uint64_t subscribe_watch(int watch, FrameFn fn);
  void unsubscribe(uint64_t token);
  bool open() const { return open_; }
  void close();
  std::function<void()> on_closed;
  // Bytes waiting to go to the supervisor (back-pressure for uploads).
  size_t queued() const { return out_.size() - out_pos_; }

 private:
  struct Sub {
    int pid = 0, watch = 0;
    bool replay = false;
    FrameFn fn;
  };
  boost::asio::local::stream_protocol::socket sock_;
  agent::FrameReader reader_;
  char buf_[65536];
  std::string out_;
  size_t out_pos_ = 0;
  bool writing_ = false;
  bool open_ = false;
  uint32_t next_id_ = 1;
  uint64_t next_token_ = 1;
  std::map<uint32_t, FrameFn> pending_;
  std::map<uint64_t, Sub> subs_;

  void read_more();
  void write_more();
  void dispatch(agent::Frame& f);
  void fail_all();
};

// The reply's error as one line ("ENOENT: open f"), or "" when ok.
std::string reply_error_text(const agent::Frame& reply);
// The errno name of a failed reply ("ENOENT"), "" when ok.
std::string reply_errno(const agent::Frame& reply);

}  // namespace exg::serve
