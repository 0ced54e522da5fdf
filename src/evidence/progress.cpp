#include "evidence/progress.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

namespace exg::evidence {

bool progress_wanted(bool verbose) {
  return !verbose && ::isatty(STDOUT_FILENO) == 1 && ::isatty(STDERR_FILENO) == 1;
}

Progress::Progress(bool on, std::FILE* out, std::string layer, int total)
    : on_(on && out), out_(out), layer_(std::move(layer)), total_(total), start_(std::chrono::steady_clock::now()) {}

Progress::~Progress() {
  if (on_ && drawn_ && !finished_) {
    clear();
    std::fflush(out_);
  }
}

std::string Progress::line() const {
  int secs = static_cast<int>(std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  std::string s = "escape-test: " + layer_ + " layer: ";
  if (total_ == 0 && done_ == 0)  // the catalogue is not built yet (the test world comes first)
    return s + now_ + " (" + std::to_string(secs) + " s)";
  s += std::to_string(done_) + "/" + std::to_string(total_) + " probes, " + std::to_string(held_) + " held";
  if (escaped_) s += ", " + std::to_string(escaped_) + " ESCAPED";
  if (failed_) s += ", " + std::to_string(failed_) + " FAILED";
  if (skipped_) s += ", " + std::to_string(skipped_) + " not run here";
  s += " (" + std::to_string(secs) + " s)";
  if (!now_.empty() && !finished_) s += ": " + now_;
  return s;
}

// Erase the live line: carriage return, then erase to the end of the line.
void Progress::clear() {
  if (drawn_) std::fputs("\r\033[K", out_);
  drawn_ = false;
}

void Progress::draw() {
  if (!on_) return;
  std::string s = line();
  // Never wider than the terminal: a wrapped line could not be redrawn in place.
  winsize ws{};
  size_t width = ::ioctl(::fileno(out_), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 ? ws.ws_col - 1 : 79;
  if (s.size() > width) s = s.substr(0, width);
  std::fputs("\r\033[K", out_);
  std::fputs(s.c_str(), out_);
  std::fflush(out_);
  drawn_ = true;
}

void Progress::now(const std::string& what) {
  now_ = what;
  draw();
}

void Progress::done(const ProbeResult& r) {
  ++done_;
  if (done_ > total_) total_ = done_;  // a batch's own failure row
  switch (r.verdict) {
    case Verdict::held: ++held_; break;
    case Verdict::escaped: ++escaped_; break;
    case Verdict::failed: ++failed_; break;
    case Verdict::skipped: ++skipped_; break;
  }
  if (on_ && (r.verdict == Verdict::escaped || r.verdict == Verdict::failed))
    note(std::string(verdict_name(r.verdict)) + " " + r.layer + " " + r.id + ": " + r.evidence);
  now_.clear();
  draw();
}

void Progress::note(const std::string& text) {
  if (!on_) return;
  clear();
  std::fprintf(out_, "escape-test: %s\n", text.c_str());
  draw();
}

void Progress::finish() {
  if (!on_ || finished_) return;
  finished_ = true;
  now_.clear();
  draw();
  std::fputc('\n', out_);
  std::fflush(out_);
  drawn_ = false;
}

}  // namespace exg::evidence
