// Cost per byte of masking secrets' values in what an upstream answers
// (egress/value_masker.cpp, issue 39.8 added base32, hex with separators and
// UTF-16/32 to the forms): ValueMasker::feed over 1 MiB of each kind of body,
// fed in 16 KiB reads, with two secrets as in a run. Reported as bytes/s.
//
//   json      a JSON API answer (keys, quoted strings, escapes, digits), no value
//   random    random bytes (a binary download)
//   alnum     letters and digits only (base32/base64/hex-like text: the bytes a
//             match can start with, the worst case for the candidate scan)
//   echoes    json with the value in a different form every 4 KiB
//
//   build/exg_masker_bench [--benchmark_repetitions=5]
#include <benchmark/benchmark.h>

#include <random>
#include <string>

#include "egress/secrets.hpp"

namespace {

using namespace exg::egress;

const std::string kValue = "ghp_16C7e42F292c6912E7710c838347Ae178B4a";

const SecretIndex& index() {
  static SecretIndex idx = [] {
    auto c = std::make_shared<SecretsConfig>();
    c->secrets.push_back({"GITHUB_TOKEN", "exg_ph_GITHUB_TOKEN_0123456789abcdef0123456789abcdef", kValue, {"api.github.com"}});
    c->secrets.push_back({"OTHER", "exg_ph_OTHER_fedcba9876543210fedcba9876543210", "sk-live-abcdef123456", {"api.github.com"}});
    return std::move(*SecretIndex::build(c));
  }();
  return idx;
}

std::string body(const std::string& kind) {
  std::mt19937 rng(7);
  std::string out;
  const size_t n = 1 << 20;
  if (kind == "random") {
    while (out.size() < n) out += static_cast<char>(rng());
    return out;
  }
  if (kind == "alnum") {
    const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    while (out.size() < n) out += a[rng() % 62];
    return out;
  }
  size_t i = 0;
  while (out.size() < n) {
    out += "{\"id\": " + std::to_string(rng() % 100000) + ", \"name\": \"repo-" + std::to_string(i) +
           "\", \"url\": \"https:\\/\\/api.github.com\\/repos\\/x\\/y\", \"sha\": \"" + std::to_string(rng()) +
           "e3b0c44298fc1c149afbf4c8996fb924\", \"text\": \"caf\\u00e9 &amp; more\"},\n";
    if (kind == "echoes" && out.size() / 4096 > i) {
      static const char* forms[] = {"plain", "hex", "b32"};
      std::string f = forms[i % 3];
      out += f == "plain" ? kValue : f == "hex" ? std::string("67:68:70:5f:31:36:43:37:65:34:32:46") : "M5UHAXZRGZBTOZJUGJDDE";
    }
    ++i;
  }
  return out;
}

void feed(benchmark::State& state, const std::string& kind) {
  const std::string b = body(kind);
  for (auto _ : state) {
    ValueMasker m(index(), {0, 1});
    std::string out;
    out.reserve(b.size() + 4096);
    for (size_t i = 0; i < b.size(); i += 16384) m.feed(std::string_view(b).substr(i, 16384), out);
    m.finish(out);
    benchmark::DoNotOptimize(out);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * b.size()));
}

}  // namespace

BENCHMARK_CAPTURE(feed, json, std::string("json"));
BENCHMARK_CAPTURE(feed, random, std::string("random"));
BENCHMARK_CAPTURE(feed, alnum, std::string("alnum"));
BENCHMARK_CAPTURE(feed, echoes, std::string("echoes"));
BENCHMARK_MAIN();
