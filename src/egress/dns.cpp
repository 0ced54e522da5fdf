// The in-sandbox resolver: see dns.hpp.
#include "egress/dns.hpp"

#include <netinet/in.h>

#include <array>
#include <cstring>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/udp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <deque>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <unistd.h>

#include "egress/proxy.hpp"
#include "egress/transparent.hpp"

namespace exg::egress::detail {

namespace {

uint16_t get16(std::string_view s, size_t at) {
  return static_cast<uint16_t>((static_cast<uint8_t>(s[at]) << 8) | static_cast<uint8_t>(s[at + 1]));
}
void put16(std::string& s, uint16_t v) {
  s.push_back(static_cast<char>(v >> 8));
  s.push_back(static_cast<char>(v & 0xff));
}
void put32(std::string& s, uint32_t v) {
  put16(s, static_cast<uint16_t>(v >> 16));
  put16(s, static_cast<uint16_t>(v & 0xffff));
}

}  // namespace

DnsParse parse_dns_query(std::string_view in, DnsQuery& q) {
  q = DnsQuery{};
  if (in.size() < 12) return {DnsParse::Drop, 0};
  uint16_t flags = get16(in, 2);
  if (flags & 0x8000) return {DnsParse::Drop, 0};  // a response: never answer one
  q.id = get16(in, 0);
  q.rd = flags & 0x0100;
  unsigned opcode = (flags >> 11) & 0xf;
  if (opcode != 0) return {DnsParse::Error, kRcodeNotImp};
  if (get16(in, 4) != 1) return {DnsParse::Error, kRcodeFormErr};
  size_t pos = 12, total = 0;
  std::string name;
  for (;;) {
    if (pos >= in.size()) return {DnsParse::Error, kRcodeFormErr};
    uint8_t len = static_cast<uint8_t>(in[pos]);
    if (len == 0) {
      ++pos;
      break;
    }
    if (len & 0xc0) return {DnsParse::Error, kRcodeFormErr};  // no compression in a question; > 63
    if (pos + 1 + len > in.size()) return {DnsParse::Error, kRcodeFormErr};
    total += len + 1;
    if (total > 254) return {DnsParse::Error, kRcodeFormErr};
    std::string_view label = in.substr(pos + 1, len);
    if (label.find('.') != std::string_view::npos) q.bad_name = true;
    if (!name.empty()) name.push_back('.');
    name.append(label);
    pos += 1 + len;
  }
  if (pos + 4 > in.size()) return {DnsParse::Error, kRcodeFormErr};
  q.qtype = get16(in, pos);
  q.qclass = get16(in, pos + 2);
  q.question = std::string(in.substr(12, pos + 4 - 12));
  q.name = std::move(name);
  if (q.name.empty()) q.bad_name = true;
  if (q.qclass != kDnsClassIn) return {DnsParse::Error, kRcodeNotImp};
  return {DnsParse::Query, 0};
}

std::string dns_response(const DnsQuery& q, uint8_t rcode, const std::vector<IpAddress>& answers, uint32_t ttl,
                         size_t max) {
  bool with_question = !q.question.empty();
  std::vector<std::string> rrs;
  if (with_question) {
    for (const auto& a : answers) {
      std::string rr;
      put16(rr, 0xc00c);  // the question's name
      put16(rr, a.v6 ? kDnsTypeAAAA : kDnsTypeA);
      put16(rr, kDnsClassIn);
      put32(rr, ttl);
      put16(rr, a.v6 ? 16 : 4);
      rr.append(reinterpret_cast<const char*>(a.bytes), a.v6 ? 16 : 4);
      rrs.push_back(std::move(rr));
    }
  }
  size_t size = 12 + q.question.size();
  size_t fit = 0;
  bool truncated = false;
  for (const auto& rr : rrs) {
    if (size + rr.size() > max) {
      truncated = true;
      break;
    }
    size += rr.size();
    ++fit;
  }
  std::string out;
  out.reserve(size);
  put16(out, q.id);
  uint16_t flags = 0x8000 | 0x0080 | (q.rd ? 0x0100 : 0) | (truncated ? 0x0200 : 0) | (rcode & 0xf);
  put16(out, flags);
  put16(out, with_question ? 1 : 0);
  put16(out, static_cast<uint16_t>(fit));
  put16(out, 0);
  put16(out, 0);
  out += q.question;
  for (size_t i = 0; i < fit; ++i) out += rrs[i];
  return out;
}

const char* rcode_name(uint8_t rcode) {
  switch (rcode) {
    case kRcodeNoError: return "NOERROR";
    case kRcodeFormErr: return "FORMERR";
    case kRcodeServFail: return "SERVFAIL";
    case kRcodeNxDomain: return "NXDOMAIN";
    case kRcodeNotImp: return "NOTIMP";
    case kRcodeRefused: return "REFUSED";
  }
  return "?";
}

std::string qtype_name(uint16_t t) {
  if (t == kDnsTypeA) return "A";
  if (t == kDnsTypeAAAA) return "AAAA";
  return "TYPE" + std::to_string(t);
}

using boost::asio::ip::tcp;

// A connection of the stream listener: framed queries in, framed answers
// out, in the order their answers are ready (each carries its query's id).
class DnsStreamConnection;

// The resolution logic, whatever carried the query: answer() takes one
// query's bytes and gives its response to `reply` (at once, or when the
// lookup completes; never after stop()).
class DnsServer : public std::enable_shared_from_this<DnsServer> {
 public:
  using Reply = std::function<void(std::string)>;  // empty: the query gets no answer
  explicit DnsServer(std::shared_ptr<ProxyState> st) : st_(std::move(st)), sock_(st_->io), acceptor_(st_->io) {}

