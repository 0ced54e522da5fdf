// The value masker (src/egress/value_masker.cpp): what a host with secrets
// answers goes back into the sandbox with every spelling of a secret's value
// replaced. The input plays the upstream's body, read in pieces: no value may
// come out in plain text or hex, and pieces mask as the whole does.
#include <cstdint>
#include <memory>
#include <string>

#include "check.hpp"
#include "egress/secrets.hpp"

using namespace exg::egress;

namespace {

// Values with bytes that have JSON, percent and HTML escapes, and a short one
// (plain form only). Placeholders share no character run with the values.
const SecretIndex& index() {
  static const SecretIndex idx = [] {
    auto cfg = std::make_shared<SecretsConfig>();
    cfg->secrets.push_back(Secret{"LONG", "exg_ph_LONG_0123456789", "s3cr3t/V4lue+x&\"<", {"api.example.com"}, {}});
    cfg->secrets.push_back(Secret{"SHORT", "exg_ph_SHORT_987654321", "Qz9", {"api.example.com"}, {}});
    auto built = SecretIndex::build(cfg);
    FUZZ_CHECK(built.has_value(), "the index builds");
    return std::move(*built);
  }();
  return idx;
}

std::string lower(std::string s) {
  for (char& c : s) c = (char)std::tolower((unsigned char)c);
  return s;
}

std::string hex(std::string_view s) {
  std::string h;
  for (unsigned char c : s) h += "0123456789abcdef"[c >> 4], h += "0123456789abcdef"[c & 15];
  return h;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  const SecretIndex& idx = index();
  ValueMasker whole_masker(idx, {0, 1});
  std::string whole = whole_masker.mask(in);
  ValueMasker parts_masker(idx, {0, 1});
  std::string parts;
  for (std::string_view p : exg::fuzz::pieces(in, data[0], 200)) parts_masker.feed(p, parts);
  parts_masker.finish(parts);
  for (const std::string& out : {whole, parts}) {
    for (const Secret& s : idx.secrets()) {
      FUZZ_CHECK(out.find(s.value) == std::string::npos, "no value passes in plain text");
      if (s.value.size() >= 6) FUZZ_CHECK(lower(out).find(hex(s.value)) == std::string::npos, "no value passes in hex");
    }
  }
  FUZZ_CHECK(whole == parts, "pieces are masked as the whole is");
  return 0;
}
