// What an upstream answers goes back into the sandbox masked, in every spelling
// of a value (issue 12.5): as is, JSON-escaped (\/ as PHP writes it, \uXXXX of
// any character), percent-encoded (either hex case), HTML references, base64
// (standard and url-safe, the three alignments, line-wrapped), hex (bare or
// with separators), base32/base32hex, UTF-16/32; across read
// boundaries; the compressed bodies that get decoded and the codings refused;
// secrets limited to named request headers, whose placeholders pass to their own
// host as they are and are refused, saying so truly, anywhere else (issue 45).
#include <gtest/gtest.h>
#include <zlib.h>

#include <cctype>
#include <cstring>
#include <random>

#include "egress/proxy.hpp"
#include "egress/secrets.hpp"

namespace {

using namespace exg::egress;

const std::string kValue = "sk/live+Tok=9_a-Z.x~y";  // punctuation that every escaping touches
const std::string kPh = "exg_ph_API_TOKEN_0123456789abcdef0123456789abcdef";

std::shared_ptr<SecretsConfig> config() {
  auto c = std::make_shared<SecretsConfig>();
  c->secrets.push_back({"API_TOKEN", kPh, kValue, {"api.secret.test"}});
  c->secrets.push_back({"KEY_ONLY", "exg_ph_KEY_ONLY_fedcba9876543210fedcba9876543210", "keyonly-value-42",
                        {"api.secret.test"}, {"x-api-key"}});
  return c;
}

std::string json_php(std::string_view v) {  // PHP's json_encode: "/" as "\/"
  std::string r;
  for (char c : v) r += c == '/' ? std::string("\\/") : std::string(1, c);
  return r;
}
std::string json_u(std::string_view v, bool upper) {  // every character as \uXXXX
  std::string r;
  char b[8];
  for (unsigned char c : v) std::snprintf(b, sizeof b, upper ? "\\u%04X" : "\\u%04x", c), r += b;
  return r;
}
std::string percent(std::string_view v, bool upper, bool all) {
  std::string r;
  char b[4];
  for (unsigned char c : v)
    if (all || !std::isalnum(c)) std::snprintf(b, sizeof b, upper ? "%%%02X" : "%%%02x", c), r += b;
    else r += (char)c;
  return r;
}
std::string html(std::string_view v) {
  std::string r;
  for (unsigned char c : v) r += "&#" + std::to_string(c) + ";";
  return r;
}
std::string urlsafe(std::string s) {
  for (char& c : s) c = c == '+' ? '-' : c == '/' ? '_' : c;
  return s;
}
std::string hex(std::string_view v, bool upper) {
  std::string r;
  char b[4];
  for (unsigned char c : v) std::snprintf(b, sizeof b, upper ? "%02X" : "%02x", c), r += b;
  return r;
}
std::string wrap(const std::string& s, size_t width) {  // MIME/PEM style line breaks
  std::string r;
  for (size_t i = 0; i < s.size(); i += width) r += s.substr(i, width) + "\r\n";
  return r;
}

// The masker's output for `body` fed in pieces of `step`.
std::string masked(const SecretIndex& idx, std::string_view body, size_t step, std::vector<std::string>* forms = nullptr) {
  ValueMasker m(idx, {0, 1});
  std::string out;
  for (size_t i = 0; i < body.size(); i += step) m.feed(body.substr(i, step), out);
  m.finish(out);
  if (forms)
    for (auto& [name, form] : m.take_hits()) forms->push_back(name + ":" + form);
  return out;
}

// Whether `s` still holds kValue in a form a client could decode back (the same forms, decoded).
bool leaks(std::string_view s) {
  for (const std::string& f : {kValue, json_php(kValue), json_u(kValue, false), json_u(kValue, true),
                               percent(kValue, true, false), percent(kValue, false, true), html(kValue),
                               hex(kValue, false), hex(kValue, true)})
    if (s.find(f) != std::string_view::npos) return true;
  for (size_t a = 0; a < 3; ++a) {  // the value's own base64 characters at each alignment
    std::string enc = base64_encode(std::string(a, '\0') + kValue + std::string(2, '\0'));
    size_t first = (8 * a + 5) / 6, end = 8 * (a + kValue.size()) / 6;
    std::string core = enc.substr(first, end - first);
    if (s.find(core) != std::string_view::npos || s.find(urlsafe(core)) != std::string_view::npos) return true;
  }
  return false;
}

TEST(ValueMasking, EveryFormIsMaskedAtEveryReadSplit) {
  auto idx = *SecretIndex::build(config());
  struct Case {
    std::string name, body, form;
  } cases[] = {
      {"plain", "{\"h\": \"Bearer " + kValue + "\"}", "plain"},
      {"json \\/", "{\"h\": \"Bearer " + json_php(kValue) + "\"}", "json"},
      {"json \\u lower", "{\"h\": \"" + json_u(kValue, false) + "\"}", "json"},
      {"json \\u upper", "{\"h\": \"" + json_u(kValue, true) + "\"}", "json"},
      {"percent upper", "q=" + percent(kValue, true, false) + "&x=1", "percent"},
      {"percent lower, every byte", "q=" + percent(kValue, false, true) + "&x=1", "percent"},
      {"html", "<p>" + html(kValue) + "</p>", "html"},
      {"hex lower", "digest " + hex(kValue, false) + " end", "hex"},
      {"hex upper", "digest " + hex(kValue, true) + " end", "hex"},
  };
  for (const auto& c : cases) {
    ASSERT_TRUE(leaks(c.body)) << c.name << ": the case holds the value";
    for (size_t step : {(size_t)1, (size_t)2, (size_t)3, (size_t)7, (size_t)64, c.body.size()}) {
      std::vector<std::string> forms;
      std::string out = masked(idx, c.body, step, &forms);
      EXPECT_FALSE(leaks(out)) << c.name << " in pieces of " << step << ": " << out;
      if (c.form != "hex") EXPECT_NE(out.find(kPh), std::string::npos) << c.name << ": " << out;
      EXPECT_EQ(forms, std::vector<std::string>{"API_TOKEN:" + c.form}) << c.name << " step " << step;
    }
  }
}

TEST(ValueMasking, Base64AtEveryAlignmentBothAlphabetsAndWrapped) {
  auto idx = *SecretIndex::build(config());
  for (std::string prefix : {"", "u", "us", "user:", "Basic:", "ab"}) {
    std::string b64 = base64_encode(prefix + kValue + "tail");
    for (const std::string& body :
         {"{\"auth\": \"Basic " + b64 + "\"}", "{\"auth\": \"" + urlsafe(b64) + "\"}", "x=" + json_php(b64),
          "x=" + percent(b64, true, false), "-----BEGIN-----\r\n" + wrap(b64, 4)}) {
      ASSERT_TRUE(leaks(body) || body.find_first_of("\r%") != std::string::npos) << body;  // (those two hide it from leaks())
      for (size_t step : {(size_t)1, (size_t)5, body.size()}) {
        std::vector<std::string> forms;
        std::string out = masked(idx, body, step, &forms);
        std::string joined = out;
        std::erase(joined, '\r'), std::erase(joined, '\n');
        EXPECT_FALSE(leaks(out) || leaks(joined)) << "prefix '" << prefix << "' step " << step << ": " << out;
        ASSERT_EQ(forms.size(), 1u) << body;
        EXPECT_TRUE(forms[0].starts_with("API_TOKEN:base64")) << forms[0];
        // No bit of the value is left: decoding the masked text gives nothing of it.
        EXPECT_NE(out.find("****"), std::string::npos) << out;
      }
    }
  }
}

TEST(ValueMasking, ChunksAndReadsSplitAnywhereAndSeveralValues) {
  auto idx = *SecretIndex::build(config());
  std::string body;
  for (int i = 0; i < 50; ++i) body += std::string(i * 37 % 200, 'x') + kValue + json_php(kValue) + "keyonly-value-42";
  std::mt19937 rng(12);
  for (int round = 0; round < 20; ++round) {
    ValueMasker m(idx, {0, 1});
    std::string out;
    for (size_t i = 0; i < body.size();) {
      size_t n = 1 + rng() % 300;
      m.feed(std::string_view(body).substr(i, n), out);
      i += n;
    }
    m.finish(out);
    ASSERT_FALSE(leaks(out));
    ASSERT_EQ(out.find("keyonly-value-42"), std::string::npos);
    size_t count = 0;
    for (size_t p = 0; (p = out.find(kPh, p)) != std::string::npos; p += kPh.size()) ++count;
    ASSERT_EQ(count, 100u);
  }
}

TEST(ValueMasking, LeavesOtherTextAloneAndIsCheapOnRandomBytes) {
  auto idx = *SecretIndex::build(config());
  const std::string text = "{\"path\": \"\\/a\\/b\", \"q\": \"%2F%41\", \"e\": \"&amp;&#47;\", \"v\": \"sk/live+Tok=9_a-Z\"}";
  EXPECT_EQ(masked(idx, text, 3), text);  // escapes of other text, a prefix of the value
  std::mt19937 rng(3);
  std::string noise(1 << 20, '\0');
  for (char& c : noise) c = "ab%\\&+/=sk-_x0123456789"[rng() % 23];
  EXPECT_EQ(masked(idx, noise, 16384), noise);
}

// ---- base32, hex with separators, UTF-16/32 (issue 39.8) ----

std::string b32(std::string_view in, bool hexa, bool pad, bool lower) {  // RFC 4648 sections 6 and 7
  const char* abc = hexa ? "0123456789ABCDEFGHIJKLMNOPQRSTUV" : "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
  std::string out;
  for (size_t i = 0; i < in.size(); i += 5) {
    unsigned char g[5] = {};
    size_t n = std::min<size_t>(5, in.size() - i);
    std::memcpy(g, in.data() + i, n);
    uint64_t v = 0;
    for (unsigned char c : g) v = v << 8 | c;
    static const size_t kChars[] = {0, 2, 4, 5, 7, 8};
    for (size_t k = 0; k < 8; ++k) out += k < kChars[n] ? abc[(v >> (35 - 5 * k)) & 31] : '=';
  }
  if (!pad) std::erase(out, '=');
  if (lower)
    for (char& c : out) c = (char)std::tolower((unsigned char)c);
  return out;
}
std::string hex_sep(std::string_view v, bool upper, char sep) {
  std::string r;
  char b[4];
  for (size_t i = 0; i < v.size(); ++i) {
    if (i && sep) r += sep;
    std::snprintf(b, sizeof b, upper ? "%02X" : "%02x", (unsigned char)v[i]), r += b;
  }
  return r;
}
std::string utf(std::string_view ascii, int unit, bool big) {  // (ASCII text: one unit a byte)
  std::string r;
  for (char c : ascii)
    for (int k = 0; k < unit; ++k) r += (big ? k == unit - 1 : k == 0) ? c : '\0';
  return r;
}

// Whether `s` still holds kValue in one of the new forms.
bool leaks_more(std::string_view s) {
  for (char sep : {'\0', ':', '-', ' '})
    for (bool up : {false, true})
      if (s.find(hex_sep(kValue, up, sep)) != std::string_view::npos) return true;
  for (int unit : {2, 4})
    for (bool big : {false, true})
      if (s.find(utf(kValue, unit, big)) != std::string_view::npos) return true;
  for (bool hexa : {false, true})
    for (size_t a = 0; a < 5; ++a) {  // the characters only the value's bits decide, at each alignment
      std::string enc = b32(std::string(a, '\0') + kValue, hexa, false, false);
      size_t first = (8 * a + 4) / 5, end = 8 * (a + kValue.size()) / 5;
      std::string core = enc.substr(first, end - first), low = core;
      for (char& c : low) c = (char)std::tolower((unsigned char)c);
      if (s.find(core) != std::string_view::npos || s.find(low) != std::string_view::npos) return true;
    }
  return false;
}

TEST(ValueMasking, Base32HexWithSeparatorsAndUtf16And32AtEveryReadSplit) {
  ASSERT_EQ(b32("foobar", false, true, false), "MZXW6YTBOI======");  // RFC 4648's vectors
  ASSERT_EQ(b32("foobar", true, true, false), "CPNMUOJ1E8======");
  auto idx = *SecretIndex::build(config());
  struct Case {
    std::string name, body, form;
  } cases[] = {
      {"hex ':'", "fp " + hex_sep(kValue, false, ':') + " end", "hex"},
      {"hex '-' upper", "fp " + hex_sep(kValue, true, '-') + " end", "hex"},
      {"hex ' '", "fp " + hex_sep(kValue, false, ' ') + " end", "hex"},
      {"utf-16le", "\xff\xfe" + utf("v=" + kValue, 2, false), "utf-16le"},
      {"utf-16be", "\xfe\xff" + utf("v=" + kValue, 2, true), "utf-16be"},
      {"utf-32le", utf("v=" + kValue, 4, false), "utf-32le"},
      {"utf-32be", utf("v=" + kValue, 4, true), "utf-32be"},
  };
  for (const auto& c : cases) {
    ASSERT_TRUE(leaks_more(c.body)) << c.name << ": the case holds the value";
    for (size_t step : {(size_t)1, (size_t)2, (size_t)3, (size_t)7, (size_t)64, c.body.size()}) {
      std::vector<std::string> forms;
      std::string out = masked(idx, c.body, step, &forms);
      EXPECT_FALSE(leaks_more(out) || leaks(out)) << c.name << " in pieces of " << step;
      EXPECT_EQ(forms, std::vector<std::string>{"API_TOKEN:" + c.form}) << c.name << " step " << step;
    }
  }
  // The replacement keeps the form: the placeholder's hex with the same separator, the placeholder in the same UTF.
  EXPECT_EQ(masked(idx, hex_sep(kValue, true, ':'), 5), hex_sep(kPh, false, ':'));
  EXPECT_EQ(masked(idx, utf(kValue, 2, false), 3), utf(kPh, 2, false));
  // Separators are the same all along (a mixed run is not a spelling of anything).
  std::string mixed = hex_sep(kValue.substr(0, 4), false, ':') + "-" + hex_sep(kValue.substr(4), false, ':');
  EXPECT_EQ(masked(idx, mixed, 4), mixed);

  for (std::string prefix : {"", "u", "us", "use", "user", "user:", "ab"})
    for (bool hexa : {false, true})
      for (bool pad : {false, true})
        for (bool lower : {false, true}) {
          std::string body = "{\"k\": \"" + b32(prefix + kValue + "tail", hexa, pad, lower) + "\"}";
          ASSERT_TRUE(leaks_more(body)) << body;
          for (size_t step : {(size_t)1, (size_t)4, body.size()}) {
            std::vector<std::string> forms;
            std::string out = masked(idx, body, step, &forms);
            EXPECT_FALSE(leaks_more(out)) << "prefix '" << prefix << "' " << body << " step " << step << ": " << out;
            EXPECT_EQ(forms, std::vector<std::string>{std::string("API_TOKEN:") + (hexa ? "base32hex" : "base32")}) << body;
            EXPECT_NE(out.find("*******"), std::string::npos) << out;
          }
        }
}

std::string gzip(std::string_view in, int bits) {
  z_stream z{};
  deflateInit2(&z, 6, Z_DEFLATED, bits, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, in.size()) + 32, '\0');
  z.next_in = (Bytef*)in.data(), z.avail_in = (uInt)in.size();
  z.next_out = (Bytef*)out.data(), z.avail_out = (uInt)out.size();
  deflate(&z, Z_FINISH);
  out.resize(out.size() - z.avail_out);
  deflateEnd(&z);
  return out;
}