  void serve_udp(int fd) {
    boost::system::error_code ec;
    sock_.assign(boost::asio::ip::udp::v4(), fd, ec);
    if (ec) {
      ::close(fd);
      return;
    }
    sock_.non_blocking(true, ec);
    receive();
  }

  void serve_stream(int fd) {
    boost::system::error_code ec;
    acceptor_.assign(tcp::v4(), fd, ec);  // (a unix socket: asio only moves its descriptor)
    if (ec) {
      ::close(fd);
      return;
    }
    acceptor_.non_blocking(true, ec);
    accept();
  }

  void stop();
  // nested_origin: DnsQuery::nested_origin.
  void answer(std::string_view data, Reply reply, const std::string& nested_origin = {});
  void forget(DnsStreamConnection* c);
  const std::shared_ptr<ProxyState>& state() const { return st_; }

 private:
  void receive() {
    sock_.async_receive_from(boost::asio::buffer(buf_), from_,
                             [self = shared_from_this()](const boost::system::error_code& ec, size_t n) {
                               if (self->stopped_ || ec == boost::asio::error::operation_aborted) return;
                               if (!ec)
                                 self->answer(std::string_view(self->buf_.data(), n),
                                              [self, to = self->from_](std::string bytes) { self->send(bytes, to); });
                               self->receive();
                             });
  }

  void accept();

