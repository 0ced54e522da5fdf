// Masking the server's WebSocket messages (websocket_masking.hpp).
#include "egress/websocket_masking.hpp"

#include <algorithm>

namespace exg::egress::detail {

WsResponseMasker::WsResponseMasker(const SecretIndex& idx, std::vector<size_t> ids)
    : idx_(idx), ids_(std::move(ids)) {
  longest_ = ValueMasker(idx_, ids_).longest();
}

void WsResponseMasker::collect(ValueMasker& m) {
  for (auto& h : m.take_hits()) hits_.push_back(std::move(h));
}

std::vector<std::pair<std::string, std::string>> WsResponseMasker::take_hits() {
  auto h = std::move(hits_);
  hits_.clear();
  std::sort(h.begin(), h.end());
  h.erase(std::unique(h.begin(), h.end()), h.end());
  return h;
}

void WsResponseMasker::frame(const WsFrameHead& h) {
  fin_ = h.fin;
  if (h.opcode == (uint8_t)WsOpcode::Continuation) return;
  if (!held_.empty()) {
    probe_opcode_ = h.opcode;  // (its bytes go to probe_ until the hold is resolved)
    return;
  }
  message_.emplace(idx_, ids_);
  opcode_ = h.opcode;
}

void WsResponseMasker::send(std::string& out, std::string_view data, bool fin) {
  out += ws_frame_head(fin, opcode_, data.size());
  out += data;
  opcode_ = 0;
}

void WsResponseMasker::send_final(std::string& out, const Held& h) {
  out += ws_frame_head(true, h.opcode, h.tail.size());
  out += h.tail;
}

void WsResponseMasker::emit(std::string& out, std::string data, bool message_end) {
  collect(*message_);
  if (!message_end) {
    if (!data.empty()) send(out, data, false);
    return;
  }
  size_t open = message_->open_tail(data);
  message_.reset();
  if (!open) return send(out, data, true);
  // The end may begin a value the next message ends: held, the rest sent.
  if (open < data.size()) send(out, std::string_view(data).substr(0, data.size() - open), false);
  held_.push_back(Held{data.substr(data.size() - open), opcode_});
  opcode_ = 0;
}

std::string WsResponseMasker::feed(std::string_view piece, bool frame_end) {
  std::string out;
  const bool message_end = frame_end && fin_;
  if (!held_.empty()) {
    probe_ += piece;
    if (probe_.size() < longest_ && !message_end) return out;
    resolve(out, message_end);
    return out;
  }
  std::string data;
  message_->feed(piece, data);
  if (message_end) message_->finish(data);
  emit(out, std::move(data), message_end);
  return out;
}

void WsResponseMasker::resolve(std::string& out, bool message_end) {
  std::string joined;
  std::vector<size_t> starts;
  for (const auto& h : held_) {
    starts.push_back(joined.size());
    joined += h.tail;
  }
  const size_t held_size = joined.size();
  joined += probe_;
  ValueMasker m(idx_, ids_);
  std::string masked = m.mask(joined);
  collect(m);
  // Where the first replacement begins (the common start) and the last ends (the
  // common end): one that begins in what is held runs into the new message.
  size_t d = 0, n = std::min(joined.size(), masked.size());
  while (d < n && joined[d] == masked[d]) ++d;
  size_t s = 0;
  while (s < n - d && joined[joined.size() - 1 - s] == masked[masked.size() - 1 - s]) ++s;
  const bool replaced = masked != joined && d < held_size;
  size_t next_from = held_size;
  if (!replaced && message_end) {
    // The whole new message may be the middle of a value: held too, with what it may continue.
    if (size_t open = m.open_tail(joined); open > probe_.size()) {
      const size_t from = joined.size() - open;
      size_t k = 0;
      while (k < held_.size() && starts[k] + held_[k].tail.size() <= from) send_final(out, held_[k++]);
      held_.erase(held_.begin(), held_.begin() + (long)k);
      held_.push_back(Held{std::move(probe_), probe_opcode_});
      probe_.clear();
      probe_opcode_ = 0;
      return;
    }
  }
  if (!replaced) {
    for (const auto& h : held_) send_final(out, h);
  } else {
    // The placeholder ends the message the value began in; one it filled goes out empty.
    const size_t out_end = masked.size() - s;
    for (size_t k = 0; k < held_.size(); ++k) {
      const size_t end = starts[k] + held_[k].tail.size();
      if (end <= d) send_final(out, held_[k]);
      else if (starts[k] <= d) send_final(out, Held{masked.substr(starts[k], out_end - starts[k]), held_[k].opcode});
      else send_final(out, Held{"", held_[k].opcode});
    }
    next_from = std::max(joined.size() - s, held_size);
  }
  held_.clear();
  // The new message, from after the value (or from its start).
  message_.emplace(idx_, ids_);
  opcode_ = probe_opcode_;
  probe_opcode_ = 0;
  std::string data;
  message_->feed(std::string_view(joined).substr(next_from), data);
  probe_.clear();
  if (message_end) message_->finish(data);
  emit(out, std::move(data), message_end);
}

std::string WsResponseMasker::flush() {
  std::string out;
  if (held_.empty()) return out;
  if (probe_opcode_) {  // the next message began: judged with what is there of it
    resolve(out, false);
    return out;
  }
  for (const auto& h : held_) send_final(out, h);
  held_.clear();
  return out;
}

}  // namespace exg::egress::detail