TEST(ContentDecoding, GzipDeflateRawAndStackedAreDecodedInPieces) {
  using namespace exg::egress::detail;
  const std::string body = "{\"h\": \"" + kValue + "\"}" + std::string(5000, 'z');
  struct Case {
    std::vector<std::string> codings;
    std::string wire;
  } cases[] = {
      {{"gzip"}, gzip(body, 31)},
      {{"x-gzip"}, gzip(body, 31) + gzip("second member", 31)},
      {{"deflate"}, gzip(body, 15)},
      {{"deflate"}, gzip(body, -15)},
      {{"deflate", "gzip"}, gzip(gzip(body, 15), 31)},
  };
  for (auto& c : cases) {
    for (size_t step : {(size_t)1, (size_t)100, c.wire.size()}) {
      auto d = BodyDecoder::make(c.codings);
      ASSERT_TRUE(d);
      std::string out;
      for (size_t i = 0; i < c.wire.size(); i += step) ASSERT_TRUE(d->feed(std::string_view(c.wire).substr(i, step), out));
      ASSERT_TRUE(d->finish(out));
      EXPECT_TRUE(out.starts_with(body)) << c.codings[0] << " step " << step;
    }
  }
  // Truncated or corrupt: an error, never passed on as is.
  auto d = BodyDecoder::make({"gzip"});
  std::string out, w = gzip(body, 31);
  EXPECT_TRUE(d->feed(std::string_view(w).substr(0, w.size() / 2), out));
  EXPECT_FALSE(d->finish(out));
  auto bad = BodyDecoder::make({"gzip"});
  EXPECT_FALSE(bad->feed("this is not gzip at all", out));
}

