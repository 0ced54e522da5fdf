// Base64 (RFC 4648, standard alphabet, padded): the one encoder of the code
// base (proxy credentials, secret masking, the E2B API's bytes, crun's
// run.oci.seccomp_bpf_data). Plain code, not OpenSSL: OpenSSL is loaded lazily
// (util/lazy_libs.hpp) and the start-up path must not pull it in.
#pragma once
#include <string>
#include <string_view>

namespace exg::util {

std::string base64_encode(std::string_view in);

}  // namespace exg::util
