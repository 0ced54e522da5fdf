#include "microvm/run.hpp"

#include "microvm/run_front_end.hpp"

namespace exg::microvm {

std::string plan_text(const plan::Plan& plan, const LayerOptions& opt) {
  std::string text = plan.to_text(), lines;
  for (const auto& l : describe_layer(plan, opt)) lines += l + "\n";
  if (auto at = text.find("layer: process\n"); at != std::string::npos) text.replace(at, 15, lines);
  else text = lines + text;
  return text;
}

Result<int> run(const plan::Plan& plan, sandbox::SuperviseOptions so, const LayerOptions& opt) {
  RunFrontEnd fe(plan);
  so.agent = &fe;
  so.microvm = &opt;
  so.oci = nullptr;
  return sandbox::supervise(plan, so);
}

}  // namespace exg::microvm
