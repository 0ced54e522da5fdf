// The factory of layers: the one place above the backends (process/, oci/,
// microvm/) that names them all, so that layer/ stays the interface they
// implement and includes none of them. Only front ends make layers.
#pragma once
#include <memory>
#include <vector>

#include "layer/layer.hpp"
#include "util/error.hpp"

namespace exg::cli {

// The kinds make_layer can make in this build (--layer's choices).
const std::vector<layer::Kind>& buildable_kinds();

// The layer of `kind`; an error says why it cannot run here (missing runtime,
// a kernel without what the layer needs).
Result<std::unique_ptr<layer::Layer>> make_layer(layer::Kind kind, const layer::LayerConfig& config = {});

}  // namespace exg::cli
