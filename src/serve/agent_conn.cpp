#include "serve/agent_conn.hpp"

#include <algorithm>
#include <vector>

#include <boost/asio/write.hpp>

namespace exg::serve {

namespace asio = boost::asio;

std::string reply_error_text(const agent::Frame& r) {
  if (r.header.value("ok", false)) return "";
  std::string e = r.header.value("error", ""), m = r.header.value("message", "");
  return e.empty() ? m : e + ": " + m;
}

std::string reply_errno(const agent::Frame& r) {
  if (r.header.value("ok", false)) return "";
  return r.header.value("error", "EIO");
}

bool AgentConn::connect(const std::string& path, std::string* error) {
  boost::system::error_code ec;
  sock_.connect(asio::local::stream_protocol::endpoint(path), ec);
  if (ec) {
    *error = "connect " + path + ": " + ec.message();
    return false;
  }
  open_ = true;
  return true;
}

void AgentConn::start() { read_more(); }

void AgentConn::read_more() {
  sock_.async_read_some(asio::buffer(buf_), [self = shared_from_this()](boost::system::error_code ec, size_t n) {
    if (ec) {
      self->close();
      return;
    }
    self->reader_.feed(self->buf_, n);
    for (;;) {
      auto item = self->reader_.next();
      if (item.error) continue;  // a bad frame from our own supervisor: skipped
      if (!item.frame) break;
      self->dispatch(*item.frame);
    }
    if (self->open_) self->read_more();
  });
}

void AgentConn::dispatch(agent::Frame& f) {
  if (f.kind == agent::Kind::Reply) {
    auto it = pending_.find(f.id);
    if (it == pending_.end()) return;
    FrameFn fn = std::move(it->second);
    pending_.erase(it);
    fn(f);
    return;
  }
  if (f.kind != agent::Kind::Event) return;
  std::string ev = f.header.value("event", "");
  bool replay = f.header.value("replay", false);
  int pid = 0, watch = 0;
  if (auto p = f.header.find("pid"); p != f.header.end() && p->is_number_integer()) pid = p->get<int>();
  if (auto w = f.header.find("watch"); w != f.header.end() && w->is_number_integer()) watch = w->get<int>();
  // Copies of the callbacks: a callback may unsubscribe (itself or others).
  std::vector<std::pair<uint64_t, FrameFn>> targets;
  for (auto& [tok, s] : subs_) {
    if (ev == "watch" ? (s.watch != 0 && s.watch == watch) : (s.pid != 0 && s.pid == pid && (!replay || s.replay)))
      targets.emplace_back(tok, s.fn);
  }
  for (auto& [tok, fn] : targets)
    if (subs_.count(tok)) fn(f);
}

void AgentConn::call(nlohmann::json header, std::string payload, FrameFn on_reply) {
  if (!open_) {
    on_reply(agent::reply_error(0, EPIPE, "the sandbox has ended"));
    return;
  }
  uint32_t id = next_id_++;
  if (next_id_ == 0) next_id_ = 1;
  pending_[id] = std::move(on_reply);
  if (out_pos_ > 0 && out_pos_ == out_.size()) out_.clear(), out_pos_ = 0;
  out_ += agent::encode(agent::Frame{agent::Kind::Request, id, std::move(header), std::move(payload)});
  if (!writing_) write_more();
}

void AgentConn::write_more() {
  if (!open_ || out_pos_ >= out_.size()) {
    writing_ = false;
    return;
  }
  writing_ = true;
  size_t n = std::min<size_t>(out_.size() - out_pos_, 1 << 20);
  asio::async_write(sock_, asio::buffer(out_.data() + out_pos_, n), [self = shared_from_this()](boost::system::error_code ec, size_t w) {
    if (ec) {
      self->writing_ = false;
      self->close();
      return;
    }
    self->out_pos_ += w;
    if (self->out_pos_ > (4u << 20)) {
      self->out_.erase(0, self->out_pos_);
      self->out_pos_ = 0;
    }
    self->write_more();
  });
}

uint64_t AgentConn::subscribe_process(int pid, FrameFn fn, bool replay) {
  uint64_t t = next_token_++;
  subs_[t] = Sub{pid, 0, replay, std::move(fn)};
  return t;
}

uint64_t AgentConn::subscribe_watch(int watch, FrameFn fn) {
  uint64_t t = next_token_++;
  subs_[t] = Sub{0, watch, false, std::move(fn)};
  return t;
}

void AgentConn::unsubscribe(uint64_t token) { subs_.erase(token); }

void AgentConn::fail_all() {
  auto pending = std::move(pending_);
  pending_.clear();
  for (auto& [id, fn] : pending) fn(agent::reply_error(id, EPIPE, "the sandbox has ended"));
  auto subs = std::move(subs_);
  subs_.clear();
  agent::Frame closed = agent::event({{"event", "closed"}});
  for (auto& [t, s] : subs) s.fn(closed);
}

void AgentConn::close() {
  if (!open_) return;
  open_ = false;
  boost::system::error_code ec;
  sock_.close(ec);
  fail_all();
  if (on_closed) {
    auto cb = std::move(on_closed);
    cb();
  }
}

}  // namespace exg::serve