// A decompression bomb (found by fuzz/content_decoding.cpp): a few KB of
// "gzip, gzip" made 2 GiB in one feed(). Now one feed stops at kMaxFeedOutput
// and the body is refused (the proxy cuts it), and at most kMaxStages codings.
TEST(ContentDecoding, BombsAreRefusedNotExpanded) {
  using namespace exg::egress::detail;
  const std::string zeros(BodyDecoder::kMaxFeedOutput + (1 << 20), '\0');
  const std::string bomb = gzip(gzip(zeros, 31), 31);
  ASSERT_LT(bomb.size(), 200u * 1024);
  auto d = BodyDecoder::make({"gzip", "gzip"});
  ASSERT_TRUE(d);
  std::string out;
  EXPECT_FALSE(d->feed(bomb, out));
  EXPECT_LE(out.size(), BodyDecoder::kMaxFeedOutput);
  // The same body of one layer in reads of 16 KiB, as the proxy reads: decoded.
  const std::string one = gzip(zeros, 31);
  auto e = BodyDecoder::make({"gzip"});
  size_t total = 0;
  for (size_t i = 0; i < one.size(); i += 16384) {
    std::string piece;
    ASSERT_TRUE(e->feed(std::string_view(one).substr(i, 16384), piece));
    total += piece.size();
  }
  std::string rest;
  ASSERT_TRUE(e->finish(rest));
  EXPECT_EQ(total + rest.size(), zeros.size());
  auto many = BodyDecoder::make({"gzip", "gzip", "gzip", "gzip", "gzip"});
  ASSERT_FALSE(many);
  EXPECT_NE(many.error().why.find("5 times"), std::string::npos) << many.error().why;
}

