// The host's side of the agent's channel: a buffered, non-blocking frame
// stream (Channel) used by the supervisor's relay and by the command-line
// client, and a blocking client for one connection (Client).
#pragma once
#include <deque>
#include <string>

#include "agent/protocol.hpp"
#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace exg::agent {

class Channel {
 public:
  Channel() = default;
  explicit Channel(UniqueFd fd);
  int fd() const { return fd_.get(); }
  explicit operator bool() const { return static_cast<bool>(fd_); }
  // Reads what has arrived (at most 1 MiB); false when the peer closed or failed.
  bool read_some();
  FrameReader::Item next() { return reader_.next(); }
  // Queues a frame and writes what the socket takes now.
  void send(const Frame& f);
  // Writes queued bytes; false on an error (the peer is gone).
  bool flush();
  size_t queued() const { return out_.size() - pos_; }
  void close() { fd_.reset(); }

 private:
  UniqueFd fd_;
  FrameReader reader_;
  std::string out_;
  size_t pos_ = 0;
};

// One blocking connection to a session's control socket (unix:PATH).
class Client {
 public:
  static Result<Client> connect(const std::string& address);
  // Over a connected stream socket (an agent's channel, in tests).
  explicit Client(UniqueFd fd) : ch_(std::move(fd)) {}
  // Sends a request and returns its reply; events that arrive meanwhile are kept for next_event().
  Result<Frame> call(nlohmann::json header, std::string payload = {});
  // Sends a request without waiting; returns its id.
  Result<uint32_t> send(nlohmann::json header, std::string payload = {});
  // The next frame of any kind (reply or event), waiting for it.
  Result<Frame> next();
  // A frame if one has arrived (reads once without waiting); nothing otherwise.
  Result<std::optional<Frame>> try_next();
  // The next event (kept ones first), waiting for it.
  Result<Frame> next_event();
  // Raw bytes as they are (tests of bad frames).
  Result<void> send_raw(const std::string& bytes);
  int fd() const { return ch_.fd(); }

 private:
  Client() = default;
  Channel ch_;
  uint32_t next_id_ = 1;
  bool closed_ = false;
  std::deque<Frame> events_;
  Result<void> flush_all();
};

}  // namespace exg::agent
