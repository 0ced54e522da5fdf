// escape-test's progress on a terminal: one live line (the layer, probes done
// out of the total, the counts so far, the probe running now) redrawn in place,
// and each escape or failure on a line of its own as it comes, so a long run
// (a minute and more per layer) is not silent. Off when stdout or stderr is not
// a terminal: a log or a pipe gets only the report, never carriage returns.
#pragma once
#include <chrono>
#include <cstdio>
#include <string>

#include "evidence/suite.hpp"

namespace exg::evidence {

// Whether progress is drawn: stdout and stderr both terminals, and not -v
// (which prints a line per probe already).
bool progress_wanted(bool verbose);

class Progress {
 public:
  // `out`: where to draw (stderr); nullptr or on == false: draws nothing.
  Progress(bool on, std::FILE* out, std::string layer, int total);
  ~Progress();  // clears an unfinished live line
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  bool on() const { return on_; }
  void set_total(int total) { total_ = total; }
  // What is happening now (the probe about to run, "building the test world").
  void now(const std::string& what);
  // One probe's result: counted; an escape or a failure gets a line of its own.
  void done(const ProbeResult& r);
  // A line of its own above the live line (a notice).
  void note(const std::string& line);
  // The layer's last line, left on the screen.
  void finish();

  // The live line's text (also for the tests): "process layer: 12/170 probes, ...".
  std::string line() const;

 private:
  void clear();
  void draw();

  bool on_;
  std::FILE* out_;
  std::string layer_, now_;
  int total_, done_ = 0, held_ = 0, escaped_ = 0, failed_ = 0, skipped_ = 0;
  bool drawn_ = false, finished_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace exg::evidence
