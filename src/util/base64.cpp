#include "util/base64.hpp"

#include <cstdint>

namespace exg::util {

std::string base64_encode(std::string_view in) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  auto byte = [&](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(in[i])); };
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = byte(i) << 16 | byte(i + 1) << 8 | byte(i + 2);
    out += kAlphabet[v >> 18], out += kAlphabet[(v >> 12) & 63], out += kAlphabet[(v >> 6) & 63], out += kAlphabet[v & 63];
  }
  if (i + 1 == in.size()) {
    uint32_t v = byte(i) << 16;
    out += kAlphabet[v >> 18], out += kAlphabet[(v >> 12) & 63], out += "==";
  } else if (i + 2 == in.size()) {
    uint32_t v = byte(i) << 16 | byte(i + 1) << 8;
    out += kAlphabet[v >> 18], out += kAlphabet[(v >> 12) & 63], out += kAlphabet[(v >> 6) & 63], out += '=';
  }
  return out;
}

}  // namespace exg::util
