// WebSocket upgrade heads and frame heads (RFC 6455 4 and 5.2).
#include "egress/websocket_frame.hpp"

#include <strings.h>

namespace exg::egress::detail {

namespace {
bool lists_token(const std::string* value, std::string_view token) {
  if (!value) return false;
  std::string_view v = *value;
  while (!v.empty()) {
    size_t comma = v.find(',');
    std::string_view t = v.substr(0, comma);
    while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
    while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
    if (t.size() == token.size() && strncasecmp(t.data(), token.data(), t.size()) == 0) return true;
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
  return false;
}
}  // namespace

bool asks_websocket_upgrade(const HttpHead& req) {
  return req.method == "GET" && lists_token(req.find("upgrade"), "websocket") && connection_has(req, "upgrade");
}

bool switches_to_websocket(const HttpHead& resp) {
  return resp.status == 101 && lists_token(resp.find("upgrade"), "websocket");
}

std::optional<WsFrameHead> parse_ws_frame_head(std::string_view buf, std::string& error) {
  if (buf.size() < 2) return std::nullopt;
  const auto* b = reinterpret_cast<const unsigned char*>(buf.data());
  WsFrameHead h;
  h.fin = b[0] & 0x80;
  h.rsv = (b[0] >> 4) & 0x7;
  h.opcode = b[0] & 0x0f;
  h.masked = b[1] & 0x80;
  uint64_t len = b[1] & 0x7f;
  size_t n = 2;
  if (len == 126 || len == 127) {
    size_t bytes = len == 126 ? 2 : 8;
    if (buf.size() < n + bytes) return std::nullopt;
    len = 0;
    for (size_t i = 0; i < bytes; ++i) len = (len << 8) | b[n + i];
    n += bytes;
    if (len >> 63) {
      error = "websocket frame length over 2^63";
      return std::nullopt;
    }
  }
  if (h.masked) {
    if (buf.size() < n + 4) return std::nullopt;
    for (int i = 0; i < 4; ++i) h.key[i] = b[n + i];
    n += 4;
  }
  h.length = len;
  h.head_size = n;
  if (h.rsv) error = "websocket frame with a reserved bit set (no extension was negotiated)";
  else if (h.opcode != 0 && h.opcode != 1 && h.opcode != 2 && h.opcode != 8 && h.opcode != 9 && h.opcode != 10)
    error = "websocket frame with a reserved opcode " + std::to_string(h.opcode);
  else if (h.control() && (!h.fin || h.length > 125))
    error = "websocket control frame fragmented or over 125 bytes";
  if (!error.empty()) return std::nullopt;
  return h;
}

std::string ws_frame_head(bool fin, uint8_t opcode, uint64_t length) {
  std::string h;
  h += (char)((fin ? 0x80 : 0) | (opcode & 0x0f));
  if (length < 126) {
    h += (char)length;
  } else if (length <= 0xffff) {
    h += (char)126;
    h += (char)(length >> 8);
    h += (char)(length & 0xff);
  } else {
    h += (char)127;
    for (int i = 7; i >= 0; --i) h += (char)((length >> (8 * i)) & 0xff);
  }
  return h;
}

void ws_unmask(char* p, size_t n, const uint8_t key[4], uint64_t offset) {
  for (size_t i = 0; i < n; ++i) p[i] = (char)(p[i] ^ key[(offset + i) & 3]);
}

}  // namespace exg::egress::detail
