#include "layer/layer.hpp"

namespace exg::layer {

std::string plan_text(const plan::Plan& plan, const Layer& layer) { return plan.to_text(layer.describe(plan)); }

}  // namespace exg::layer