  void handle(std::string_view data, const Reply& reply, const std::string& nested_origin) {
    DnsQuery q;
    DnsParse p = parse_dns_query(data, q);
    q.nested_origin = nested_origin;
    if (p.kind == DnsParse::Drop) return reply({});  // (no answer: the stream's count of queries in flight goes down)
    if (p.kind == DnsParse::Error) {
      audit(q, q.name, "refused", p.rcode == kRcodeFormErr ? "malformed query" : "not implemented", p.rcode, {}, {});
      return reply(dns_response(q, p.rcode, {}));
    }
    // A placeholder in a name would leave through the host's resolver: exfiltration.
    auto secrets = st_->secret_index ? st_->secret_index->now() : nullptr;  // (sec points into it)
    if (const Secret* sec = secrets ? secrets->find(q.name) : nullptr) {
      ++st_->stats.exfiltration;
      st_->count_refused(q.name, "secret " + sec->name + " in a DNS name");
      if (st_->audit_on())
        st_->audit_write({{"event", "exfiltration"}, {"protocol", "dns"}, {"secret", sec->name}, {"where", "dns name"},
                          {"host", q.name}, {"decision", "refused"}});
      return reply(dns_response(q, kRcodeNxDomain, {}));
    }
    if (q.bad_name) {
      audit(q, q.name, "refused", "invalid host: not a host name", kRcodeNxDomain, {}, {});
      return reply(dns_response(q, kRcodeNxDomain, {}));
    }
    auto host = normalise_host(q.name);
    if (!host) {
      audit(q, q.name, "refused", "invalid host: " + host.error().str(), kRcodeNxDomain, {}, {});
      return reply(dns_response(q, kRcodeNxDomain, {}));
    }
    Decision d = st_->rules()->check_name(*host);
    if (!d.allowed) {
      audit(q, host->name, "refused", d.rule, kRcodeNxDomain, {}, {});
      return reply(dns_response(q, kRcodeNxDomain, {}));
    }
    // Transparent egress hands out IPv4 addresses of its own only (the
    // sandbox has no IPv6 route): AAAA is answered empty, and clients use A.
    if (q.qtype != kDnsTypeA && (q.qtype != kDnsTypeAAAA || st_->handed_out)) {
      audit(q, host->name, "allowed", d.rule, kRcodeNoError, {}, {});
      return reply(dns_response(q, kRcodeNoError, {}));
    }
    // The proxy's own resolution path: /etc/hosts when the C library would
    // answer from it, else getaddrinfo on asio's resolver thread.
    if (auto addrs = st_->hosts_lookup(host->name)) return finish(q, host->name, d, *addrs, reply);
    if (resolvers_.size() >= kDnsMaxPending) {
      audit(q, host->name, "refused", "too many lookups in flight", kRcodeServFail, {}, {});
      return reply(dns_response(q, kRcodeServFail, {}));
    }
    auto r = std::make_shared<tcp::resolver>(st_->io);
    resolvers_.insert(r);
    r->async_resolve(host->name, "0", tcp::resolver::numeric_service,
                     [self = shared_from_this(), r, q, name = host->name, d, reply](
                         const boost::system::error_code& ec, tcp::resolver::results_type res) {
                       self->resolvers_.erase(r);
                       if (self->stopped_) return;
                       if (ec) {
                         uint8_t rc = ec == boost::asio::error::host_not_found ? kRcodeNxDomain : kRcodeServFail;
                         self->audit(q, name, "refused", "lookup failed: " + ec.message(), rc, {}, {});
                         return reply(dns_response(q, rc, {}));
                       }
                       std::vector<IpAddress> addrs;
                       for (const auto& e : res)
                         if (auto a = IpAddress::from_sockaddr(e.endpoint().data())) addrs.push_back(*a);
                       self->finish(q, name, d, addrs, reply);
                     });
  }

  void finish(const DnsQuery& q, const std::string& name, const Decision& d, const std::vector<IpAddress>& addrs,
              const Reply& reply) {
    std::vector<IpAddress> ok;
    std::vector<std::string> refused;
    std::optional<Decision> first_refusal;
    bool want_v6 = q.qtype == kDnsTypeAAAA;
    bool transparent = st_->handed_out != nullptr;
    for (const auto& raw : addrs) {
      IpAddress a = unmapped(raw);
      if (a.v6 != want_v6 && !transparent) continue;  // (transparent: the proxy connects to either)
      Decision ad = st_->rules()->check_address(a);
      if (!ad.allowed) {
        if (!first_refusal) first_refusal = ad;
        refused.push_back(a.str());
        continue;
      }
      if (std::find(ok.begin(), ok.end(), a) == ok.end()) ok.push_back(a);
    }
    // Every address of the asked type refused: an empty answer, logged as a refusal.
    if (ok.empty() && first_refusal) {
      audit(q, name, "refused", first_refusal->rule, kRcodeNoError, {}, refused);
      return reply(dns_response(q, kRcodeNoError, {}));
    }
    // Transparent egress: the sandbox gets the address that stands for the
    // name (its connections to it reach the proxy, which resolves again);
    // the addresses the name has outside stay outside.
    if (transparent && !ok.empty()) {
      auto mine = st_->handed_out->address_for(name);
      if (!mine) {
        audit(q, name, "refused", "the resolver's address range is used up", kRcodeServFail, {}, refused);
        return reply(dns_response(q, kRcodeServFail, {}));
      }
      ok = {*mine};
    }
    audit(q, name, "allowed", d.rule, kRcodeNoError, ok, refused);
    reply(dns_response(q, kRcodeNoError, ok));
  }