TEST(ContentDecoding, CodingsReadFromHeadersAndUnknownOnesRefused) {
  using namespace exg::egress::detail;
  auto resp = *parse_response_head(
      "HTTP/1.1 200 OK\r\nContent-Encoding: identity, GZIP\r\nTransfer-Encoding: deflate, chunked\r\n\r\n");
  EXPECT_EQ(response_codings(resp), (std::vector<std::string>{"gzip", "deflate"}));
  for (const char* c : {"br", "zstd", "compress", "x-weird"}) {
    auto d = BodyDecoder::make({"gzip", c});
    ASSERT_FALSE(d) << c;
    EXPECT_NE(d.error().why.find(c), std::string::npos);
  }
  EXPECT_TRUE(BodyDecoder::make({})->empty());
}

TEST(SecretIndex, HeaderLimitedSecrets) {
  auto idx = *SecretIndex::build(config());
  EXPECT_EQ(idx.allowed_in_header({0, 1}, "X-Api-Key"), (std::vector<size_t>{0, 1}));
  EXPECT_EQ(idx.allowed_in_header({0, 1}, "Authorization"), std::vector<size_t>{0});
  // Replaced only in the headers it names; elsewhere (issue 45) it stays the
  // placeholder, and what is left after injection is what passed as is.
  const std::string ph = config()->secrets[1].placeholder;
  EXPECT_EQ(inject_secrets(ph, idx, idx.allowed_in_header({0, 1}, "x-api-key")), "keyonly-value-42");
  const std::string other = inject_secrets(ph, idx, idx.allowed_in_header({0, 1}, "authorization"));
  EXPECT_EQ(other, ph);
  EXPECT_EQ(idx.occurring_in_header(other, {0, 1}), std::vector<size_t>{1});
  EXPECT_TRUE(idx.occurring_in_header("keyonly-value-42", {0, 1}).empty());
  // On its own host (both secrets are api.secret.test's) it is not refused anywhere.
  EXPECT_EQ(idx.find_in_header(ph, {0, 1}), nullptr);
  EXPECT_EQ(idx.find("{\"content\": \"KEY_ONLY=" + ph + "\"}", {0, 1}), nullptr);
  // To a host it is not meant for (no own secrets there), it is.
  EXPECT_EQ(idx.find("{\"content\": \"KEY_ONLY=" + ph + "\"}", {}), &idx.secrets()[1]);
}

