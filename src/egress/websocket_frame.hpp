// WebSocket (RFC 6455) as the intercepting proxy sees it: whether a request
// asks for the upgrade, and the frames' heads, so that what crosses an
// upgraded connection can be judged (client frames unmasked to be read) and
// re-framed (server frames whose payload masking changed in length).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "egress/proxy.hpp"

namespace exg::egress::detail {

// A GET asking for "Upgrade: websocket" with "Connection: upgrade".
bool asks_websocket_upgrade(const HttpHead& req);
// A 101 that switches to websocket.
bool switches_to_websocket(const HttpHead& resp);

struct WsFrameHead {
  bool fin = false;
  uint8_t rsv = 0;  // the three reserved bits (an extension's: none is negotiated here)
  uint8_t opcode = 0;
  bool masked = false;
  uint8_t key[4] = {};
  uint64_t length = 0;
  size_t head_size = 0;  // bytes of the head in the buffer it was parsed from
  bool control() const { return opcode & 0x8; }
};

enum class WsOpcode : uint8_t { Continuation = 0, Text = 1, Binary = 2, Close = 8, Ping = 9, Pong = 10 };

// The head at the start of buf: nullopt when more bytes are needed; `error`
// set when it cannot be a frame (a reserved bit or opcode, a control frame
// fragmented or over 125 bytes, a length over 2^63).
std::optional<WsFrameHead> parse_ws_frame_head(std::string_view buf, std::string& error);
// An unmasked frame's head (what a server sends).
std::string ws_frame_head(bool fin, uint8_t opcode, uint64_t length);
// XORs n bytes at p with the frame's key, `offset` bytes into its payload.
void ws_unmask(char* p, size_t n, const uint8_t key[4], uint64_t offset);

}  // namespace exg::egress::detail