  void audit(const DnsQuery& q, const std::string& host, const char* decision, const std::string& rule, uint8_t rcode,
             const std::vector<IpAddress>& answers, const std::vector<std::string>& refused) {
    if (!st_->audit_on()) return;
    nlohmann::json j = {{"event", "dns"}, {"protocol", "dns"}};
    j["host"] = host;
    if (q.qtype) j["qtype"] = qtype_name(q.qtype);
    j["decision"] = decision;
    j["rule"] = rule;
    j["rcode"] = rcode_name(rcode);
    nlohmann::json a = nlohmann::json::array();
    for (const auto& x : answers) a.push_back(x.str());
    j["answers"] = a;
    if (!refused.empty()) j["refused_addresses"] = refused;
    if (!q.nested_origin.empty()) {
      j["origin"] = "nested container";
      j["origin_address"] = q.nested_origin;
    }
    st_->audit_write(std::move(j));
  }

  void send(const std::string& bytes, const boost::asio::ip::udp::endpoint& to) {
    if (stopped_ || bytes.empty()) return;
    boost::system::error_code ec;
    sock_.send_to(boost::asio::buffer(bytes), to, 0, ec);  // non-blocking: a full buffer drops the answer
  }

  std::shared_ptr<ProxyState> st_;
  boost::asio::ip::udp::socket sock_;
  tcp::acceptor acceptor_;
  std::array<char, 4096> buf_{};
  boost::asio::ip::udp::endpoint from_;
  std::set<std::shared_ptr<tcp::resolver>> resolvers_;
  std::map<DnsStreamConnection*, std::shared_ptr<DnsStreamConnection>> conns_;
  bool stopped_ = false;
};

void DnsServer::answer(std::string_view data, Reply reply, const std::string& nested_origin) {
  if (!stopped_) handle(data, reply, nested_origin);
}

class DnsStreamConnection : public std::enable_shared_from_this<DnsStreamConnection> {
 public:
  DnsStreamConnection(std::shared_ptr<DnsServer> server, tcp::socket s)
      : server_(std::move(server)), sock_(std::move(s)), timer_(server_->state()->io) {}

  void start() {
    arm();
    read();
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    boost::system::error_code ec;
    timer_.cancel();
    sock_.close(ec);
    server_->forget(this);  // (last: it may drop the last reference to this)
  }

 private:
  // A connection that sends no whole query for header_timeout, with nothing
  // in flight, is closed.
  void arm() {
    timer_.expires_after(server_->state()->cfg.header_timeout);
    timer_.async_wait([w = weak_from_this()](const boost::system::error_code& ec) {
      auto self = w.lock();
      if (ec || !self || self->closed_) return;
      if (self->pending_ == 0 && self->writing_.empty()) return self->close();
      self->arm();
    });
  }

  void read() {
    if (closed_ || reading_ || peer_done_ || pending_ >= kDnsStreamMaxPending) return;
    reading_ = true;
    sock_.async_read_some(boost::asio::buffer(buf_),
                          [self = shared_from_this()](const boost::system::error_code& ec, size_t n) {
                            self->reading_ = false;
                            if (self->closed_) return;
                            if (ec) {
                              self->peer_done_ = true;  // (end of stream or an error: no more queries)
                              return self->maybe_done();
                            }
                            self->in_.append(self->buf_.data(), n);
                            self->take_queries();
                          });
  }

