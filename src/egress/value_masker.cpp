// Masking of secrets' values in what an upstream answers (issue 12.5). A value
// can come back in many spellings: as is; JSON/JS-escaped (PHP writes "\/" for
// "/", any character may be "\uXXXX"); percent-encoded (either hex case, "+"
// for a space); as HTML character references; base64 (standard or url-safe, at
// any of the three alignments inside the encoded text, line-wrapped or not);
// base32 and base32hex (RFC 4648, either case, at any of the five alignments,
// padded or not: the padding follows the value's characters); hex, either
// case, bare or with ':' '-' ' ' between the bytes; UTF-16 and UTF-32, either
// byte order. Matching of the text forms is done per character (each character of the value may take
// any of its forms, mixed), so no list of spellings has to be enumerated; each
// match is replaced by the placeholder (text forms), its hex (hex, with the
// same separator), the placeholder in the same UTF (UTF-16/32) or by '*' over
// the whole base64/base32 span (the neighbouring characters of such a span
// carry bits of the value too, so they are covered).
#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "egress/secrets.hpp"

namespace exg::egress {

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// n hex digits at s[p..] as a number, or -1.
long hex_at(std::string_view s, size_t p, size_t n) {
  if (p + n > s.size()) return -1;
  long v = 0;
  for (size_t k = 0; k < n; ++k) {
    int d = hex_digit(s[p + k]);
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

std::string utf8(uint32_t cp) {
  std::string r;
  if (cp < 0x80) {
    r += (char)cp;
  } else if (cp < 0x800) {
    r += (char)(0xC0 | cp >> 6), r += (char)(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    r += (char)(0xE0 | cp >> 12), r += (char)(0x80 | ((cp >> 6) & 0x3F)), r += (char)(0x80 | (cp & 0x3F));
  } else {
    r += (char)(0xF0 | cp >> 18), r += (char)(0x80 | ((cp >> 12) & 0x3F)), r += (char)(0x80 | ((cp >> 6) & 0x3F));
    r += (char)(0x80 | (cp & 0x3F));
  }
  return r;
}

bool is_b64(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/' ||
         c == '-' || c == '_';
}

// The url-safe alphabet folded onto the standard one.
char b64_fold(char c) { return c == '-' ? '+' : c == '_' ? '/' : c; }

char lower_ascii(char c) { return c >= 'A' && c <= 'Z' ? (char)(c + 32) : c; }
char upper_ascii(char c) { return c >= 'a' && c <= 'z' ? (char)(c - 32) : c; }

constexpr std::string_view kBase32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";     // RFC 4648 section 6
constexpr std::string_view kBase32Hex = "0123456789ABCDEFGHIJKLMNOPQRSTUV";  // section 7

bool is_b32(char c, bool hex) { return (hex ? kBase32Hex : kBase32).find(upper_ascii(c)) != std::string_view::npos; }

// Base32 without padding (the masker matches the characters, not the '=').
std::string base32_encode(std::string_view in, std::string_view alphabet) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : in) {
    acc = (acc << 8) | c, bits += 8;
    while (bits >= 5) out += alphabet[(acc >> (bits - 5)) & 31], bits -= 5;
  }
  if (bits > 0) out += alphabet[(acc << (5 - bits)) & 31];
  return out;
}

bool is_hex_separator(char c) { return c == ':' || c == '-' || c == ' '; }

// The code points of UTF-8 text; nullopt when it is not valid UTF-8 (a value
// that is not text has no UTF-16 form to look for).
std::optional<std::vector<uint32_t>> code_points(std::string_view s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = s[i];
    int n = c < 0x80 ? 0 : (c & 0xE0) == 0xC0 ? 1 : (c & 0xF0) == 0xE0 ? 2 : (c & 0xF8) == 0xF0 ? 3 : -1;
    if (n < 0 || i + n >= s.size()) return std::nullopt;
    uint32_t cp = n == 0 ? c : n == 1 ? (c & 0x1F) : n == 2 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k <= n; ++k) {
      unsigned char d = s[i + k];
      if ((d & 0xC0) != 0x80) return std::nullopt;
      cp = (cp << 6) | (d & 0x3F);
    }
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) return std::nullopt;
    out.push_back(cp);
    i += n + 1;
  }
  return out;
}

