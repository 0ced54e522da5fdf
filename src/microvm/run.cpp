#include "microvm/run.hpp"

#include "microvm/run_front_end.hpp"

#include <cstdio>

namespace exg::microvm {

std::string plan_text(const plan::Plan& plan, const LayerOptions& opt) {
  std::string text = plan.to_text(), lines;
  for (const auto& l : describe_layer(plan, opt)) lines += l + "\n";
  if (auto at = text.find("layer: process\n"); at != std::string::npos) text.replace(at, 15, lines);
  else text = lines + text;
  return text;
}

Result<int> run(const plan::Plan& plan, sandbox::SuperviseOptions so, const LayerOptions& opt) {
  // The guest has no network device and its proxy ports are not carried to
  // the supervisor's proxy yet: allowed destinations stay unreachable (fail
  // closed), said once so that a refused download is not a mystery.
  if (!plan.network.allowed_domains.empty() || !plan.network.allowed_cidrs.empty())
    std::fprintf(stderr, "exguardian: microvm: egress is not carried into the guest yet: the policy's allowed "
                 "destinations are unreachable from it (no network device; nothing listens on 127.0.0.1:3128/1080)\n");
  RunFrontEnd fe(plan);
  so.agent = &fe;
  so.microvm = &opt;
  so.oci = nullptr;
  return sandbox::supervise(plan, so);
}

}  // namespace exg::microvm
