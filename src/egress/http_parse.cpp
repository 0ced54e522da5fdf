// HTTP/1.x head parsing for the proxy: strict (no obs-fold, no bare CR/LF, no
// control bytes), because what we accept and what the origin accepts must not
// differ (request smuggling).
#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

#include "egress/proxy.hpp"

namespace exg::egress::detail {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return std::tolower((unsigned char)x) == std::tolower((unsigned char)y); });
}

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = (char)std::tolower((unsigned char)c);
  return r;
}

bool is_tchar(char c) {
  return std::isalnum((unsigned char)c) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), is_tchar); }

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Error bad(std::string why) { return Error::msg("malformed request", std::move(why)); }

// Splits the head into lines (CRLF only) and parses the header fields after the first line.
Result<std::string_view> split_headers(std::string_view head, HttpHead& h, size_t max_fields) {
  if (head.size() < 4 || !head.ends_with("\r\n\r\n")) return fail(bad("incomplete head"));
  head.remove_suffix(2);  // the final empty line's CRLF; every line now ends with CRLF
  for (unsigned char c : head)
    if ((c < 0x20 && c != '\t' && c != '\r' && c != '\n') || c == 0x7f) return fail(bad("control byte in head"));
  size_t eol = head.find("\r\n");
  std::string_view first = head.substr(0, eol);
  size_t pos = eol + 2;
  while (pos < head.size()) {
    size_t e = head.find("\r\n", pos);
    std::string_view line = head.substr(pos, e - pos);
    pos = e + 2;
    if (line.find('\r') != std::string_view::npos || line.find('\n') != std::string_view::npos)
      return fail(bad("bare CR or LF"));
    if (line.empty() || line.front() == ' ' || line.front() == '\t') return fail(bad("folded header line"));
    size_t colon = line.find(':');
    if (colon == std::string_view::npos || !is_token(line.substr(0, colon))) return fail(bad("bad header line"));
    h.headers.emplace_back(std::string(line.substr(0, colon)), std::string(trim(line.substr(colon + 1))));
    if (h.headers.size() > max_fields) return fail(bad("too many headers"));
  }
  if (first.find('\r') != std::string_view::npos || first.find('\n') != std::string_view::npos)
    return fail(bad("bare CR or LF"));
  return first;
}

bool valid_version(std::string_view v) { return v == "HTTP/1.1" || v == "HTTP/1.0"; }

// Header names a hop-by-hop Connection list must never remove: they frame the message.
bool framing_header(std::string_view name) {
  return iequals(name, "content-length") || iequals(name, "transfer-encoding") || iequals(name, "host");
}

std::set<std::string> hop_by_hop(const HttpHead& h) {
  std::set<std::string> drop = {"connection", "proxy-connection", "keep-alive", "proxy-authorization",
                                "proxy-authenticate", "te", "trailer", "upgrade"};
  for (const auto& [name, value] : h.headers) {
    if (!iequals(name, "connection") && !iequals(name, "proxy-connection")) continue;
    std::string_view v = value;
    while (!v.empty()) {
      size_t comma = v.find(',');
      std::string_view tok = trim(v.substr(0, comma));
      if (!tok.empty() && !framing_header(tok)) drop.insert(lower(tok));
      if (comma == std::string_view::npos) break;
      v.remove_prefix(comma + 1);
    }
  }
  return drop;
}

std::string format_authority(const Authority& a, uint16_t default_port) {
  std::string h = a.host.find(':') != std::string::npos ? "[" + a.host + "]" : a.host;
  if (a.port != default_port) h += ":" + std::to_string(a.port);
  return h;
}

}  // namespace

const std::string* HttpHead::find(std::string_view name) const {
  for (const auto& [n, v] : headers)
    if (iequals(n, name)) return &v;
  return nullptr;
}

size_t HttpHead::count(std::string_view name) const {
  return std::count_if(headers.begin(), headers.end(), [&](const auto& p) { return iequals(p.first, name); });
}

size_t head_length(std::string_view buf) {
  size_t p = buf.find("\r\n\r\n");
  return p == std::string_view::npos ? 0 : p + 4;
}