// The text in UTF-16 (units 2) or UTF-32 (units 4), little or big endian.
std::string utf_encode(const std::vector<uint32_t>& cps, int unit, bool big) {
  std::string out;
  auto put = [&](uint32_t v) {
    for (int k = 0; k < unit; ++k) {
      int shift = big ? 8 * (unit - 1 - k) : 8 * k;
      out += (char)((v >> shift) & 0xFF);
    }
  };
  for (uint32_t cp : cps) {
    if (unit == 2 && cp >= 0x10000) {
      put(0xD800 + ((cp - 0x10000) >> 10));
      put(0xDC00 + ((cp - 0x10000) & 0x3FF));
    } else {
      put(cp);
    }
  }
  return out;
}

enum Esc : unsigned { kPlain = 0, kJson = 1, kPercent = 2, kHtml = 4, kUrlSafe = 8 };

// One unit of the text at p standing for bytes of the value: a literal byte or
// one escape. `bytes` is what it decodes to; `len` its length in the text.
struct Unit {
  size_t len = 0;
  std::string bytes;
  unsigned esc = kPlain;
};

Unit decode_unit(std::string_view s, size_t p) {
  Unit u;
  char c = s[p];
  if (c == '%') {
    if (long v = hex_at(s, p + 1, 2); v >= 0) return {3, std::string(1, (char)v), kPercent};
  } else if (c == '+') {
    return {1, " ", kPercent};  // form encoding's space (a literal '+' is matched by the caller first)
  } else if (c == '\\' && p + 1 < s.size()) {
    char n = s[p + 1];
    if (n == 'u') {
      long v = hex_at(s, p + 2, 4);
      if (v < 0) return u;
      if (v >= 0xD800 && v < 0xDC00 && p + 7 < s.size() && s[p + 6] == '\\' && s[p + 7] == 'u') {
        long lo = hex_at(s, p + 8, 4);
        if (lo >= 0xDC00 && lo < 0xE000) return {12, utf8(0x10000 + (((uint32_t)v - 0xD800) << 10) + ((uint32_t)lo - 0xDC00)), kJson};
      }
      return {6, utf8((uint32_t)v), kJson};
    }
    if (n == 'x') {
      if (long v = hex_at(s, p + 2, 2); v >= 0) return {4, std::string(1, (char)v), kJson};
      return u;
    }
    static const char kShort[] = "b\bf\fn\nr\rt\t";
    for (size_t k = 0; k + 1 < sizeof kShort; k += 2)
      if (n == kShort[k]) return {2, std::string(1, kShort[k + 1]), kJson};
    if (std::strchr("/\\\"'", n)) return {2, std::string(1, n), kJson};
  } else if (c == '&' && p + 2 < s.size()) {
    if (s[p + 1] == '#') {
      bool hex = s[p + 2] == 'x' || s[p + 2] == 'X';
      size_t q = p + 2 + (hex ? 1 : 0), start = q;
      uint32_t v = 0;
      while (q < s.size() && q - start < 7) {
        int d = hex ? hex_digit(s[q]) : (s[q] >= '0' && s[q] <= '9' ? s[q] - '0' : -1);
        if (d < 0) break;
        v = v * (hex ? 16 : 10) + (uint32_t)d;
        ++q;
      }
      if (q > start && q < s.size() && s[q] == ';' && v < 0x110000) return {q + 1 - p, utf8(v), kHtml};
      return u;
    }
    static const std::pair<std::string_view, char> kNamed[] = {
        {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}, {"&sol;", '/'}, {"&plus;", '+'},
        {"&equals;", '='}};
    for (const auto& [name, ch] : kNamed)
      if (s.substr(p, name.size()) == name) return {name.size(), std::string(1, ch), kHtml};
  }
  return u;
}

