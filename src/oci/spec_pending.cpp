// TEMPORARY (O2): weak stand-ins so the tree links until spec.cpp (O1) lands;
// spec.cpp's definitions replace them. Fails closed: no spec, no container.
#include "oci/spec.hpp"

namespace exg::oci {

__attribute__((weak)) const char* to_string(Runtime r) {
  return r == Runtime::Crun ? "crun" : r == Runtime::Runc ? "runc" : "runsc";
}

__attribute__((weak)) Result<nlohmann::json> make_spec(const plan::Plan&, const SpecOptions&) {
  return fail(Error::msg("oci spec", "the spec generator is not built into this exguardian"));
}

}  // namespace exg::oci
