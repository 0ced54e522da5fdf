// The content codings of a response from a host with secrets (issue 12.5). The
// proxy asks for "Accept-Encoding: identity", but an upstream may compress
// anyway, and a compressed echo would carry the value past the masking. gzip,
// x-gzip and deflate are decoded here (zlib) and the client gets the plain
// body; any other coding (br, zstd, compress, ...) cannot be masked and the
// response is refused (intercept_session.cpp).
#include <zlib.h>

#include <cstring>

#include "egress/proxy.hpp"

namespace exg::egress::detail {

namespace {

std::string lower_trim(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  std::string r(v);
  for (char& c : r) c = (char)std::tolower((unsigned char)c);
  return r;
}

void split_codings(std::string_view v, std::vector<std::string>& out) {
  while (!v.empty()) {
    size_t comma = v.find(',');
    std::string c = lower_trim(v.substr(0, comma));
    if (auto semi = c.find(';'); semi != std::string::npos) c = lower_trim(c.substr(0, semi));
    if (!c.empty() && c != "identity") out.push_back(c);
    if (comma == std::string_view::npos) break;
    v.remove_prefix(comma + 1);
  }
}

// One zlib inflater: gzip (members one after another, as gzip(1) allows) or
// deflate (zlib-wrapped as RFC 9110 says, or raw as some servers send it).
class Inflater : public BodyDecoder::Stage {
 public:
  explicit Inflater(bool gzip) : gzip_(gzip) {}
  ~Inflater() override {
    if (started_) inflateEnd(&z_);
  }
  bool feed(std::string_view in, std::string& out) override {
    if (!started_) {
      head_.append(in);
      if (!gzip_ && head_.size() < 2) return true;
      int bits = 15 + 16;  // gzip only
      if (!gzip_) {
        auto b0 = (unsigned char)head_[0], b1 = (unsigned char)head_[1];
        bits = (b0 & 0x0F) == 8 && (b0 * 256 + b1) % 31 == 0 ? 15 : -15;
      }
      std::memset(&z_, 0, sizeof z_);
      if (inflateInit2(&z_, bits) != Z_OK) return false;
      started_ = true;
      std::string h = std::move(head_);
      return run(h, out);
    }
    return run(in, out);
  }
  // A stream that did not reach its end is truncated.
  bool finish(std::string&) override { return started_ ? ended_ : head_.empty(); }

 private:
  bool run(std::string_view in, std::string& out) {
    z_.next_in = (Bytef*)in.data();
    z_.avail_in = (uInt)in.size();
    unsigned char buf[64 * 1024];
    const size_t start = out.size();
    for (;;) {
      if (out.size() - start > BodyDecoder::kMaxFeedOutput) return false;  // a decompression bomb
      if (ended_) {
        if (!z_.avail_in) return true;
        // Another gzip member follows; deflate has one stream only.
        if (!gzip_ || inflateReset(&z_) != Z_OK) return false;
        ended_ = false;
      }
      z_.next_out = buf;
      z_.avail_out = sizeof buf;
      int r = inflate(&z_, Z_NO_FLUSH);
      out.append((const char*)buf, sizeof buf - z_.avail_out);
      if (r == Z_STREAM_END) {
        ended_ = true;
        continue;
      }
      if (r == Z_BUF_ERROR && !z_.avail_in) return true;  // all consumed, needs more input
      if (r != Z_OK) return false;
      if (!z_.avail_in && z_.avail_out) return true;
    }
  }

  bool gzip_;
  bool started_ = false, ended_ = false;
  std::string head_;  // deflate: the first bytes, to tell zlib from raw
  z_stream z_{};
};

}  // namespace

std::vector<std::string> response_codings(const HttpHead& resp) {
  std::vector<std::string> out;
  for (const auto& [name, value] : resp.headers)
    if (lower_trim(name) == "content-encoding") split_codings(value, out);
  // Transfer codings other than chunked (applied over the content codings).
  for (const auto& [name, value] : resp.headers)
    if (lower_trim(name) == "transfer-encoding") split_codings(value, out);
  std::erase(out, "chunked");
  return out;
}

Result<BodyDecoder> BodyDecoder::make(const std::vector<std::string>& codings) {
  BodyDecoder d;
  if (codings.size() > kMaxStages)
    return fail(Error::msg("response encoding", "the body is encoded " + std::to_string(codings.size()) +
                                                    " times, more than can be masked"));
  // Applied in the order listed: decoded from the last.
  for (auto it = codings.rbegin(); it != codings.rend(); ++it) {
    if (*it == "gzip" || *it == "x-gzip") d.stages_.push_back(std::make_unique<Inflater>(true));
    else if (*it == "deflate") d.stages_.push_back(std::make_unique<Inflater>(false));
    else return fail(Error::msg("response encoding", "the body is encoded with " + *it + ", which cannot be masked"));
  }
  return d;
}

bool BodyDecoder::feed(std::string_view in, std::string& out) {
  if (stages_.empty()) return (void)out.append(in), true;
  std::string cur(in), next;
  for (auto& st : stages_) {
    next.clear();
    if (!st->feed(cur, next)) return false;
    cur.swap(next);
  }
  out.append(cur);
  return true;
}

bool BodyDecoder::finish(std::string& out) {
  std::string cur, next;
  for (auto& st : stages_) {
    next.clear();
    if (!st->feed(cur, next) || !st->finish(next)) return false;
    cur.swap(next);
  }
  out.append(cur);
  return true;
}

}  // namespace exg::egress::detail