// The longest text a byte of the value can take ("&#x10FFFF;" for up to 4 bytes, "%XX" per
// byte, "\uXXXX" per 1-3 bytes): 10 per byte bounds every form, base64's line breaks included.
constexpr size_t kMaxTextPerByte = 10;

}  // namespace

// One spelling family of one value.
struct ValueMasker::Target {
  enum Kind { Text, Base64, Hex, Base32, Raw } kind = Text;
  // Text: the value; Base64/Base32: the characters that only its bits decide
  // (Base32 upper case); Hex: lower hex; Raw: the exact bytes (UTF-16/32).
  std::string want;
  bool lead = false, trail = false;  // Base64/Base32: a character shared with the bytes before / after
  size_t pair = 0;           // index into pairs_
  bool b32hex = false;       // Base32: the base32hex alphabet
  const char* form = nullptr;  // Raw: "utf-16le" ...
  std::string replacement;     // Raw: the placeholder in the same encoding
  size_t unit = 0;             // Raw: 2 or 4
  int le_twin = -1;            // Raw, big endian: the little-endian target of the same value
};

ValueMasker::ValueMasker(const SecretIndex& idx, const std::vector<size_t>& secrets) {
  for (size_t i : secrets) {
    const Secret& s = idx.secrets()[i];
    if (s.value.empty()) continue;
    size_t pi = pairs_.size();
    pairs_.push_back(Pair{s.value, s.placeholder, s.name});
    targets_.push_back(Target{Target::Text, s.value, false, false, pi});
    // Short values would match by chance in encoded text: only their plain forms are masked.
    if (s.value.size() >= 6) {
      std::string hex;
      for (unsigned char c : s.value) hex += "0123456789abcdef"[c >> 4], hex += "0123456789abcdef"[c & 15];
      targets_.push_back(Target{Target::Hex, hex, false, false, pi});
      for (size_t a = 0; a < 3; ++a) {
        std::string enc = base64_encode(std::string(a, '\0') + s.value + std::string(2, '\0'));
        size_t bit_from = 8 * a, bit_to = 8 * (a + s.value.size());
        size_t first = (bit_from + 5) / 6, end = bit_to / 6;
        targets_.push_back(Target{Target::Base64, enc.substr(first, end - first), bit_from % 6 != 0, bit_to % 6 != 0, pi});
      }
      // Base32: 5 bits a character, so the value starts at one of five alignments.
      for (bool hexa : {false, true})
        for (size_t a = 0; a < 5; ++a) {
          std::string enc = base32_encode(std::string(a, '\0') + s.value, hexa ? kBase32Hex : kBase32);
          size_t bit_from = 8 * a, bit_to = 8 * (a + s.value.size());
          size_t first = (bit_from + 4) / 5, end = bit_to / 5;
          Target t{Target::Base32, enc.substr(first, end - first), bit_from % 5 != 0, bit_to % 5 != 0, pi};
          t.b32hex = hexa;
          targets_.push_back(std::move(t));
        }
      // UTF-16 and UTF-32, both byte orders (a value that is valid UTF-8 text).
      auto cps = code_points(s.value);
      auto pcps = code_points(s.placeholder);
      if (cps && pcps) {
        static const struct {
          int unit;
          bool big;
          const char* form;
        } kUtf[] = {{2, false, "utf-16le"}, {2, true, "utf-16be"}, {4, false, "utf-32le"}, {4, true, "utf-32be"}};
        for (const auto& u : kUtf) {
          Target t{Target::Raw, utf_encode(*cps, u.unit, u.big), false, false, pi};
          t.form = u.form;
          t.replacement = utf_encode(*pcps, u.unit, u.big);
          t.unit = static_cast<size_t>(u.unit);
          if (u.big) t.le_twin = static_cast<int>(targets_.size()) - 1;  // (kUtf: little endian first)
          targets_.push_back(std::move(t));
        }
      }
    }
    keep_ = std::max(keep_, s.value.size() * kMaxTextPerByte * 4 / 3 + 16);
  }
  // Where a match can start: an escape, or a first byte followed by a possible second one.
  for (const Target& t : targets_) {
    auto variants = [&](char c) {
      std::string v(1, c);
      if (t.kind == Target::Hex) v += (char)std::toupper((unsigned char)c);
      if (t.kind == Target::Base32) v += lower_ascii(c);
      if (t.kind == Target::Base64) v += c == '+' ? '-' : c == '/' ? '_' : c;
      return v;
    };
    const bool escapes = t.kind == Target::Text || t.kind == Target::Base64;  // forms decode_unit applies to
    if (escapes) {
      for (char c : std::string_view("%\\&")) first_[(unsigned char)c] = esc_start_[(unsigned char)c] = true;
      if (t.want[0] == ' ') first_['+'] = esc_start_['+'] = true;
    }
    std::string seconds;
    if (t.want.size() > 1) {
      seconds = variants(t.want[1]);
      if (escapes) seconds += "%\\&";
      if (t.want[1] == ' ') seconds += '+';
      if (t.kind == Target::Base64) seconds += "\r\n";
    }
    for (unsigned char f : variants(t.want[0])) {
      first_[f] = true;
      if (seconds.empty()) esc_start_[f] = true;  // one-byte value: any byte may follow
      for (unsigned char c2 : seconds) pair_.set(f << 8 | c2);
    }
  }
  index_targets();
}

