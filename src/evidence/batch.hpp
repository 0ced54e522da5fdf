// Many escape-test probes in one sandbox: the shell script that runs each as its
// own process between markers, and the reading of that script's output back into
// one slice (output, exit status) per probe. Pure text in, text out.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace exg::evidence {

struct BatchProbe {
  std::string command;
  // true: an `exguardian probe NAME`, given `--tag T` (T becomes its comm: the audit lines it
  // causes name it). false: run as `sh -c COMMAND`, the command's own comm in its audit lines,
  // so it is credited with none (only probes judged without audit lines are batched so).
  bool tag_arg = false;
};

// The tag of the i-th probe of a batch: a process name (at most 15 characters).
std::string batch_tag(size_t i);

// One line per probe: its begin marker, the probe (stdin /dev/null, stderr on stdout, as
// when it runs alone), its end marker with its exit status.
std::string batch_script(const std::vector<BatchProbe>& probes);

struct BatchSlice {
  bool ended = false;  // its end marker was seen: out and status are the probe's own
  int status = -1;
  std::string out;     // between its markers; without an end marker, everything after its begin
  bool begun = false;  // its begin marker was seen
};

// The i-th slice for each of the first n probes of a batch script's output.
std::vector<BatchSlice> split_batch_output(const std::string& out, size_t n);

}  // namespace exg::evidence
