#include "mcp/command_output.hpp"

#include <boost/asio/steady_timer.hpp>

#include "mcp/tool_catalog.hpp"

namespace exg::mcp {

void keep(std::string& kept, std::string_view more, size_t limit) {
  if (kept.size() < limit) kept.append(more.substr(0, std::min(more.size(), limit - kept.size())));
}

nlohmann::json run_result(const RunOutcome& o) {
  bool out_cut = o.out_bytes > o.out.size(), err_cut = o.err_bytes > o.err.size();
  nlohmann::json r = {{"exit_code", o.exit_code},
                      {"signal", o.signal ? nlohmann::json(o.signal) : nlohmann::json(nullptr)},
                      {"timed_out", o.timed_out},
                      {"stdout", o.out},
                      {"stderr", o.err},
                      {"stdout_bytes", o.out_bytes},
                      {"stderr_bytes", o.err_bytes},
                      {"stdout_truncated", out_cut},
                      {"stderr_truncated", err_cut},
                      {"duration_ms", o.duration_ms},
                      {"refusals", o.refusals}};
  std::string note;
  if (o.timed_out) note += "killed after its timeout of " + nlohmann::json(o.timeout_s).dump() + " s. ";
  if (out_cut) note += "stdout truncated: " + std::to_string(o.out.size()) + " of " + std::to_string(o.out_bytes) + " bytes kept. ";
  if (err_cut) note += "stderr truncated: " + std::to_string(o.err.size()) + " of " + std::to_string(o.err_bytes) + " bytes kept. ";
  if (out_cut || err_cut) note += "Raise max_output_bytes, or redirect the output to a file and read_file it. ";
  if (!o.refusals.empty()) note += std::to_string(o.refusals.size()) + " refusal(s) by the sandbox: see refusals. ";
  if (!o.more_note.empty()) note += o.more_note + " ";
  if (!note.empty()) {
    note.pop_back();
    r["note"] = note;
  }
  return r;
}

void BackgroundOutput::add(bool to_stderr, std::string_view bytes) {
  std::string& buf = to_stderr ? err : out;
  size_t room = buf.size() < kBackgroundBuffer ? kBackgroundBuffer - buf.size() : 0;
  size_t n = std::min(room, bytes.size());
  buf.append(bytes.substr(0, n));
  dropped += bytes.size() - n;
}

void BackgroundOutput::exited(int st, int sig) {
  if (!running) return;
  running = false;
  status = st;
  signal = sig;
  auto waiting = std::move(on_exit);
  on_exit.clear();
  for (auto& fn : waiting) fn();
}

nlohmann::json BackgroundOutput::take() {
  nlohmann::json r = {{"pid", pid}, {"running", running}, {"stdout", out}, {"stderr", err},
                      {"exit_code", running ? nlohmann::json(nullptr) : nlohmann::json(status)},
                      {"signal", signal ? nlohmann::json(signal) : nlohmann::json(nullptr)},
                      {"dropped_bytes", dropped}};
  out.clear(), err.clear(), dropped = 0;
  return r;
}

void answer_when_ended(boost::asio::io_context& io, const std::shared_ptr<BackgroundOutput>& b, double wait_s,
                       const ToolCallPtr& c, std::function<void()> answer) {
  if (!b->running || wait_s <= 0) return answer();
  auto timer = std::make_shared<boost::asio::steady_timer>(io);
  auto fired = std::make_shared<bool>(false);
  auto once = [fired, answer, timer] {
    if (*fired) return;
    *fired = true;
    timer->cancel();
    answer();
  };
  b->on_exit.push_back(once);
  timer->expires_after(std::chrono::milliseconds(static_cast<int64_t>(wait_s * 1000)));
  timer->async_wait([once](boost::system::error_code ec) {
    if (!ec) once();
  });
  c->on_cancel = [fired, timer] {
    *fired = true;
    timer->cancel();
  };
}

}  // namespace exg::mcp
