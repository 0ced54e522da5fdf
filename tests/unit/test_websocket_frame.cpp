// WebSocket frame heads as the intercepting proxy reads and writes them (RFC 6455 5.2).
#include <gtest/gtest.h>

#include "egress/websocket_frame.hpp"

using namespace exg::egress::detail;

namespace {
std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int c : b) s += (char)c;
  return s;
}
}  // namespace

TEST(WebSocketFrame, ParsesAMaskedClientFrameAndUnmasksItsPayload) {
  std::string f = bytes({0x81, 0x85, 1, 2, 3, 4});
  std::string payload = "hello";
  for (size_t i = 0; i < payload.size(); ++i) f += (char)(payload[i] ^ (i % 4 + 1));
  std::string err;
  auto h = parse_ws_frame_head(f, err);
  ASSERT_TRUE(h) << err;
  EXPECT_TRUE(h->fin);
  EXPECT_EQ(h->opcode, 1);
  EXPECT_TRUE(h->masked);
  EXPECT_EQ(h->length, 5u);
  EXPECT_EQ(h->head_size, 6u);
  std::string p = f.substr(6, 2), q = f.substr(8);
  ws_unmask(p.data(), p.size(), h->key, 0);
  ws_unmask(q.data(), q.size(), h->key, 2);  // (a payload read in two pieces)
  EXPECT_EQ(p + q, "hello");
}

TEST(WebSocketFrame, NeedsTheWholeHeadBeforeSayingAnything) {
  std::string whole = bytes({0x82, 0xfe, 0x01, 0x00, 9, 9, 9, 9});
  for (size_t n = 0; n < whole.size(); ++n) {
    std::string err;
    EXPECT_FALSE(parse_ws_frame_head(std::string_view(whole).substr(0, n), err)) << n;
    EXPECT_TRUE(err.empty()) << n;
  }
  std::string err;
  auto h = parse_ws_frame_head(whole, err);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->length, 256u);
  EXPECT_EQ(h->head_size, 8u);
}

TEST(WebSocketFrame, RefusesWhatCannotBeJudged) {
  for (auto f : {bytes({0xc1, 0x00}),                      // RSV1: a compressed message (no extension was agreed)
                 bytes({0x83, 0x00}),                      // reserved opcode
                 bytes({0x09, 0x00}),                      // a ping not final: control frames are never fragmented
                 bytes({0x89, 0x7e, 0x00, 0x7e}),          // a ping of 126 bytes
                 bytes({0x82, 0x7f, 0x80, 0, 0, 0, 0, 0, 0, 0})}) {  // a length over 2^63
    std::string err;
    EXPECT_FALSE(parse_ws_frame_head(f, err));
    EXPECT_FALSE(err.empty());
  }
}

TEST(WebSocketFrame, WritesTheShortestLengthForm) {
  EXPECT_EQ(ws_frame_head(true, 1, 5), bytes({0x81, 5}));
  EXPECT_EQ(ws_frame_head(false, 0, 126), bytes({0x00, 126, 0, 126}));
  EXPECT_EQ(ws_frame_head(true, 2, 70000), bytes({0x82, 127, 0, 0, 0, 0, 0, 1, 0x11, 0x70}));
  for (uint64_t n : {0ull, 125ull, 126ull, 65535ull, 65536ull}) {
    std::string err;
    auto h = parse_ws_frame_head(ws_frame_head(true, 1, n), err);
    ASSERT_TRUE(h);
    EXPECT_EQ(h->length, n);
    EXPECT_FALSE(h->masked);
  }
}

TEST(WebSocketFrame, KnowsAnUpgradeAndASwitch) {
  HttpHead req{"GET", "/v1/responses", "HTTP/1.1", 0, "", {{"Upgrade", "WebSocket"}, {"Connection", "keep-alive, Upgrade"}}};
  EXPECT_TRUE(asks_websocket_upgrade(req));
  req.method = "POST";
  EXPECT_FALSE(asks_websocket_upgrade(req));
  HttpHead h2{"GET", "/", "HTTP/1.1", 0, "", {{"Upgrade", "h2c"}, {"Connection", "Upgrade"}}};
  EXPECT_FALSE(asks_websocket_upgrade(h2));
  HttpHead resp{"", "", "HTTP/1.1", 101, "Switching Protocols", {{"Upgrade", "websocket"}}};
  EXPECT_TRUE(switches_to_websocket(resp));
  resp.status = 200;
  EXPECT_FALSE(switches_to_websocket(resp));
}
