// The server name (SNI, RFC 6066 section 3) of a TLS ClientHello, read from
// the first record a client sends, for transparent egress to compare with the
// name its destination address stands for. Only what is needed is checked;
// anything that does not add up is Malformed (the session refuses it).
#include <cstdint>

#include "egress/transparent.hpp"

namespace exg::egress::detail {

namespace {

// A bounds-checked reader over a byte string.
struct Reader {
  std::string_view s;
  size_t pos = 0;
  bool ok = true;
  size_t left() const { return s.size() - pos; }
  uint32_t num(size_t n) {
    if (!ok || left() < n) return ok = false, 0;
    uint32_t v = 0;
    for (size_t i = 0; i < n; ++i) v = (v << 8) | uint8_t(s[pos + i]);
    pos += n;
    return v;
  }
  std::string_view bytes(size_t n) {
    if (!ok || left() < n) return ok = false, std::string_view{};
    auto r = s.substr(pos, n);
    pos += n;
    return r;
  }
  // A vector with an n-byte length prefix, as its own reader.
  Reader sub(size_t len_bytes) {
    size_t n = num(len_bytes);
    return Reader{bytes(n), 0, ok};
  }
};

}  // namespace

ClientHelloSni parse_client_hello_sni(std::string_view in) {
  constexpr uint8_t kHandshake = 22, kClientHello = 1;
  constexpr uint16_t kServerNameExt = 0;
  if (in.empty()) return {ClientHelloSni::NeedMore, {}};
  if (uint8_t(in[0]) != kHandshake) return {ClientHelloSni::NotTls, {}};
  if (in.size() >= 2 && uint8_t(in[1]) != 3) return {ClientHelloSni::NotTls, {}};
  if (in.size() < 5) return {ClientHelloSni::NeedMore, {}};
  size_t record_len = (uint8_t(in[3]) << 8) | uint8_t(in[4]);
  if (record_len == 0 || record_len > (1u << 14)) return {ClientHelloSni::Malformed, {}};
  if (in.size() < 5 + record_len) return {ClientHelloSni::NeedMore, {}};
  Reader rec{in.substr(5, record_len)};
  if (rec.num(1) != kClientHello) return {ClientHelloSni::Malformed, {}};
  size_t hello_len = rec.num(3);
  // A hello split over several records: the name is within the first in
  // practice, but no partial parse is trusted.
  if (!rec.ok || hello_len > rec.left()) return {ClientHelloSni::Malformed, {}};
  Reader h{rec.bytes(hello_len)};
  h.num(2);         // legacy_version
  h.bytes(32);      // random
  h.sub(1);         // legacy_session_id
  h.sub(2);         // cipher_suites
  h.sub(1);         // legacy_compression_methods
  if (!h.ok) return {ClientHelloSni::Malformed, {}};
  if (h.left() == 0) return {ClientHelloSni::NoSni, {}};  // no extensions at all
  Reader exts = h.sub(2);
  if (!h.ok || h.left() != 0) return {ClientHelloSni::Malformed, {}};
  std::optional<std::string> name;
  while (exts.ok && exts.left() > 0) {
    uint32_t type = exts.num(2);
    Reader body = exts.sub(2);
    if (!exts.ok) break;
    if (type != kServerNameExt) continue;
    if (name) return {ClientHelloSni::Malformed, {}};  // two server_name extensions
    Reader list = body.sub(2);
    while (list.ok && list.left() > 0) {
      uint32_t kind = list.num(1);
      std::string_view n = list.sub(2).s;
      if (!list.ok) break;
      if (kind != 0) continue;  // only host_name (0) is defined
      if (name || n.empty()) return {ClientHelloSni::Malformed, {}};
      name = std::string(n);
    }
    if (!list.ok || !body.ok) return {ClientHelloSni::Malformed, {}};
  }
  if (!exts.ok) return {ClientHelloSni::Malformed, {}};
  if (!name) return {ClientHelloSni::NoSni, {}};
  return {ClientHelloSni::Sni, std::move(*name)};
}

}  // namespace exg::egress::detail
