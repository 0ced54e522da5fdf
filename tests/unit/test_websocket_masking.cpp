// The server's WebSocket messages masked wherever its framing cuts a value
// (issue 45): across reads, across a message's fragments, and across messages
// (the first message's end held until the next one's start says whether a
// value runs on into it). Before, one masker per message let a value the server
// split across two messages reach the client in halves: SplitAcrossTwoMessages
// and SplitAcrossThreeMessages fail when the hold is taken out
// (ValueMasker::open_tail answering 0).
#include <gtest/gtest.h>

#include "egress/secrets.hpp"
#include "egress/websocket_masking.hpp"

namespace {

using namespace exg::egress;
using namespace exg::egress::detail;

const std::string kValue = "sk-proj-Zq81/kLmN0pQrStUvWx+Yz";
const std::string kPh = "exg_ph_OPENAI_API_KEY_0123456789abcdef0123456789abcdef";

struct Fixture {
  std::shared_ptr<SecretsConfig> cfg = [] {
    auto c = std::make_shared<SecretsConfig>();
    c->secrets.push_back({"OPENAI_API_KEY", kPh, kValue, {"api.openai.com"}});
    return c;
  }();
  SecretIndex idx = *SecretIndex::build(cfg);
  WsResponseMasker masker{idx, {0}};
};

struct Frame {
  uint8_t opcode;
  std::string payload;
  bool fin = true;
};
struct Message {
  uint8_t opcode;
  std::string payload;
};

// Feeds the frames as a server sends them, `read` bytes at a time; what the client gets.
std::string relay(WsResponseMasker& m, const std::vector<Frame>& frames, size_t read, bool flush_at_end = true) {
  std::string out;
  for (const auto& f : frames) {
    WsFrameHead h;
    h.fin = f.fin;
    h.opcode = f.opcode;
    h.length = f.payload.size();
    m.frame(h);
    if (f.payload.empty()) out += m.feed("", true);
    for (size_t at = 0; at < f.payload.size(); at += read)
      out += m.feed(std::string_view(f.payload).substr(at, read), at + read >= f.payload.size());
  }
  if (flush_at_end) out += m.flush();
  return out;
}

// The client's view: whole messages, each frame well formed and unmasked.
std::vector<Message> messages(std::string_view wire) {
  std::vector<Message> got;
  bool open = false;
  while (!wire.empty()) {
    std::string err;
    auto h = parse_ws_frame_head(wire, err);
    EXPECT_TRUE(h && err.empty() && !h->masked) << err;
    if (!h) break;
    EXPECT_EQ(h->opcode == 0, open) << "a continuation only within a message";
    std::string payload(wire.substr(h->head_size, h->length));
    wire.remove_prefix(h->head_size + h->length);
    if (!open) got.push_back({h->opcode, ""});
    got.back().payload += payload;
    open = !h->fin;
  }
  EXPECT_FALSE(open) << "the last message ended";
  return got;
}

std::string all(const std::vector<Message>& ms) {
  std::string s;
  for (const auto& m : ms) s += m.payload;
  return s;
}

TEST(WebSocketMasking, SplitAcrossTwoMessages) {
  for (size_t cut : {1, 5, 9, 20, 29}) {
    for (size_t read : {1, 3, 4096}) {
      Fixture fx;
      auto got = messages(relay(fx.masker, {{1, "{\"delta\":\"" + kValue.substr(0, cut)}, {1, kValue.substr(cut) + "\"}"}}, read));
      ASSERT_EQ(got.size(), 2u) << cut;
      EXPECT_EQ(all(got).find(kValue.substr(0, std::max<size_t>(cut, 4))), std::string::npos) << cut << "/" << read;
      EXPECT_EQ(got[0].payload, "{\"delta\":\"" + kPh) << "the placeholder ends the first message";
      EXPECT_EQ(got[1].payload, "\"}") << "the second begins after the value";
      EXPECT_EQ(got[0].opcode, 1);
      EXPECT_EQ(got[1].opcode, 1);
      EXPECT_FALSE(fx.masker.take_hits().empty());
    }
  }
}

TEST(WebSocketMasking, SplitAcrossThreeMessages) {
  Fixture fx;
  auto got = messages(relay(fx.masker, {{1, "a " + kValue.substr(0, 10)}, {1, kValue.substr(10, 6)}, {2, kValue.substr(16) + " b"}}, 2));
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].payload, "a " + kPh);
  EXPECT_EQ(got[1].payload, "") << "the message the value filled goes out empty";
  EXPECT_EQ(got[2].payload, " b");
  EXPECT_EQ(got[2].opcode, 2);
}

TEST(WebSocketMasking, SplitAcrossFragmentsAndReads) {
  Fixture fx;
  std::string m = "{\"key\":\"" + kValue + "\"}";
  auto got = messages(relay(fx.masker, {{1, m.substr(0, 12), false}, {0, m.substr(12, 7), false}, {0, m.substr(19)}}, 1));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].payload, "{\"key\":\"" + kPh + "\"}");
}

TEST(WebSocketMasking, EscapedSpellingSplitAcrossMessages) {
  Fixture fx;
  std::string escaped = "sk-proj-Zq81\\/kLmN0pQrStUvWx+Yz";  // JSON's "\/"
  auto got = messages(relay(fx.masker, {{1, "x" + escaped.substr(0, 13)}, {1, escaped.substr(13) + "y"}}, 4096));
  EXPECT_EQ(all(got), "x" + kPh + "y");
}

TEST(WebSocketMasking, AnEndThatBeginsNoValueIsSentAtOnce) {
  Fixture fx;
  std::string wire = relay(fx.masker, {{1, "{\"type\":\"response.completed\"}"}}, 4096, false);
  EXPECT_FALSE(fx.masker.holding());
  auto got = messages(wire);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].payload, "{\"type\":\"response.completed\"}");
}

TEST(WebSocketMasking, AHeldEndThatWasNoValueGoesOutUnchanged) {
  Fixture fx;
  // "sk-pr" may begin the value: held until the next message says it does not.
  std::string wire = relay(fx.masker, {{1, "ends with sk-pr"}}, 4096, false);
  EXPECT_TRUE(fx.masker.holding());
  EXPECT_TRUE(wire.find("sk-pr") == std::string::npos);
  wire += relay(fx.masker, {{2, "oj and more"}}, 4096);
  auto got = messages(wire);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].payload, "ends with sk-pr");
  EXPECT_EQ(got[1].payload, "oj and more");
  EXPECT_EQ(got[1].opcode, 2);
  // The wait over (or a control frame): sent as it is.
  Fixture f2;
  wire = relay(f2.masker, {{1, "ends with sk-pr"}}, 4096, false);
  wire += f2.masker.flush();
  EXPECT_FALSE(f2.masker.holding());
  got = messages(wire);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].payload, "ends with sk-pr");
}

TEST(WebSocketMasking, AFlushWhileTheNextMessageBeganKeepsTheFraming) {
  // The wait over while the next message's first fragment is in: both go on as they are,
  // the second's later fragments as continuations of it.
  Fixture fx;
  std::string wire = relay(fx.masker, {{1, "a sk-proj-Zq"}, {1, "Q1", false}}, 4096, false);
  wire += fx.masker.flush();
  EXPECT_FALSE(fx.masker.holding());
  EXPECT_TRUE(fx.masker.in_message());
  wire += relay(fx.masker, {{0, " and " + kValue}}, 4096);
  auto got = messages(wire);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].payload, "a sk-proj-Zq");
  EXPECT_EQ(got[1].payload, "Q1 and " + kPh);
}

}  // namespace
