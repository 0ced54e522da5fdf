// The agent's channel (src/agent/protocol.cpp): the frame reader and the
// request parser read what the other side of the channel sends, the agent on
// the host's side as pid 1 reads what a client sends. Bytes arrive in any
// pieces; every frame that comes out is parsed as a request, and encoding it
// again must give the same frame back.
#include <cstdint>
#include <string>

#include "agent/protocol.hpp"
#include "check.hpp"

using namespace exg::agent;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  FrameReader reader;
  size_t frames = 0;
  for (std::string_view piece : exg::fuzz::pieces(in, data[0])) {
    reader.feed(piece.data(), piece.size());
    for (;;) {
      auto item = reader.next();
      if (!item.frame && !item.error) break;
      FUZZ_CHECK(!(item.frame && item.error), "a frame or an error, not both");
      FUZZ_CHECK(++frames <= size, "at most one item per byte");
      if (item.error) {
        FUZZ_CHECK(!item.error->what.empty(), "an error says what is wrong");
        continue;
      }
      const Frame& f = *item.frame;
      FUZZ_CHECK(f.header.is_object(), "a frame's header is an object");
      std::string err;
      auto req = parse_request(f, &err);
      FUZZ_CHECK(req.has_value() == err.empty(), "a request or an error message");
      if (req) FUZZ_CHECK(req->id == f.id && req->id != 0, "the request keeps its id");
      // Round trip: what encode() writes, a fresh reader reads back as the same frame.
      std::string wire = encode(f);
      if (wire.size() - kPrefixBytes - kFixedBytes - f.payload.size() > kMaxHeader) continue;  // "1e5" grows
      FrameReader again;
      again.feed(wire.data(), wire.size());
      auto back = again.next();
      FUZZ_CHECK(back.frame && !back.error, "an encoded frame reads back");
      FUZZ_CHECK(back.frame->kind == f.kind && back.frame->id == f.id && back.frame->header == f.header &&
                     back.frame->payload == f.payload,
                 "an encoded frame reads back unchanged");
      FUZZ_CHECK(again.buffered() == 0, "an encoded frame is read whole");
    }
  }
  return 0;
}