// Per byte, the targets a match starting there may be of: the rest are not
// tried at all (the cost per candidate stays that of the few forms it fits).
void ValueMasker::index_targets() {
  for (unsigned b = 0; b < 256; ++b) {
    const char lit = static_cast<char>(b);
    const bool escape = lit == '%' || lit == '\\' || lit == '&' || lit == '+';
    for (size_t k = 0; k < targets_.size(); ++k) {
      const Target& t = targets_[k];
      const char w0 = t.want[0];
      bool may = t.kind == Target::Hex      ? lower_ascii(lit) == w0
                 : t.kind == Target::Text   ? lit == w0 || escape
                 : t.kind == Target::Base32 ? upper_ascii(lit) == w0
                 : t.kind == Target::Raw    ? lit == w0
                                            : b64_fold(lit) == w0 || escape;
      if (may) by_byte_[b].push_back(static_cast<uint32_t>(k));
    }
  }
}

ValueMasker::~ValueMasker() = default;
ValueMasker::ValueMasker(ValueMasker&&) noexcept = default;

// Whether `t` matches the text at p; on success [start, end) is the span to replace.
bool ValueMasker::match(const Target& t, std::string_view s, size_t p, size_t floor, Span& span, bool* ran_out) const {
  // ran_out: set when what is there so far matches and the text ends before the spelling does.
  auto out_of_text = [ran_out] {
    if (ran_out) *ran_out = true;
    return false;
  };
  size_t q = p, w = 0;
  unsigned esc = kPlain;
  if (t.kind == Target::Hex) {
    // Two digits a byte; between bytes nothing, or the same separator every time.
    char sep = 0;
    for (; w < t.want.size(); w += 2) {
      if (w == 2 && q < s.size() && is_hex_separator(s[q])) sep = s[q];
      if (w > 0 && sep) {
        if (q >= s.size()) return out_of_text();
        if (s[q] != sep) return false;
        ++q;
      }
      if (q + 2 > s.size()) return (q >= s.size() || lower_ascii(s[q]) == t.want[w]) ? out_of_text() : false;
      if (lower_ascii(s[q]) != t.want[w] || lower_ascii(s[q + 1]) != t.want[w + 1]) return false;
      q += 2;
    }
    span = {p, q, "hex", sep};
    return true;
  }
  if (t.kind == Target::Raw) {
    if (p > s.size()) return false;
    if (s.size() - p < t.want.size()) return t.want.starts_with(s.substr(p)) ? out_of_text() : false;
    if (s.compare(p, t.want.size(), t.want) != 0) return false;
    span = {p, p + t.want.size(), t.form};
    return true;
  }
  if (t.kind == Target::Base32) {
    for (; w < t.want.size(); ++w) {
      if (p + w >= s.size()) return out_of_text();
      if (upper_ascii(s[p + w]) != t.want[w]) return false;
    }
    q = p + w;
    size_t start = p;
    if (t.lead && p > floor && is_b32(s[p - 1], t.b32hex)) start = p - 1;
    if (t.trail && q < s.size() && is_b32(s[q], t.b32hex)) ++q;
    span = {start, q, t.b32hex ? "base32hex" : "base32"};
    return true;
  }
  const bool b64 = t.kind == Target::Base64;
  while (w < t.want.size()) {
    if (q >= s.size()) return out_of_text();
    if (b64 && w > 0 && (s[q] == '\r' || s[q] == '\n' || s[q] == '\\')) {  // line-wrapped base64 (MIME, PEM), also in JSON
      for (std::string_view br : {"\r\n", "\n", "\\r\\n", "\\n"})
        if (s.substr(q, br.size()) == br) {
          q += br.size();
          break;
        }
      if (q >= s.size()) return out_of_text();
    }
    char c = s[q];
    char want = t.want[w];
    if (b64 ? b64_fold(c) == want : c == want) {
      if (b64 && c != want) esc |= kUrlSafe;
      ++q, ++w;
      continue;
    }
    Unit u = decode_unit(s, q);
    // (an escape cut by the end of the text: "\u00" may yet be the character wanted)
    if (!u.len) return c && std::strchr("%\\&", c) && s.size() - q < 12 ? out_of_text() : false;
    if (b64) {
      if (u.bytes.size() != 1 || b64_fold(u.bytes[0]) != want) return false;
    } else if (t.want.compare(w, u.bytes.size(), u.bytes) != 0) {
      return false;
    }
    q += u.len, w += u.bytes.size(), esc |= u.esc;
  }
  size_t start = p;
  if (b64) {
    if (t.lead && p > floor && is_b64(s[p - 1])) start = p - 1;
    if (t.trail && q < s.size() && is_b64(s[q])) ++q;
  }
  const char* form = b64 ? ((esc & kUrlSafe) ? "base64url" : "base64")
                         : (esc & kJson) ? "json" : (esc & kPercent) ? "percent" : (esc & kHtml) ? "html" : "plain";
  span = {start, q, form};
  return true;
}

