// Small value parsers shared by the policy file and the CLI flags.
#include <cstdint>
#include <string>

#include "policy/policy.hpp"

namespace exg::policy {

std::string SourcePos::str() const {
  if (line == 0) return file;
  return file + ":" + std::to_string(line) + ":" + std::to_string(column);
}

namespace {

using U128 = unsigned __int128;

struct Decimal {
  U128 mantissa = 0;  // the digits without the dot
  U128 scale = 1;     // 10^(digits after the dot)
  std::string_view rest;
};

// "1.5G" -> {15, 10, "G"}. Requires a digit before the dot and after it; no
// sign, no spaces: a policy value should be written one way only.
std::optional<Decimal> parse_decimal(std::string_view s) {
  Decimal d;
  std::size_t i = 0;
  std::size_t int_digits = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++int_digits) {
    if (int_digits >= 20) return std::nullopt;  // beyond any u64
    d.mantissa = d.mantissa * 10 + static_cast<unsigned>(s[i] - '0');
  }
  if (int_digits == 0) return std::nullopt;
  if (i < s.size() && s[i] == '.') {
    ++i;
    std::size_t frac_digits = 0;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++frac_digits) {
      if (frac_digits >= 9) return std::nullopt;
      d.mantissa = d.mantissa * 10 + static_cast<unsigned>(s[i] - '0');
      d.scale *= 10;
    }
    if (frac_digits == 0) return std::nullopt;
  }
  d.rest = s.substr(i);
  return d;
}

PolicyError value_error(std::string_view what, std::string_view s, std::string_view hint) {
  return PolicyError{std::string(what) + " \"" + std::string(s) + "\": " + std::string(hint)};
}

}  // namespace

PResult<std::uint64_t> parse_size(std::string_view s) {
  static constexpr std::string_view kHint =
      "expected a positive size like 512M, 1.5G or a number of bytes (suffixes K, M, G, T are 1024-based)";
  auto d = parse_decimal(s);
  if (!d) return std::unexpected(value_error("invalid size", s, kHint));
  int shift = -1;
  std::string_view u = d->rest;
  if (u.empty()) shift = 0;
  struct Unit { std::string_view a, b, c; int shift; };
  static constexpr Unit kUnits[] = {
      {"K", "k", "KiB", 10}, {"M", "m", "MiB", 20}, {"G", "g", "GiB", 30}, {"T", "t", "TiB", 40}};
  for (const auto& unit : kUnits) {
    if (u == unit.a || u == unit.b || u == unit.c) shift = unit.shift;
  }
  if (shift < 0) return std::unexpected(value_error("invalid size", s, kHint));
  if (shift == 0 && d->scale != 1) {
    return std::unexpected(value_error("invalid size", s, "a number of bytes must be whole"));
  }
  // Fractions round down to whole bytes ("1.1K" is 1126).
  U128 bytes = (d->mantissa << shift) / d->scale;
  if (bytes > UINT64_MAX) return std::unexpected(value_error("invalid size", s, "too large"));
  if (bytes == 0) return std::unexpected(value_error("invalid size", s, "must be more than 0"));
  return static_cast<std::uint64_t>(bytes);
}

PResult<std::chrono::milliseconds> parse_duration(std::string_view s) {
  static constexpr std::string_view kHint =
      "expected a positive duration like 500ms, 30s, 2m, 1h or a number of seconds";
  auto d = parse_decimal(s);
  if (!d) return std::unexpected(value_error("invalid duration", s, kHint));
  U128 ms_per_unit = 0;
  if (d->rest.empty() || d->rest == "s") {
    ms_per_unit = 1000;
  } else if (d->rest == "ms") {
    ms_per_unit = 1;
  } else if (d->rest == "m") {
    ms_per_unit = 60'000;
  } else if (d->rest == "h") {
    ms_per_unit = 3'600'000;
  } else {
    return std::unexpected(value_error("invalid duration", s, kHint));
  }
  U128 ms = d->mantissa * ms_per_unit / d->scale;  // sub-millisecond parts round down
  if (ms > static_cast<U128>(INT64_MAX)) {
    return std::unexpected(value_error("invalid duration", s, "too large"));
  }
  if (ms == 0) {
    return std::unexpected(value_error("invalid duration", s, "must be at least 1ms"));
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(ms));
}

std::optional<std::string> check_env_name(std::string_view name) {
  auto letter = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (name.empty()) return "empty environment variable name";
  bool ok = letter(name[0]);
  for (char c : name) ok = ok && (letter(c) || digit(c));
  if (!ok) {
    return "invalid environment variable name \"" + std::string(name) +
           "\" (expected letters, digits and _, not starting with a digit)";
  }
  return std::nullopt;
}

}  // namespace exg::policy