bool plausible_request_prefix(std::string_view buf) {
  size_t eol = buf.find('\n');
  std::string_view line = buf.substr(0, eol);
  if (eol != std::string_view::npos) {
    if (line.empty() || line.back() != '\r') return false;
    line.remove_suffix(1);
  } else if (!line.empty() && line.back() == '\r') {
    line.remove_suffix(1);  // the line's CR has arrived, its LF not yet (a read between them)
  }
  for (unsigned char c : line)
    if (c < 0x20 || c >= 0x7f) return false;
  // Method: a token, then a space, within the first 32 bytes.
  size_t sp = line.find(' ');
  std::string_view method = line.substr(0, sp);
  if (!std::all_of(method.begin(), method.end(), is_tchar)) return false;
  if (sp == std::string_view::npos && method.size() > 32) return false;
  return true;
}

Result<HttpHead> parse_request_head(std::string_view head, size_t max_fields) {
  HttpHead h;
  auto first = split_headers(head, h, max_fields);
  if (!first) return fail(first.error());
  std::string_view line = *first;
  size_t a = line.find(' ');
  size_t b = a == std::string_view::npos ? a : line.find(' ', a + 1);
  if (b == std::string_view::npos || line.find(' ', b + 1) != std::string_view::npos)
    return fail(bad("bad request line"));
  h.method = line.substr(0, a);
  h.target = line.substr(a + 1, b - a - 1);
  h.version = line.substr(b + 1);
  if (!is_token(h.method)) return fail(bad("bad method"));
  if (h.target.empty()) return fail(bad("empty target"));
  if (!valid_version(h.version)) return fail(bad("unsupported version"));
  return h;
}

Result<HttpHead> parse_response_head(std::string_view head, size_t max_fields) {
  HttpHead h;
  auto first = split_headers(head, h, max_fields);
  if (!first) return fail(first.error());
  std::string_view line = *first;
  if (line.size() < 12 || !valid_version(line.substr(0, 8)) || line[8] != ' ') return fail(bad("bad status line"));
  h.version = line.substr(0, 8);
  std::string_view code = line.substr(9, 3);
  if (!std::all_of(code.begin(), code.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return fail(bad("bad status code"));
  h.status = (code[0] - '0') * 100 + (code[1] - '0') * 10 + (code[2] - '0');
  // "043" would go on to the client as "43" (found by fuzz/http_response.cpp).
  if (h.status < 100) return fail(bad("bad status code"));
  if (line.size() > 12) {
    if (line[12] != ' ') return fail(bad("bad status line"));
    h.reason = line.substr(13);
  }
  return h;
}

Result<Authority> parse_authority(std::string_view s, uint16_t default_port) {
  Authority a;
  std::string_view host, port;
  if (s.starts_with('[')) {
    size_t close = s.find(']');
    if (close == std::string_view::npos) return fail(bad("bad IPv6 literal"));
    host = s.substr(1, close - 1);
    std::string_view rest = s.substr(close + 1);
    if (!rest.empty()) {
      if (rest[0] != ':') return fail(bad("bad authority"));
      port = rest.substr(1);
      a.port_given = true;
    }
  } else {
    size_t colon = s.rfind(':');
    if (colon != std::string_view::npos) {
      if (s.find(':') != colon) return fail(bad("IPv6 literal without brackets"));
      host = s.substr(0, colon);
      port = s.substr(colon + 1);
      a.port_given = true;
    } else {
      host = s;
    }
  }
  if (host.empty()) return fail(bad("empty host"));
  a.host = host;
  if (a.port_given) {
    unsigned v = 0;
    auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), v);
    if (port.empty() || port.size() > 5 || ec != std::errc() || p != port.data() + port.size() || v == 0 || v > 65535)
      return fail(bad("bad port"));
    a.port = (uint16_t)v;
  } else {
    if (default_port == 0) return fail(bad("port required"));
    a.port = default_port;
  }
  return a;
}

Result<AbsoluteTarget> parse_absolute_http(std::string_view target) {
  if (target.size() < 7 || !iequals(target.substr(0, 7), "http://")) return fail(bad("not an http:// absolute URI"));
  std::string_view rest = target.substr(7);
  size_t end = rest.find_first_of("/?#");
  std::string_view auth = rest.substr(0, end);
  if (auth.find('@') != std::string_view::npos) return fail(bad("userinfo in URI"));
  auto a = parse_authority(auth, 80);
  if (!a) return fail(a.error());
  AbsoluteTarget t;
  t.authority = *a;
  std::string_view path = end == std::string_view::npos ? std::string_view() : rest.substr(end);
  if (size_t hash = path.find('#'); hash != std::string_view::npos) path = path.substr(0, hash);
  t.path = path.empty() ? "/" : path.starts_with('/') ? std::string(path) : "/" + std::string(path);
  return t;
}

