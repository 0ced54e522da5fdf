// `doctor` and `recommend`, as data and as output: which layers this host can
// run, and which layer a situation calls for. The CLI only picks the stream.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "doctor/host_caps.hpp"

namespace exg::doctor {

struct LayerStatus {
  std::string name;  // "process" | "container" | "gvisor" | "microvm"
  bool available = false;
  std::string why;   // one line
};
std::vector<LayerStatus> layer_status(const std::vector<Capability>& caps);

// Host and user, for the report header and the JSON document.
nlohmann::json host_identity();
nlohmann::json user_identity();

// Prints the doctor report (text or JSON). `userns_refusal`: why this host
// refuses the process layer's user namespace, one fact a line
// (doctor/userns_diagnosis.hpp; empty when it does not). Returns the exit status: 0.
int write_doctor(std::ostream& out, const std::vector<Capability>& caps, bool json,
                 const std::vector<std::string>& userns_refusal = {});

struct Recommendation {
  std::string situation;
  std::string layer;                      // what the situation calls for
  std::vector<std::string> alternatives;  // equally acceptable layers, in order
  std::string summary;                    // one line
  std::vector<std::string> why;           // 2-4 lines
  nlohmann::json policy;                  // a starting policy (valid for parse_policy)
  std::string command;                    // a first command that works as printed ("" when none)
};
const std::vector<std::string>& situations();  // laptop, ci, multi-tenant, privileged-tools
std::optional<Recommendation> recommendation_for(std::string_view situation);

// Prints the recommendation; probes the host (probe_host()) unless `caps` is
// given. Unknown situation: one error line on `err`, exit status 2.
int write_recommendation(std::ostream& out, std::ostream& err, std::string_view situation, bool json,
                         const std::vector<Capability>* caps = nullptr);

// `recommend` without --situation: the situations there are, each with its
// layer and summary, and how to ask for one. Returns the exit status: 0.
int write_situations(std::ostream& out, bool json);

}  // namespace exg::doctor
