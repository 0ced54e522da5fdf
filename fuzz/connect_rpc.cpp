// Connect-RPC as envd's routes read it (src/serve/connect_rpc.cpp): a unary
// call's JSON body, a stream's enveloped message(s) (flags byte, 4-byte
// length, JSON), base64 (protobuf's bytes; the Basic user), and the
// Connect-Timeout-Ms header. The first byte picks the Content-Type and the
// message limit; the rest is the body. Every body gives a message or one
// error with a message; an accepted one is an object, the envelope's length
// is the body's, a stream never holds more than its limit, and messages
// enveloped again read back the same. base64: decode(encode(x)) == x for any
// bytes, and text that decodes encodes to text that decodes the same.
#include <cstdint>
#include <string>

#include "check.hpp"
#include "serve/connect_rpc.hpp"

using namespace exg::serve;

namespace {

const char* const kTypes[] = {"application/connect+json", "application/json", "", "application/connect+json; charset=utf-8",
                              "text/plain", "application/json; charset=utf-8", "application/proto", "application/connect+proto"};

Request request(const std::string& type, std::string body) {
  Request req{http::verb::post, "/process.Process/Start", 11};
  if (!type.empty()) req.set(http::field::content_type, type);
  req.body() = std::move(body);
  return req;
}

void check_base64(const std::string& in) {
  auto enc = rpc::base64_encode(in);
  FUZZ_CHECK(enc.size() == 4 * ((in.size() + 2) / 3), "base64 is 4 characters per 3 bytes, padded");
  auto back = rpc::base64_decode(enc);
  FUZZ_CHECK(back && *back == in, "base64 decodes what it encodes");
  std::string url = enc;
  for (char& c : url) c = c == '+' ? '-' : c == '/' ? '_' : c;
  while (!url.empty() && url.back() == '=') url.pop_back();
  back = rpc::base64_decode(url);
  FUZZ_CHECK(back && *back == in, "the URL alphabet without padding decodes the same");
  // The input as base64 text: what decodes, encodes to text that decodes the same.
  if (auto dec = rpc::base64_decode(in)) {
    FUZZ_CHECK(dec->size() <= in.size(), "decoding never grows");
    auto again = rpc::base64_decode(rpc::base64_encode(*dec));
    FUZZ_CHECK(again && *again == *dec, "decoded bytes encode and decode back");
  }
}

void check_timeout(const std::string& in) {
  // Header values are one line of visible characters and spaces.
  std::string v;
  for (char c : in.substr(0, 16))
    if (c >= 0x20 && c < 0x7f) v += c;
  Request req = request("application/connect+json", "");
  req.set("Connect-Timeout-Ms", v);
  v = std::string(req["Connect-Timeout-Ms"]);  // as an HTTP parser would hand it over: without surrounding spaces
  auto t = rpc::timeout_of(req);
  if (!t) return;
  FUZZ_CHECK(!v.empty() && v.size() <= 10 && v.find_first_not_of("0123456789") == std::string::npos,
             "a timeout is 1..10 decimal digits");
  FUZZ_CHECK(t->count() >= 0 && t->count() == std::stoll(v), "a timeout is the header's number of milliseconds");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string type = kTypes[data[0] & 7];
  const size_t max_messages = (data[0] >> 3) & 7;
  std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  Request req = request(type, body);

  // A unary call or a server stream's one request message.
  rpc::RpcError err{rpc::Code::Unknown, ""};
  auto msg = rpc::read_message(req, &err);
  if (!msg) {
    FUZZ_CHECK(!err.message.empty() && err.code == rpc::Code::InvalidArgument, "a bad message is invalid_argument, said why");
  } else {
    FUZZ_CHECK(err.message.empty(), "a message or an error, not both");
    FUZZ_CHECK(msg->is_object(), "a request message is a JSON object");
    if (rpc::is_stream_request(req)) {
      FUZZ_CHECK(body.size() >= 5 && body[0] == 0, "a stream's message is one unflagged envelope");
      uint32_t len = (uint32_t(uint8_t(body[1])) << 24) | (uint32_t(uint8_t(body[2])) << 16) |
                     (uint32_t(uint8_t(body[3])) << 8) | uint8_t(body[4]);
      FUZZ_CHECK(len == body.size() - 5, "the envelope's length is the body's");
    }
    // Round trip: the message enveloped (or sent as JSON) again reads back the same.
    std::string json = msg->dump();
    Request again = request(type, rpc::is_stream_request(req) ? rpc::envelope(json, 0) : json);
    rpc::RpcError err2{rpc::Code::Unknown, ""};
    auto back = rpc::read_message(again, &err2);
    FUZZ_CHECK(back && *back == *msg, "a message sent again reads back the same");
  }

  // A client stream: every envelope of the body.
  err = {rpc::Code::Unknown, ""};
  auto msgs = rpc::read_messages(req, &err, max_messages);
  if (!msgs) {
    FUZZ_CHECK(!err.message.empty(), "a bad stream is said why");
    FUZZ_CHECK(err.code == rpc::Code::InvalidArgument || err.code == rpc::Code::ResourceExhausted, "a bad stream's code");
  } else {
    FUZZ_CHECK(err.message.empty(), "messages or an error, not both");
    FUZZ_CHECK(rpc::is_stream_request(req), "a client stream is application/connect+json");
    FUZZ_CHECK(msgs->size() <= max_messages, "a stream holds at most its limit of messages");
    std::string wire;
    for (const auto& m : *msgs) {
      FUZZ_CHECK(m.is_object(), "a stream's message is a JSON object");
      wire += rpc::envelope(m.dump(), 0);
    }
    rpc::RpcError err2{rpc::Code::Unknown, ""};
    auto back = rpc::read_messages(request(type, wire), &err2, max_messages);
    FUZZ_CHECK(back && *back == *msgs, "a stream's messages enveloped again read back the same");
    if (msgs->size() == 1 && msg) FUZZ_CHECK(*msg == (*msgs)[0], "one envelope reads the same either way");
  }

  check_base64(body);
  check_timeout(body);
  return 0;
}