std::string origin_request_head(const HttpHead& req, const AbsoluteTarget& t) {
  std::string out = req.method + " " + t.path + " " + req.version + "\r\n";
  auto drop = hop_by_hop(req);
  bool has_host = false;
  for (const auto& [name, value] : req.headers) {
    if (drop.contains(lower(name))) continue;
    if (iequals(name, "host")) has_host = true;
    out += name + ": " + value + "\r\n";
  }
  if (!has_host) out = out.insert(out.find("\r\n") + 2, "Host: " + format_authority(t.authority, 80) + "\r\n");
  out += "Connection: close\r\n\r\n";
  return out;
}

std::string client_response_head(const HttpHead& resp, bool close) {
  std::string out = resp.version + " " + std::to_string(resp.status) + " " + resp.reason + "\r\n";
  auto drop = hop_by_hop(resp);
  drop.erase("proxy-authenticate");  // a response header meant for the client of a proxy: keep
  for (const auto& [name, value] : resp.headers) {
    if (drop.contains(lower(name))) continue;
    out += name + ": " + value + "\r\n";
  }
  out += close ? "Connection: close\r\n\r\n" : "\r\n";
  return out;
}

bool connection_has(const HttpHead& h, std::string_view token) {
  for (const auto& [name, value] : h.headers) {
    if (!iequals(name, "connection")) continue;
    std::string_view v = value;
    while (!v.empty()) {
      size_t comma = v.find(',');
      if (iequals(trim(v.substr(0, comma)), token)) return true;
      if (comma == std::string_view::npos) break;
      v.remove_prefix(comma + 1);
    }
  }
  return false;
}

std::string forwarded_request_head(const HttpHead& req, bool close) {
  std::string out = req.method + " " + req.target + " HTTP/1.1\r\n";
  auto drop = hop_by_hop(req);
  for (const auto& [name, value] : req.headers) {
    if (drop.contains(lower(name))) continue;
    out += name + ": " + value + "\r\n";
  }
  out += close ? "Connection: close\r\n\r\n" : "\r\n";
  return out;
}

ResponseFraming response_body_framing(const HttpHead& resp, std::string_view request_method) {
  ResponseFraming f;
  if (iequals(request_method, "HEAD") || (resp.status >= 100 && resp.status < 200) || resp.status == 204 ||
      resp.status == 304)
    return f;
  if (const std::string* te = resp.find("transfer-encoding")) {
    std::string_view v = trim(*te);
    size_t comma = v.rfind(',');
    std::string_view last = trim(comma == std::string_view::npos ? v : v.substr(comma + 1));
    f.kind = resp.count("transfer-encoding") == 1 && iequals(last, "chunked") ? ResponseFraming::Chunked
                                                                               : ResponseFraming::UntilClose;
    return f;
  }
  f.kind = ResponseFraming::UntilClose;
  std::optional<uint64_t> len;
  for (const auto& [name, value] : resp.headers) {
    if (!iequals(name, "content-length")) continue;
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (value.empty() || ec != std::errc() || p != value.data() + value.size() || (len && *len != v)) return f;
    len = v;
  }
  if (len) f.kind = ResponseFraming::Length, f.length = *len;
  return f;
}

Result<BodyFraming> request_body_framing(const HttpHead& req) {
  BodyFraming f;
  size_t te = req.count("transfer-encoding"), cl = req.count("content-length");
  if (te && cl) return fail(bad("both Transfer-Encoding and Content-Length"));
  if (te) {
    if (te != 1 || !iequals(trim(*req.find("transfer-encoding")), "chunked"))
      return fail(bad("unsupported Transfer-Encoding"));
    f.kind = BodyFraming::Chunked;
    return f;
  }
  if (cl) {
    std::optional<uint64_t> len;
    for (const auto& [name, value] : req.headers) {
      if (!iequals(name, "content-length")) continue;
      uint64_t v = 0;
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (value.empty() || ec != std::errc() || p != value.data() + value.size() || value.size() > 18)
        return fail(bad("bad Content-Length"));
      if (len && *len != v) return fail(bad("conflicting Content-Length"));
      len = v;
    }
    f.kind = BodyFraming::Length;
    f.length = *len;
  }
  return f;
}

