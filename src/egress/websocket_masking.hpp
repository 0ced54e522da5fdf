// The server's side of an intercepted WebSocket: the values of the host's
// secrets masked in its data messages, and the messages re-framed (a payload
// changes in length when a value is replaced; RFC 6455 5.4 lets an
// intermediary re-fragment when no extension is in use).
//
// A value is masked wherever the server's framing cuts it: across TCP reads,
// across the fragments (continuation frames) of a message, and across
// messages. Within a message one ValueMasker sees the payload as a stream. At
// a message's end, a tail that begins a spelling of a value and ends before it
// (ValueMasker::open_tail) may be the first half of a value the next message
// ends: that message's last frame is held until the next message's first
// bytes (up to the longest spelling) say whether it is; if it is, the
// placeholder ends the first message and the second begins after the value.
// A short message the value may run through is held whole with it (a message
// the value fills entirely goes out empty).
// The proxy sends what is held as it is before a Close, or when nothing comes
// within kHoldAtMessageEnd (a value split with a longer pause reaches the
// client in halves: documented in docs/secrets.md); a ping or pong goes out
// meanwhile (a control frame may come between a message's fragments).
// Frames in, frames out: no I/O here (intercept_websocket.cpp reads and writes).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "egress/secrets.hpp"
#include "egress/websocket_frame.hpp"

namespace exg::egress::detail {

inline constexpr std::chrono::milliseconds kHoldAtMessageEnd{200};

class WsResponseMasker {
 public:
  WsResponseMasker(const SecretIndex& idx, std::vector<size_t> ids);
  // A data frame's head: Text or Binary begins a message, Continuation goes on with it.
  void frame(const WsFrameHead& h);
  // Payload bytes of that frame as they are read; `frame_end`: its last ones.
  // Returns the frames to send now.
  std::string feed(std::string_view piece, bool frame_end);
  // A message's end is held (or the next message's first bytes with it).
  bool holding() const { return !held_.empty(); }
  // A message is under way (its next data frame is a Continuation).
  bool in_message() const { return message_.has_value() || probe_opcode_ != 0; }
  // What is held, sent: before a Close, or when the wait is over.
  std::string flush();
  // What was masked since the last call (ValueMasker::take_hits).
  std::vector<std::pair<std::string, std::string>> take_hits();

 private:
  struct Held {
    std::string tail;        // the message's last bytes (masked)
    uint8_t opcode = 0;      // what its frame carries: 0, or the message's own when nothing of it went out yet
  };
  // Sends `data` as the current message's next frame (its opcode on its first).
  void send(std::string& out, std::string_view data, bool fin);
  static void send_final(std::string& out, const Held& h);
  // The current message's output so far; at its end, the final frame or a hold.
  void emit(std::string& out, std::string data, bool message_end);
  // The held end and the next message's first bytes (probe_) judged together.
  void resolve(std::string& out, bool message_end);
  void collect(ValueMasker& m);

  const SecretIndex& idx_;
  std::vector<size_t> ids_;
  std::optional<ValueMasker> message_;  // the masker of the message under way
  uint8_t opcode_ = 0;                  // carried by the message's next frame sent (0 once one went)
  bool fin_ = false;                    // the current frame ends its message
  std::vector<Held> held_;  // message ends not sent yet, in order (a value may run through several)
  std::string probe_;                   // the next message's first bytes, while held_
  uint8_t probe_opcode_ = 0;
  size_t longest_ = 0;                  // ValueMasker::longest()
  std::vector<std::pair<std::string, std::string>> hits_;
};

}  // namespace exg::egress::detail
