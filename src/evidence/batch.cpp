#include "evidence/batch.hpp"

#include <cstdlib>

namespace exg::evidence {
namespace {

constexpr const char* kBegin = "@@exg-probe-begin ";
constexpr const char* kEnd = "@@exg-probe-end ";

std::string sh_quote(const std::string& s) {
  std::string r = "'";
  for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

}  // namespace

std::string batch_tag(size_t i) { return "exgp-" + std::to_string(i); }

std::string batch_script(const std::vector<BatchProbe>& probes) {
  std::string script;
  for (size_t i = 0; i < probes.size(); ++i) {
    const std::string tag = batch_tag(i);
    const auto& p = probes[i];
    // sh -c: the command's own shell, as alone ($$, exit, traps, its own process).
    std::string run = p.tag_arg ? p.command + " --tag " + tag : "sh -c " + sh_quote(p.command);
    script += "printf '\\n" + std::string(kBegin) + "%s@@\\n' " + tag + "; " + run + " </dev/null 2>&1; printf '\\n" +
              kEnd + "%s %s@@\\n' " + tag + " $?\n";
  }
  return script;
}

std::vector<BatchSlice> split_batch_output(const std::string& out, size_t n) {
  std::vector<BatchSlice> r(n);
  size_t from = 0;  // markers come in order: each is looked for after the previous probe's
  for (size_t i = 0; i < n; ++i) {
    const std::string tag = batch_tag(i);
    const std::string begin = std::string(kBegin) + tag + "@@\n";
    auto b = out.find(begin, from);
    if (b == std::string::npos) continue;
    b += begin.size();
    auto& s = r[i];
    s.begun = true;
    const std::string end = "\n" + std::string(kEnd) + tag + " ";
    auto e = out.find(end, b);
    if (e == std::string::npos) {
      s.out = out.substr(b);
      from = b;
      continue;
    }
    s.out = out.substr(b, e - b);
    const char* st = out.c_str() + e + end.size();
    char* stop = nullptr;
    long v = std::strtol(st, &stop, 10);
    if (stop != st && stop[0] == '@' && stop[1] == '@') {
      s.ended = true;
      s.status = static_cast<int>(v);
    }
    from = e + end.size();
  }
  return r;
}

}  // namespace exg::evidence
