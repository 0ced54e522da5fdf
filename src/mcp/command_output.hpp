// What run_command and read_output return, built the same way whichever
// Sandboxes ran the command: the bytes kept within the limits, the counts of
// all of them, the exit status, and a note saying what was cut and why.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <nlohmann/json.hpp>

#include "mcp/server.hpp"

namespace exg::mcp {

// Appends up to `limit` bytes of `more` to `kept`; the rest the caller only counts.
void keep(std::string& kept, std::string_view more, size_t limit);

// One run_command's outcome.
struct RunOutcome {
  int exit_code = 0;  // 128+N when signal N ended it
  int signal = 0;
  bool timed_out = false;
  double timeout_s = 0;
  std::string out, err;  // the bytes kept
  uint64_t out_bytes = 0, err_bytes = 0;
  int64_t duration_ms = 0;
  nlohmann::json refusals = nlohmann::json::array();
  std::string more_note;  // a sentence the note ends with (client mode: where refusals are)
};
// run_command's structured result (its output schema), with the note.
nlohmann::json run_result(const RunOutcome& o);

// A start_command process's output, kept until read_output takes it (at most
// kBackgroundBuffer a stream; the rest counted as dropped).
struct BackgroundOutput {
  int pid = 0;
  std::vector<std::string> argv;
  std::string out, err;
  uint64_t dropped = 0;
  bool running = true;
  int status = -1, signal = 0;
  std::vector<std::function<void()>> on_exit;  // read_output calls waiting for the exit

  void add(bool to_stderr, std::string_view bytes);
  // It ended (status -1: the sandbox went first); the waiting calls are answered.
  void exited(int status, int signal);
  // read_output's result but its refusals; what it held is handed over (emptied here).
  nlohmann::json take();
};

// read_output's process among a sandbox's start_command ones; else the error is replied and null returned.
template <class B>
std::shared_ptr<B> background_of(const std::map<int, std::shared_ptr<B>>& all, const ToolCallPtr& c) {
  int pid = c->args["pid"].template get<int>();
  if (auto it = all.find(pid); it != all.end()) return it->second;
  c->reply(ToolOutcome::error("read_output: pid " + std::to_string(pid) + ": no background command of this sandbox "
                              "(start_command returns the pid)"));
  return nullptr;
}

// read_output's wait: `answer` now when the process has ended or wait_s is 0,
// else at its exit or after wait_s, whichever comes first; never after the call is cancelled.
void answer_when_ended(boost::asio::io_context& io, const std::shared_ptr<BackgroundOutput>& b, double wait_s,
                       const ToolCallPtr& c, std::function<void()> answer);

}  // namespace exg::mcp
