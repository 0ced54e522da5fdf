#include "serve/connect_rpc.hpp"

#include <openssl/evp.h>

#include <cctype>
#include <cstdio>
#include <ctime>

#include "util/json_parse.hpp"

namespace exg::serve::rpc {

const char* code_name(Code c) {
  switch (c) {
    case Code::Canceled: return "canceled";
    case Code::Unknown: return "unknown";
    case Code::InvalidArgument: return "invalid_argument";
    case Code::DeadlineExceeded: return "deadline_exceeded";
    case Code::NotFound: return "not_found";
    case Code::AlreadyExists: return "already_exists";
    case Code::PermissionDenied: return "permission_denied";
    case Code::ResourceExhausted: return "resource_exhausted";
    case Code::FailedPrecondition: return "failed_precondition";
    case Code::Aborted: return "aborted";
    case Code::OutOfRange: return "out_of_range";
    case Code::Unimplemented: return "unimplemented";
    case Code::Internal: return "internal";
    case Code::Unavailable: return "unavailable";
    case Code::DataLoss: return "data_loss";
    case Code::Unauthenticated: return "unauthenticated";
  }
  return "unknown";
}

http::status http_status(Code c) {
  switch (c) {
    case Code::Canceled: return static_cast<http::status>(499);
    case Code::InvalidArgument: case Code::FailedPrecondition: case Code::OutOfRange: return http::status::bad_request;
    case Code::DeadlineExceeded: return http::status::gateway_timeout;
    case Code::NotFound: return http::status::not_found;
    case Code::AlreadyExists: case Code::Aborted: return http::status::conflict;
    case Code::PermissionDenied: return http::status::forbidden;
    case Code::ResourceExhausted: return http::status::too_many_requests;
    case Code::Unimplemented: return http::status::not_implemented;
    case Code::Unavailable: return http::status::service_unavailable;
    case Code::Unauthenticated: return http::status::unauthorized;
    default: return http::status::internal_server_error;
  }
}

Code code_of_errno(const std::string& e) {
  if (e == "ENOENT" || e == "ESRCH") return Code::NotFound;
  if (e == "EEXIST" || e == "ENOTEMPTY") return Code::AlreadyExists;
  if (e == "EACCES" || e == "EPERM" || e == "EROFS") return Code::PermissionDenied;
  if (e == "EINVAL" || e == "ENOTDIR" || e == "EISDIR" || e == "ENAMETOOLONG" || e == "ELOOP" || e == "ENOTTY")
    return Code::InvalidArgument;
  if (e == "EAGAIN" || e == "ENOSPC" || e == "EMFILE" || e == "ENFILE" || e == "EDQUOT") return Code::ResourceExhausted;
  if (e == "EPIPE") return Code::Unavailable;
  // A move across mounts (into the read-only host root, say): the request's fault, not the server's.
  if (e == "EXDEV" || e == "EBUSY") return Code::FailedPrecondition;
  return Code::Internal;
}

bool is_stream_request(const Request& req) {
  std::string ct(req[http::field::content_type]);
  return ct.starts_with("application/connect+json");
}

std::optional<nlohmann::json> read_message(const Request& req, RpcError* err) {
  std::string ct(req[http::field::content_type]);
  std::string text;
  if (ct.starts_with("application/connect+json")) {
    const std::string& b = req.body();
    if (b.size() < 5) {
      *err = {Code::InvalidArgument, "the request is not one enveloped message (5-byte prefix + JSON)"};
      return std::nullopt;
    }
    uint8_t flags = static_cast<uint8_t>(b[0]);
    uint32_t len = (uint32_t(uint8_t(b[1])) << 24) | (uint32_t(uint8_t(b[2])) << 16) | (uint32_t(uint8_t(b[3])) << 8) | uint8_t(b[4]);
    if (flags != 0) {
      *err = {Code::InvalidArgument, "compressed or flagged request messages are not accepted"};
      return std::nullopt;
    }
    if (len != b.size() - 5) {
      *err = {Code::InvalidArgument, "the envelope's length (" + std::to_string(len) + ") does not match the body"};
      return std::nullopt;
    }
    text = b.substr(5);
  } else if (ct.starts_with("application/json") || ct.empty()) {
    text = req.body();
    if (text.empty()) text = "{}";
  } else {
    *err = {Code::InvalidArgument, "Content-Type " + ct + ": expected application/json or application/connect+json"};
    return std::nullopt;
  }
  auto j = parse_json(text);
  if (j.is_discarded() || !j.is_object()) {
    *err = {Code::InvalidArgument, "the request message is not a JSON object"};
    return std::nullopt;
  }
  return j;
}

std::optional<std::vector<nlohmann::json>> read_messages(const Request& req, RpcError* err, size_t max_messages) {
  std::string ct(req[http::field::content_type]);
  if (!ct.starts_with("application/connect+json")) {
    *err = {Code::InvalidArgument, "Content-Type " + ct + ": a client stream is application/connect+json"};
    return std::nullopt;
  }
  const std::string& b = req.body();
  std::vector<nlohmann::json> out;
  for (size_t at = 0; at < b.size();) {
    std::string which = "message " + std::to_string(out.size() + 1);
    if (b.size() - at < 5) {
      *err = {Code::InvalidArgument, which + ": a partial envelope (" + std::to_string(b.size() - at) + " bytes) at the end"};
      return std::nullopt;
    }
    uint8_t flags = static_cast<uint8_t>(b[at]);
    uint32_t len = (uint32_t(uint8_t(b[at + 1])) << 24) | (uint32_t(uint8_t(b[at + 2])) << 16) |
                   (uint32_t(uint8_t(b[at + 3])) << 8) | uint8_t(b[at + 4]);
    if (flags != 0) {
      *err = {Code::InvalidArgument, which + ": compressed or flagged request messages are not accepted"};
      return std::nullopt;
    }
    if (len > b.size() - at - 5) {
      *err = {Code::InvalidArgument, which + ": the envelope's length (" + std::to_string(len) + ") runs past the body"};
      return std::nullopt;
    }
    auto j = parse_json(std::string_view(b).substr(at + 5, len));
    if (j.is_discarded() || !j.is_object()) {
      *err = {Code::InvalidArgument, which + ": not a JSON object"};
      return std::nullopt;
    }
    if (out.size() == max_messages) {
      *err = {Code::ResourceExhausted, "more than " + std::to_string(max_messages) + " messages in one stream"};
      return std::nullopt;
    }
    out.push_back(std::move(j));
    at += 5 + len;
  }
  return out;
}

Response unary_ok(const nlohmann::json& msg) { return json_response(http::status::ok, msg.dump()); }

Response unary_error(const RpcError& e) {
  return json_response(http_status(e.code), nlohmann::json{{"code", code_name(e.code)}, {"message", e.message}}.dump(
                                                -1, ' ', false, nlohmann::json::error_handler_t::replace));
}

std::string envelope(const std::string& json, uint8_t flags) {
  std::string out(5, '\0');
  out[0] = static_cast<char>(flags);
  uint32_t n = static_cast<uint32_t>(json.size());
  out[1] = static_cast<char>(n >> 24), out[2] = static_cast<char>(n >> 16), out[3] = static_cast<char>(n >> 8), out[4] = static_cast<char>(n);
  return out + json;
}

void ServerStream::begin() {
  if (begun_) return;
  begun_ = true;
  Response head{http::status::ok, 11};
  head.set(http::field::content_type, "application/connect+json");
  ex_->start_stream(std::move(head));
}

void ServerStream::send(const nlohmann::json& msg) {
  if (ended_) return;
  begin();
  ex_->write_chunk(envelope(msg.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), 0));
}