  void take_queries() {
    if (!preamble_read_) {
      if (in_.size() < kDnsStreamPreambleBytes) return read();
      IpAddress asker;
      std::memcpy(asker.bytes, in_.data(), kDnsStreamPreambleBytes);
      if (forwarded_source(asker)) nested_origin_ = asker.str();
      in_.erase(0, kDnsStreamPreambleBytes);
      preamble_read_ = true;
    }
    for (;;) {
      if (in_.size() < 2) break;
      size_t len = (static_cast<uint8_t>(in_[0]) << 8) | static_cast<uint8_t>(in_[1]);
      if (len > kDnsMaxStreamQuery) {
        if (server_->state()->audit_on())
          server_->state()->audit_write({{"event", "dns"}, {"protocol", "dns"}, {"decision", "refused"},
                                         {"rule", "malformed query"},
                                         {"reason", "a query of " + std::to_string(len) + " bytes on a stream (at most " +
                                                        std::to_string(kDnsMaxStreamQuery) + ")"}});
        return close();
      }
      if (in_.size() < 2 + len) break;
      std::string query = in_.substr(2, len);
      in_.erase(0, 2 + len);
      ++pending_;
      arm();
      server_->answer(
          query,
          [w = weak_from_this()](std::string bytes) {
            if (auto self = w.lock()) self->answered(std::move(bytes));
          },
          nested_origin_);
      if (closed_) return;
      if (pending_ >= kDnsStreamMaxPending) return;  // read() waits for answers first
    }
    read();
  }

  void answered(std::string bytes) {
    if (closed_) return;
    --pending_;
    if (bytes.empty()) {  // a query not answered (too short to, or a response)
      read();
      return maybe_done();
    }
    std::string framed;
    framed.push_back(static_cast<char>(bytes.size() >> 8));
    framed.push_back(static_cast<char>(bytes.size() & 0xff));
    framed += bytes;
    out_.push_back(std::move(framed));
    write();
    read();
  }

  void write() {
    if (!writing_.empty() || out_.empty()) return;
    writing_ = std::move(out_.front());
    out_.pop_front();
    boost::asio::async_write(sock_, boost::asio::buffer(writing_),
                             [self = shared_from_this()](const boost::system::error_code& ec, size_t) {
                               self->writing_.clear();
                               if (self->closed_) return;
                               if (ec) return self->close();
                               self->write();
                               self->maybe_done();
                             });
  }

  // The client ended its side and every answer went: the connection ends.
  void maybe_done() {
    if (peer_done_ && pending_ == 0 && writing_.empty() && out_.empty()) close();
  }

  std::shared_ptr<DnsServer> server_;
  tcp::socket sock_;
  boost::asio::steady_timer timer_;
  std::array<char, 1024> buf_{};
  std::string in_, writing_;
  std::deque<std::string> out_;
  size_t pending_ = 0;  // queries whose answers have not come yet
  bool reading_ = false, peer_done_ = false, closed_ = false;
  bool preamble_read_ = false;  // who asked (kDnsStreamPreambleBytes) came first
  std::string nested_origin_;   // DnsQuery::nested_origin of this connection's queries
};

void DnsServer::accept() {
  acceptor_.async_accept([self = shared_from_this()](const boost::system::error_code& ec, tcp::socket s) {
    if (self->stopped_ || ec == boost::asio::error::operation_aborted) return;
    if (!ec) {
      if (self->conns_.size() >= kDnsStreamMaxConnections) {
        boost::system::error_code e;
        s.close(e);  // (the guest's relay sees its stream closed; its client retries)
      } else {
        auto c = std::make_shared<DnsStreamConnection>(self, std::move(s));
        self->conns_.emplace(c.get(), c);
        c->start();
      }
    }
    self->accept();
  });
}

void DnsServer::forget(DnsStreamConnection* c) { conns_.erase(c); }

void DnsServer::stop() {
  if (stopped_) return;
  stopped_ = true;
  boost::system::error_code ec;
  sock_.close(ec);
  acceptor_.close(ec);
  for (auto& r : resolvers_) r->cancel();
  resolvers_.clear();
  auto conns = std::move(conns_);
  for (auto& [p, c] : conns) c->close();
}

std::shared_ptr<DnsServer> start_dns_server(std::shared_ptr<ProxyState> st, int udp_fd) {
  auto s = std::make_shared<DnsServer>(std::move(st));
  s->serve_udp(udp_fd);
  return s;
}

std::shared_ptr<DnsServer> start_dns_stream_server(std::shared_ptr<ProxyState> st, int listening_fd) {
  auto s = std::make_shared<DnsServer>(std::move(st));
  s->serve_stream(listening_fd);
  return s;
}

void stop_dns_server(const std::shared_ptr<DnsServer>& s) {
  if (s) s->stop();
}

}  // namespace exg::egress::detail