// The first position in [from, to) where a match can start, else `to` (one
// table look-up a byte, a second for the byte after; most bytes start nothing).
size_t ValueMasker::next_candidate(std::string_view s, size_t from, size_t to) const {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (; from < to; ++from) {
    unsigned char c = p[from];
    if (!first_[c]) continue;
    if (esc_start_[c] || from + 1 >= n || pair_.test((size_t)c << 8 | p[from + 1])) return from;
  }
  return to;
}

void ValueMasker::feed(std::string_view in, std::string& out) {
  if (pairs_.empty()) return (void)out.append(in);
  std::string buf = std::move(carry_);
  buf.append(in);
  std::string_view s(buf);
  // Everything before `limit` is final unless a match starting there runs past it
  // (keep_ bounds a match's length); a base64 span may start one character before
  // its core, so cores are looked for up to `limit` itself.
  size_t limit = s.size() > keep_ ? s.size() - keep_ : 0, i = 0, j = 0;
  const size_t scan_to = std::min(limit + 1, s.size());
  for (;;) {
    j = next_candidate(s, j, scan_to);
    if (j > limit || j >= s.size()) break;
    Span best{}, sp{};
    const Target* hit = nullptr;
    // What the byte here stands for, as is or decoded once: a target whose first
    // character is neither is not tried.
    const char lit = s[j];
    char dec = lit;
    if (lit == '%' || lit == '\\' || lit == '&' || lit == '+') {
      Unit u = decode_unit(s, j);
      if (u.len) dec = u.bytes[0];
    }
    for (uint32_t k : by_byte_[(unsigned char)lit]) {
      const Target& t = targets_[k];
      char w0 = t.want[0];
      bool may = t.kind == Target::Hex      ? lower_ascii(lit) == w0
                 : t.kind == Target::Text   ? lit == w0 || dec == w0
                 : t.kind == Target::Base32 ? upper_ascii(lit) == w0
                 : t.kind == Target::Raw    ? lit == w0
                                            : b64_fold(lit) == w0 || b64_fold(dec) == w0;
      if (may && match(t, s, j, i, sp) && (!hit || sp.start < best.start || (sp.start == best.start && sp.end > best.end)))
        best = sp, hit = &t;
    }
    // ASCII in UTF-16LE holds the same value's UTF-16BE one byte earlier
    // ("\0e\0x" inside " \0e\0x\0"), UTF-32 three: either replacement gives
    // the same bytes; the form the text is in is the one aligned to whole
    // units from the start of what this masker was fed (offset_).
    if (hit && hit->le_twin >= 0 && (offset_ + best.start) % hit->unit != 0) {
      const Target& le = targets_[static_cast<size_t>(hit->le_twin)];
      Span alt{};
      if (match(le, s, best.start + hit->unit - 1, i, alt) && (offset_ + alt.start) % le.unit == 0) best = alt, hit = &le;
    }
    if (!hit || best.start >= limit) {
      ++j;
      continue;
    }
    out.append(s.substr(i, best.start - i));
    const Pair& pr = pairs_[hit->pair];
    if (hit->kind == Target::Text) {
      out += pr.placeholder;
    } else if (hit->kind == Target::Hex) {
      for (size_t k = 0; k < pr.placeholder.size(); ++k) {
        unsigned char c = pr.placeholder[k];
        if (k && best.sep) out += best.sep;
        out += "0123456789abcdef"[c >> 4], out += "0123456789abcdef"[c & 15];
      }
    } else if (hit->kind == Target::Raw) {
      out += hit->replacement;
    } else {
      out.append(best.end - best.start, '*');
    }
    hits_.emplace_back(pr.name, best.form);
    i = j = best.end;
  }
  if (i < limit) {
    out.append(s.substr(i, limit - i));
    i = limit;
  }
  carry_ = buf.substr(i);
  offset_ += i;
}

void ValueMasker::finish(std::string& out) {
  size_t keep = keep_;
  keep_ = 0;
  feed({}, out);
  keep_ = keep;
}

size_t ValueMasker::open_tail(std::string_view s) const {
  Span sp{};
  for (size_t p = s.size() > keep_ ? s.size() - keep_ : 0; p < s.size(); ++p)
    for (uint32_t k : by_byte_[(unsigned char)s[p]]) {
      bool ran_out = false;
      if (!match(targets_[k], s, p, 0, sp, &ran_out) && ran_out) return s.size() - p;
    }
  return 0;
}

std::string ValueMasker::mask(std::string_view whole) {
  // A piece of its own (a header, a reason phrase): its units count from its
  // start, and the body's count stays where it was.
  const uint64_t body_offset = offset_;
  offset_ = 0;
  std::string out;
  feed(whole, out);
  finish(out);
  offset_ = body_offset;
  return out;
}

std::vector<std::pair<std::string, std::string>> ValueMasker::take_hits() {
  auto h = std::move(hits_);
  hits_.clear();
  std::sort(h.begin(), h.end());
  h.erase(std::unique(h.begin(), h.end()), h.end());
  return h;
}

}  // namespace exg::egress