void ServerStream::end(const std::optional<RpcError>& err) {
  if (ended_) return;
  begin();
  ended_ = true;
  nlohmann::json m = nlohmann::json::object();
  if (err) m["error"] = {{"code", code_name(err->code)}, {"message", err->message}};
  ex_->write_chunk(envelope(m.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), 0x02));
  ex_->end_stream();
}

const nlohmann::json* field(const nlohmann::json& msg, const char* camel, const char* snake) {
  if (!msg.is_object()) return nullptr;
  if (auto it = msg.find(camel); it != msg.end() && !it->is_null()) return &*it;
  if (snake)
    if (auto it = msg.find(snake); it != msg.end() && !it->is_null()) return &*it;
  return nullptr;
}

std::optional<std::string> base64_decode(const std::string& text) {
  std::string t;
  t.reserve(text.size() + 3);
  for (char c : text) {
    if (c == '-') c = '+';
    else if (c == '_') c = '/';
    if (c == '=') break;
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/')) return std::nullopt;
    t += c;
  }
  size_t pad = (4 - t.size() % 4) % 4;
  if (pad == 3) return std::nullopt;
  t.append(pad, '=');
  std::string out(t.size() / 4 * 3 + 1, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(t.data()),
                          static_cast<int>(t.size()));
  if (n < 0) return std::nullopt;
  out.resize(static_cast<size_t>(n) - pad);  // EVP_DecodeBlock counts the padding as zero bytes
  return out;
}