TEST(SecretIndex, OccurringFindsOnlyTheSecretsAskedAboutAnyCaseAndInBasic) {
  auto idx = *SecretIndex::build(config());
  const std::string ph0 = config()->secrets[0].placeholder, ph1 = config()->secrets[1].placeholder;
  std::string upper = ph1;
  for (char& c : upper) c = (char)std::toupper((unsigned char)c);
  EXPECT_EQ(idx.occurring("a " + ph0 + " b " + upper, {0, 1}), (std::vector<size_t>{0, 1}));
  EXPECT_EQ(idx.occurring("a " + ph0 + " b " + ph1, {1}), std::vector<size_t>{1});
  EXPECT_TRUE(idx.occurring("a " + ph0, {}).empty());
  EXPECT_TRUE(idx.occurring("nothing here at all", {0, 1}).empty());
  EXPECT_EQ(idx.occurring_in_header("Basic " + base64_encode("me:" + ph1), {0, 1}), std::vector<size_t>{1});
}

TEST(PlaceholderScanner, OwnPlaceholdersPassAndAreReportedOnceOthersAreRefused) {
  auto idx = *SecretIndex::build(config());
  const std::string ph0 = config()->secrets[0].placeholder, ph1 = config()->secrets[1].placeholder;
  // KEY_ONLY's own host: its placeholder in a body, split across reads, passes and is reported once.
  PlaceholderScanner own(idx, {0, 1});
  EXPECT_EQ(own.feed("{\"tool_result\": \"KEY_ONLY=" + ph1.substr(0, 10)), nullptr);
  EXPECT_EQ(own.feed(ph1.substr(10) + "\n"), nullptr);
  EXPECT_EQ(own.take_passed(), std::vector<size_t>{1});
  EXPECT_EQ(own.feed(" again " + ph1), nullptr);
  EXPECT_TRUE(own.take_passed().empty());
  // A host KEY_ONLY is not meant for (only API_TOKEN's): refused.
  PlaceholderScanner other(idx, {0});
  EXPECT_EQ(other.feed("x=" + ph0 + "&y=" + ph1), &idx.secrets()[1]);
  EXPECT_EQ(other.take_passed(), std::vector<size_t>{0});
}

TEST(PlaceholderRefusal, SaysWhichSecretWhereWhichHostAndWhereItIsMeantFor) {
  auto cfg = config();
  cfg->secrets[1].hosts = {"api.secret.test", "*.secret.test"};
  EXPECT_EQ(placeholder_refusal(cfg->secrets[1], "evil.test", "body"),
            "the placeholder of secret KEY_ONLY (in the body) was refused on its way to evil.test: it is meant only "
            "for api.secret.test, *.secret.test (header x-api-key)");
  EXPECT_EQ(placeholder_refusal(cfg->secrets[0], "", "connect target"),
            "the placeholder of secret API_TOKEN (in the connect target) was refused on its way to a host it is not "
            "meant for: it is meant only for api.secret.test");
  // Never the value.
  EXPECT_EQ(placeholder_refusal(cfg->secrets[0], "x.test", "url").find(cfg->secrets[0].value), std::string::npos);
}

}  // namespace
