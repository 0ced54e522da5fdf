// The policy loader (src/policy): a policy file or an srt settings file is
// one JSON document, and a project's file comes with the code it is about to
// run. Any text must give a Policy or one error naming a position, never a
// crash; an accepted policy merges into another without trouble.
#include <cstdint>
#include <string>

#include "check.hpp"
#include "policy/policy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto p = exg::policy::parse_policy(text, "fuzz.json", "/fuzz/project");
  if (!p) {
    FUZZ_CHECK(p.error().message.starts_with("fuzz.json"), "a policy error names the file");
    return 0;
  }
  exg::policy::Policy base;
  exg::policy::merge(base, *p);
  exg::policy::merge(base, *p);
  FUZZ_CHECK(base.network.allowed_domains.size() == 2 * p->network.allowed_domains.size(), "merge appends lists");
  return 0;
}