std::string rfc3339(int64_t seconds, int64_t nanos) {
  time_t t = static_cast<time_t>(seconds);
  struct tm tm {};
  gmtime_r(&t, &tm);
  char buf[64];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string s(buf, n);
  if (nanos > 0) {
    char ns[24];  // room for any int64 (the compiler cannot see nanos < 1e9)
    std::snprintf(ns, sizeof ns, ".%09lld", static_cast<long long>(nanos));
    s += ns;
  }
  return s + "Z";
}

std::string rfc3339(std::chrono::system_clock::time_point t) {
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  return rfc3339(ns / 1000000000, ns % 1000000000);
}

std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view s) {
  int y, mo, d, h, mi, sec, used = 0;
  std::string text(s.substr(0, 64));
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &used) != 6 || used != 19) return std::nullopt;
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60 || y < 1970) return std::nullopt;
  std::string_view rest = std::string_view(text).substr(19);
  int64_t nanos = 0;
  if (!rest.empty() && rest.front() == '.') {
    rest.remove_prefix(1);
    int digits = 0;
    while (!rest.empty() && std::isdigit(static_cast<unsigned char>(rest.front()))) {
      if (digits++ < 9) nanos = nanos * 10 + (rest.front() - '0');
      rest.remove_prefix(1);
    }
    if (digits == 0) return std::nullopt;
    for (; digits < 9; ++digits) nanos *= 10;
  }
  int64_t offset = 0;
  if (rest == "Z" || rest == "z") {
  } else if (rest.size() == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':' && std::isdigit(static_cast<unsigned char>(rest[1])) &&
             std::isdigit(static_cast<unsigned char>(rest[2])) && std::isdigit(static_cast<unsigned char>(rest[4])) && std::isdigit(static_cast<unsigned char>(rest[5]))) {
    offset = ((rest[1] - '0') * 10 + (rest[2] - '0')) * 3600 + ((rest[4] - '0') * 10 + (rest[5] - '0')) * 60;
    if (rest[0] == '-') offset = -offset;
  } else {
    return std::nullopt;
  }
  struct tm tm {};
  tm.tm_year = y - 1900, tm.tm_mon = mo - 1, tm.tm_mday = d, tm.tm_hour = h, tm.tm_min = mi, tm.tm_sec = sec;
  int64_t secs = static_cast<int64_t>(timegm(&tm)) - offset;
  return std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(
      std::chrono::seconds(secs) + std::chrono::nanoseconds(nanos)));
}

std::optional<std::chrono::milliseconds> timeout_of(const Request& req) {
  auto it = req.find("Connect-Timeout-Ms");
  if (it == req.end()) return std::nullopt;
  std::string v(it->value());
  if (v.empty() || v.size() > 10) return std::nullopt;
  for (char c : v)
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
  return std::chrono::milliseconds(std::stoll(v));
}

}  // namespace exg::serve::rpc