bool host_header_matches(std::string_view host_header, const Authority& target, uint16_t default_port) {
  auto ha = parse_authority(host_header, default_port);
  if (!ha) return false;
  auto hn = normalise_host(ha->host);
  auto tn = normalise_host(target.host);
  return hn && tn && hn->name == tn->name && ha->port == target.port;
}

std::optional<std::string> base64_decode(std::string_view in) {
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  size_t pad = 0;
  while (!in.empty() && in.back() == '=' && pad < 2) in.remove_suffix(1), ++pad;
  if (in.size() % 4 == 1) return std::nullopt;
  if (pad && (in.size() + pad) % 4 != 0) return std::nullopt;
  std::string out;
  out.reserve(in.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    int v = val(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | (uint32_t)v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += (char)((acc >> bits) & 0xff);
    }
  }
  if (bits && (acc & ((1u << bits) - 1))) return std::nullopt;  // non-zero leftover bits: not canonical
  return out;
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Time depends on the lengths only, never on where the bytes differ.
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? (unsigned char)a[i] : 0, y = i < b.size() ? (unsigned char)b[i] : 0;
    diff = diff | (unsigned char)(x ^ y);
  }
  return diff == 0;
}

bool proxy_authorization_ok(const std::string* header, std::string_view token) {
  if (!header || token.empty()) return false;
  std::string_view v = trim(*header);
  size_t sp = v.find(' ');
  if (sp == std::string_view::npos) return false;
  std::string_view scheme = v.substr(0, sp), cred = trim(v.substr(sp + 1));
  if (iequals(scheme, "bearer")) return constant_time_equal(cred, token);
  if (!iequals(scheme, "basic")) return false;
  auto dec = base64_decode(cred);
  if (!dec) return false;
  std::string want = "exguardian:" + std::string(token);
  return constant_time_equal(*dec, want);
}

long ChunkTracker::feed(std::string_view in, std::string* data) {
  size_t i = 0;
  while (i < in.size() && state_ != Done) {
    char c = in[i];
    switch (state_) {
      case Size:
        if (std::isxdigit((unsigned char)c)) {
          if (++digits_ > 15) return -1;
          remaining_ = remaining_ * 16 + (std::isdigit((unsigned char)c) ? c - '0' : std::tolower(c) - 'a' + 10);
        } else if (digits_ && (c == ';' || c == ' ' || c == '\t')) {
          state_ = Ext;
        } else if (digits_ && c == '\r') {
          state_ = SizeLf;
        } else {
          return -1;
        }
        ++i;
        break;
      case Ext:
        if (c == '\r') state_ = SizeLf;
        else if (c == '\n' || ((unsigned char)c < 0x20 && c != '\t')) return -1;
        ++i;
        break;
      case SizeLf:
        if (c != '\n') return -1;
        ++i;
        state_ = remaining_ ? Data : TrailerStart;
        digits_ = 0;
        break;
      case Data: {
        size_t n = std::min<uint64_t>(remaining_, in.size() - i);
        if (data) data->append(in.substr(i, n));
        i += n;
        remaining_ -= n;
        if (!remaining_) state_ = DataCr;
        break;
      }
      case DataCr:
        if (c != '\r') return -1;
        ++i;
        state_ = DataLf;
        break;
      case DataLf:
        if (c != '\n') return -1;
        ++i;
        state_ = Size;
        break;
      case TrailerStart:
        ++i;
        state_ = c == '\r' ? EndLf : Trailer;
        if (c == '\n') return -1;
        break;
      case Trailer:
        if (c == '\r') state_ = TrailerLf;
        else if (c == '\n') return -1;
        ++i;
        break;
      case TrailerLf:
        if (c != '\n') return -1;
        ++i;
        state_ = TrailerStart;
        break;
      case EndLf:
        if (c != '\n') return -1;
        ++i;
        state_ = Done;
        break;
      case Done:
        break;
    }
  }
  return (long)i;
}

}  // namespace exg::egress::detail
