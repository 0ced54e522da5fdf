// A declared secret as the Plan carries it: the egress proxy's own type
// (egress/secret.hpp), which the Plan hands on as it is.
#pragma once
#include "egress/secret.hpp"

namespace exg::plan {

using Secret = egress::Secret;

}  // namespace exg::plan
