// The proxy's listeners, the decision (rules -> own DNS -> rules on every
// address -> connect to an address that passed), audit and stats. The HTTP and
// SOCKS5 front ends are in http_session.cpp and socks_session.cpp.
#include "egress/proxy.hpp"

#include <malloc.h>
#include <sys/resource.h>

#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <fstream>
#include <sstream>

#include "egress/dns.hpp"

namespace exg::egress {

using boost::asio::ip::tcp;
namespace detail {

// ---- stats ------------------------------------------------------------------------------------

constexpr size_t kMaxRefusedHosts = 256;  // distinct names remembered; the rest count as "(other)"
constexpr size_t kOverLimitSlack = 64;    // connections answered with 503 before we just close

void ProxyState::count_refused(const std::string& host, const std::string& rule) {
  ++stats.refused;
  if (host.empty()) return;
  auto it = stats.refused_hosts.find(host);
  if (it != stats.refused_hosts.end()) {
    ++it->second;
  } else if (stats.refused_hosts.size() < kMaxRefusedHosts) {
    stats.refused_hosts[host] = 1;
    if (!rule.empty()) stats.refused_rules[host] = rule;
  } else {
    ++stats.refused_hosts["(other)"];
  }
}

bool ProxyState::audit_on() const { return audit && audit->enabled(); }

void ProxyState::audit_write(nlohmann::json j) {
  if (audit_on()) audit->write(std::move(j));
}

// ---- /etc/hosts -------------------------------------------------------------------------------

// A parsed copy of /etc/hosts, used when nsswitch.conf puts "files" first for
// hosts (then getaddrinfo would answer such a name from the file too, and a
// name that is there never reaches DNS). Checked for changes at most once a
// second. Every address of every line naming the host, in file order, as
// glibc's files backend collects them; scoped IPv6 entries are skipped.
struct ProxyState::HostsCache {
  std::chrono::steady_clock::time_point checked{};
  struct Key {
    ino_t ino = 0;
    off_t size = -1;
    timespec mtime{};
    bool operator==(const Key& o) const {
      return ino == o.ino && size == o.size && mtime.tv_sec == o.mtime.tv_sec && mtime.tv_nsec == o.mtime.tv_nsec;
    }
  } hosts_key, nss_key;
  bool files_first = false;
  std::unordered_map<std::string, std::vector<IpAddress>> names;

  static Key key_of(const char* path) {
    struct stat st{};
    if (::stat(path, &st) != 0) return Key{};
    return Key{st.st_ino, st.st_size, st.st_mtim};
  }

  void refresh() {
    auto now = std::chrono::steady_clock::now();
    if (now - checked < std::chrono::seconds(1) && checked.time_since_epoch().count()) return;
    checked = now;
    Key nk = key_of("/etc/nsswitch.conf"), hk = key_of("/etc/hosts");
    if (!(nk == nss_key)) {
      nss_key = nk;
      files_first = false;
      std::ifstream f("/etc/nsswitch.conf");
      std::string line;
      while (std::getline(f, line)) {
        if (auto h = line.find('#'); h != std::string::npos) line.resize(h);
        std::istringstream ls(line);
        std::string db, first, second;
        if (!(ls >> db) || db != "hosts:") continue;
        ls >> first >> second;
        // "files" first and no action item right after it that could skip its answer.
        files_first = first == "files" && !second.starts_with('[');
      }
    }
    if (!(hk == hosts_key)) {
      hosts_key = hk;
      names.clear();
      std::ifstream f("/etc/hosts");
      std::string line;
      while (std::getline(f, line)) {
        if (auto h = line.find('#'); h != std::string::npos) line.resize(h);
        std::istringstream ls(line);
        std::string addr, name;
        if (!(ls >> addr)) continue;
        auto a = parse_ip(addr);
        if (!a) continue;
        while (ls >> name) {
          for (char& c : name) c = (char)std::tolower((unsigned char)c);
          while (name.size() > 1 && name.back() == '.') name.pop_back();
          auto& v = names[name];
          if (std::find(v.begin(), v.end(), *a) == v.end()) v.push_back(*a);
        }
      }
    }
  }
};

std::optional<std::vector<IpAddress>> ProxyState::hosts_lookup(const std::string& name) {
  if (!hosts) hosts = std::make_unique<HostsCache>();
  hosts->refresh();
  if (!hosts->files_first) return std::nullopt;
  auto it = hosts->names.find(name);
  if (it == hosts->names.end()) return std::nullopt;
  return it->second;
}

// ---- deadlines --------------------------------------------------------------------------------

namespace {

// The rules as the proxy holds them: checking the host's addresses as followed now.
std::shared_ptr<const Rules> following(Rules rules, const ProxyConfig& cfg) {
  if (cfg.host_addresses) rules.follow_host_addresses(cfg.host_addresses->addresses());
  return std::make_shared<const Rules>(std::move(rules));
}

}  // namespace

ProxyState::ProxyState(boost::asio::io_context& io, const Rules& rules, AuditSink* audit, ProxyConfig cfg)
    : io(io), rules_now(following(rules, cfg)), audit(audit), cfg(std::move(cfg)), sweep_timer(io) {
  // Notifications are read on this loop as they come (and at every connection: connect_next).
  if (this->cfg.host_addresses) this->cfg.host_addresses->start(io);
  // The connection cap must bite before the descriptor limit does: a refusal
  // (503, SOCKS reply 1, an audit line) instead of accept() failing with EMFILE
  // for everyone, well-behaved clients included. 64 fds stay for the rest.
  if (rlimit rl; ::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    size_t room = rl.rlim_cur > 128 ? (static_cast<size_t>(rl.rlim_cur) - 64) / Proxy::kFdsPerConnection : 16;
    this->cfg.max_connections = std::min(this->cfg.max_connections, room);
  }
  auto shortest = std::min({this->cfg.header_timeout, this->cfg.connect_timeout, this->cfg.idle_timeout,
                            std::chrono::milliseconds(2000)});
  sweep_period = std::clamp(shortest / 8, std::chrono::milliseconds(10), std::chrono::milliseconds(500));
  if (this->cfg.secrets) {
    auto idx = SecretIndex::build(this->cfg.secrets);
    if (!idx) {
      // The caller validates (SecretIndex::build) before starting; should a host
      // list still not compile, no secret goes anywhere and every placeholder is refused.
      auto none = std::make_shared<SecretsConfig>(*this->cfg.secrets);
      std::erase_if(none->secrets, [](const Secret& s) { return s.placeholder.size() < 8; });
      for (auto& s : none->secrets) s.hosts.clear();
      idx = SecretIndex::build(std::move(none));
    }
    if (idx) secret_index = std::make_unique<SharedSecretIndex>(std::move(*idx));
  }
  if (this->cfg.transparent) {
    handed_out = std::make_unique<HandedOutAddresses>();
    for (const auto& n : this->cfg.pinned_names) handed_out->address_for(n);
  }
}

ProxyState::~ProxyState() = default;

std::shared_ptr<const Rules> ProxyState::rules() const {
  std::lock_guard lock(rules_mu);
  return rules_now;
}

void ProxyState::set_rules(std::shared_ptr<const Rules> r) {
  std::lock_guard lock(rules_mu);
  rules_now = std::move(r);
}

void ProxyState::start_sweep(std::shared_ptr<ProxyState> self) {
  if (sweeping) return;
  sweeping = true;
  sweep_timer.expires_after(sweep_period);
  sweep_timer.async_wait([self = std::move(self)](const boost::system::error_code& ec) {
    self->sweeping = false;
    if (ec) return;
    self->sweep(self);
  });
}

void ProxyState::sweep(const std::shared_ptr<ProxyState>& self) {
  auto now = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<Session>> live;
  live.reserve(sessions.size());
  for (auto& [p, w] : sessions)
    if (auto s = w.lock()) live.push_back(std::move(s));
  for (auto& s : live) s->check_deadline(now);
  live.clear();
  if (!sessions.empty()) return start_sweep(self);
  // Idle again: hand the crowd's freed heap back to the system (glibc keeps it
  // otherwise), so that the proxy's memory returns after a burst. Once per burst:
  // the sweep stops until the next session.
  ::malloc_trim(0);
}

// ---- session base -----------------------------------------------------------------------------

Session::Session(std::shared_ptr<ProxyState> st, tcp::socket client, const char* protocol, bool auth)
    : st_(std::move(st)), client_(std::move(client)), upstream_(st_->io), protocol_(protocol), auth_(auth),
      started_(std::chrono::steady_clock::now()) {
  ++st_->active;
}

Session::~Session() {
  --st_->active;
  st_->sessions.erase(this);
}

void Session::register_self() {
  st_->sessions[this] = weak_from_this();
  st_->start_sweep(st_);
}

void Session::close() {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ec;
  cancel_timer();
  if (resolver_) resolver_->cancel();
  if (client_.is_open()) client_.close(ec);
  if (upstream_.is_open()) upstream_.close(ec);
  if (auto t = tunnel_.lock()) t->close();
}

void Session::arm_timer(std::chrono::milliseconds d, const char* what) {
  deadline_ = std::chrono::steady_clock::now() + d;
  deadline_what_ = what;
}

void Session::check_deadline(std::chrono::steady_clock::time_point now) {
  if (closed_) return;
  if (auto t = tunnel_.lock()) {
    if (!t->closed() && now - t->last_active() >= st_->cfg.idle_timeout) t->close("idle timeout");
    return;
  }
  if (now >= deadline_) {
    cancel_timer();
    on_timeout(deadline_what_);
  }
}

void Session::on_timeout(const char* what) {
  if (std::string_view(what) == "connect") {
    // During resolve or connect: the pending handler reports TimedOut.
    timed_out_ = true;
    if (resolver_) resolver_->cancel();
    boost::system::error_code ec;
    upstream_.close(ec);
    return;
  }
  if (std::string_view(what) == "header") log_header_timeout();
  close();
}

// Reads into the loop's shared scratch buffer and keeps only what arrived, so
// a session holds no max_header_bytes buffer. Tries the read first, waits on EAGAIN.
void Session::read_more(std::function<void()> then) {
  size_t cap = st_->cfg.max_header_bytes + 1;
  size_t old = in_.size();
  if (old >= cap) return then();
  char* buf = st_->shared->scratch_for(cap - old);
  for (;;) {
    ssize_t n = ::recv(client_.native_handle(), buf, cap - old, MSG_DONTWAIT);
    if (n > 0) {
      in_.append(buf, (size_t)n);
      return then();
    }
    if (n == 0) return on_read_error(boost::asio::error::eof);
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      return on_read_error(boost::system::error_code(errno, boost::system::system_category()));
    break;
  }
  client_.async_wait(tcp::socket::wait_read, [self = shared_from_this(), then = std::move(then)](
                                                 const boost::system::error_code& ec) mutable {
    if (self->closed_) return;
    if (ec) return self->on_read_error(ec);
    self->read_more(std::move(then));
  });
}

void Session::on_read_error(const boost::system::error_code&) { close(); }

// Writes `bytes`, then half-closes and drains the client briefly so the reply is
// not lost to a reset (unread request bytes turn close() into an RST).
void Session::reply_and_close(std::string bytes) {
  auto buf = std::make_shared<std::string>(std::move(bytes));
  arm_timer(std::chrono::milliseconds(std::min<long>(st_->cfg.header_timeout.count(), 2000)), "reply");
  boost::asio::async_write(client_, boost::asio::buffer(*buf),
                           [self = shared_from_this(), buf](const boost::system::error_code& ec, size_t) {
                             if (self->closed_) return;
                             if (ec) return self->close();
                             boost::system::error_code e;
                             self->client_.shutdown(tcp::socket::shutdown_send, e);
                             self->drain(0);
                           });
}

void Session::drain(size_t seen) {
  auto buf = std::make_shared<std::array<char, 4096>>();
  client_.async_read_some(boost::asio::buffer(*buf), [self = shared_from_this(), buf, seen](
                                                         const boost::system::error_code& ec, size_t n) {
    if (self->closed_) return;
    if (ec || seen + n > 256 * 1024) return self->close();
    self->drain(seen + n);
  });
}

nlohmann::json Session::audit_base(const std::string& host, uint16_t port) const {
  nlohmann::json j = {{"event", "egress"}, {"protocol", protocol_}};
  if (!host.empty()) j["host"] = host;
  if (port) j["port"] = port;
  if (!origin_address_.empty()) {
    j["origin"] = "nested container";
    j["origin_address"] = origin_address_;
  }
  return j;
}

long Session::elapsed_ms() const {
  return (long)std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started_).count();
}

void Session::log_refusal(const std::string& host, uint16_t port, const Decision& d,
                          const std::optional<IpAddress>& addr, const std::vector<std::string>& refused_addrs) {
  st_->count_refused(host, d.rule);
  if (!st_->audit_on()) return;
  nlohmann::json j = audit_base(host, port);
  if (addr) j["address"] = addr->str();
  if (!refused_addrs.empty()) j["refused_addresses"] = refused_addrs;
  j["decision"] = "refused";
  j["rule"] = d.rule;
  j["reason"] = d.reason;
  j["bytes_up"] = 0;
  j["bytes_down"] = 0;
  j["duration_ms"] = elapsed_ms();
  st_->audit_write(std::move(j));
}

void Session::log_auth_failure(const std::string& host, uint16_t port, const char* why) {
  log_refusal(host, port, Decision{false, "proxy authentication", why}, std::nullopt, {});
}

void Session::log_malformed(const std::string& why) {
  ++st_->stats.malformed;
  if (!st_->audit_on()) return;
  nlohmann::json j = audit_base("", 0);
  j["decision"] = "refused";
  j["rule"] = "malformed request";
  j["reason"] = why;
  j["bytes_up"] = 0;
  j["bytes_down"] = 0;
  j["duration_ms"] = elapsed_ms();
  st_->audit_write(std::move(j));
}

// ---- the decision and the connection ------------------------------------------------------------

void Session::decide_and_connect(const std::string& raw_host, uint16_t port, std::function<void(Outcome)> done) {
  auto host = decide(raw_host, port);
  if (!host) return done(std::move(out_));
  connect_decided(*host, std::move(done));
}

std::optional<Host> Session::decide(const std::string& raw_host, uint16_t port) {
  out_ = Outcome{};
  out_.port = port;
  out_.host = raw_host;
  auto host = normalise_host(raw_host);
  if (!host) {
    out_.kind = Outcome::BadHost;
    out_.decision = Decision{false, "invalid host: " + host.error().str(), "invalid host name"};
    return std::nullopt;
  }
  // An address the resolver handed out stands for its name (a client that
  // resolved first, then asked the proxy for the address).
  if (host->literal && HandedOutAddresses::in_range(*host->literal)) {
    const std::string* name = st_->handed_out ? st_->handed_out->name_for(*host->literal) : nullptr;
    if (!name) {
      out_.kind = Outcome::Refused;
      out_.host = host->name;
      out_.decision = Decision{false, "capture range", "an address of the resolver's range it never handed out"};
      return std::nullopt;
    }
    host = normalise_host(*name);
  }
  out_.host = host->name;
  judged_by_ = st_->rules();
  host_mark_ = judged_by_->host_mark();
  Decision d = judged_by_->check_host(*host, port);
  out_.decision = d;
  if (!d.allowed) {
    out_.kind = Outcome::Refused;
    return std::nullopt;
  }
  // A tunnel: is it one the proxy will see into (request_gate.cpp)? (A captured
  // connection is judged once its first bytes say what it carries.)
  if (std::string_view(protocol_) != "http" && std::string_view(protocol_) != "transparent") {
    if (auto r = tunnel_refusal(terminates(host->name, port))) {
      out_.kind = Outcome::Refused;
      out_.decision = *r;
      return std::nullopt;
    }
  }
  if (host->literal) {
    Decision a = judged_by_->check_address(*host->literal);
    if (!a.allowed) {
      out_.kind = Outcome::Refused;
      out_.decision = a;
      out_.address = host->literal;
      return std::nullopt;
    }
  }
  return std::move(*host);
}

void Session::connect_decided(const Host& host, std::function<void(Outcome)> done) {
  arm_timer(st_->cfg.connect_timeout, "connect");
  if (host.literal) candidates_ = {*host.literal};
  // Through a proxy of the user's (parent_proxy.cpp): it gets the name.
  if (st_->cfg.upstreams) {
    std::string_view proto = protocol_;
    if (auto via = st_->cfg.upstreams->route(host, proto != "http", proto == "socks5"))
      return connect_via(std::move(*via), std::move(done));
  }
  if (host.literal) return connect_next(std::move(done));
  if (auto addrs = st_->hosts_lookup(host.name)) return on_addresses(*addrs, std::move(done));
  if (!resolver_) resolver_ = std::make_unique<tcp::resolver>(st_->io);
  resolver_->async_resolve(host.name, std::to_string(out_.port), tcp::resolver::numeric_service,
                          [self = shared_from_this(), done = std::move(done)](const boost::system::error_code& ec,
                                                                              tcp::resolver::results_type res) mutable {
                            if (self->closed_) return;
                            self->on_resolved(ec, std::move(res), std::move(done));
                          });
}

void Session::on_resolved(const boost::system::error_code& ec, tcp::resolver::results_type res,
                          std::function<void(Outcome)> done) {
  if (timed_out_) {
    out_.kind = Outcome::TimedOut;
    return done(std::move(out_));
  }
  if (ec) {
    cancel_timer();
    out_.kind = Outcome::DnsFailed;
    out_.error = ec.message();
    return done(std::move(out_));
  }
  std::vector<IpAddress> addrs;
  for (const auto& entry : res) {
    auto ep = entry.endpoint();
    if (auto a = IpAddress::from_sockaddr(ep.data())) addrs.push_back(*a);
  }
  on_addresses(addrs, std::move(done));
}

void Session::on_addresses(const std::vector<IpAddress>& addrs, std::function<void(Outcome)> done) {
  std::optional<Decision> first_refusal;
  std::optional<IpAddress> first_refused;
  candidates_.clear();
  for (const auto& addr : addrs) {
    const IpAddress* a = &addr;
    Decision d = judged_by_->check_address(*a);
    if (d.allowed) {
      if (std::find(candidates_.begin(), candidates_.end(), *a) == candidates_.end()) candidates_.push_back(*a);
    } else {
      std::string s = a->str();
      if (std::find(out_.refused_addresses.begin(), out_.refused_addresses.end(), s) == out_.refused_addresses.end())
        out_.refused_addresses.push_back(s);
      if (!first_refusal) first_refusal = d, first_refused = *a;
    }
  }
  if (candidates_.empty()) {
    cancel_timer();
    out_.kind = first_refusal ? Outcome::Refused : Outcome::DnsFailed;
    if (first_refusal) out_.decision = *first_refusal, out_.address = first_refused;
    else out_.error = "no usable address";
    return done(std::move(out_));
  }
  connect_next(std::move(done));
}

void Session::connect_next(std::function<void(Outcome)> done) {
  if (candidates_.empty()) {
    cancel_timer();
    out_.kind = Outcome::ConnectFailed;
    return done(std::move(out_));
  }
  IpAddress a = candidates_.front();
  candidates_.erase(candidates_.begin());
  boost::asio::ip::address addr;
  if (a.v6) {
    boost::asio::ip::address_v6::bytes_type b;
    std::copy(a.bytes, a.bytes + 16, b.begin());
    addr = boost::asio::ip::address_v6(b);
  } else {
    boost::asio::ip::address_v4::bytes_type b;
    std::copy(a.bytes, a.bytes + 4, b.begin());
    addr = boost::asio::ip::address_v4(b);
  }
  tcp::endpoint ep(addr, out_.port);
  boost::system::error_code ec;
  if (upstream_.is_open()) upstream_.close(ec);
  upstream_.open(ep.protocol(), ec);
  if (ec) {
    out_.connect_ec = ec;
    out_.error = ec.message();
    return connect_next(std::move(done));
  }
  out_.address = a;
  upstream_.async_connect(ep, [self = shared_from_this(), done = std::move(done)](
                                  const boost::system::error_code& ec) mutable {
    if (self->closed_) return;
    if (self->timed_out_) {
      self->out_.kind = Outcome::TimedOut;
      return done(std::move(self->out_));
    }
    if (ec) {
      self->out_.connect_ec = ec;
      self->out_.error = ec.message();
      return self->connect_next(std::move(done));
    }
    // The host may have gained this address since it was judged: connect(2)
    // has returned, so every address the host had when the kernel routed it
    // is in the watch's queue now (host_addresses.hpp). Read it, check again,
    // before a byte goes either way.
    if (const auto& watch = self->st_->cfg.host_addresses) {
      watch->sync();
      Decision d = self->judged_by_->recheck_host_own(*self->out_.address, self->host_mark_);
      if (!d.allowed) {
        boost::system::error_code e;
        self->upstream_.close(e);
        self->cancel_timer();
        self->out_.kind = Outcome::Refused;
        self->out_.decision = d;
        return done(std::move(self->out_));
      }
    }
    self->cancel_timer();
    boost::system::error_code e;
    self->upstream_.set_option(tcp::no_delay(true), e);
    self->out_.kind = Outcome::Connected;
    done(std::move(self->out_));
  });
}

// Starts the tunnel and writes the audit line when it closes.
void Session::run_tunnel(std::shared_ptr<Tunnel> t, std::string up_prefix, std::string up_initial,
                         std::string down_prefix) {
  ++st_->stats.allowed;
  tunnel_ = t;
  cancel_timer();
  t->start(std::move(up_prefix), std::move(up_initial), std::move(down_prefix));
}

std::function<void(const Tunnel::Outcome&)> Session::tunnel_done() {
  // The session keeps out_ (host, port, address, rule) until then.
  return [self = shared_from_this()](const Tunnel::Outcome& o) {
    if (!self->st_->audit_on()) return self->close();
    const Outcome& out = self->out_;
    nlohmann::json j = self->audit_base(out.host, out.port);
    if (out.address) j["address"] = out.address->str();
    if (!out.refused_addresses.empty()) j["refused_addresses"] = out.refused_addresses;
    j["decision"] = "allowed";
    j["rule"] = out.decision.rule;
    if (!out.via.empty()) j["via"] = out.via;
    if (!out.request_rule.empty()) j["request_rule"] = out.request_rule;
    j["bytes_up"] = o.bytes_up;
    j["bytes_down"] = o.bytes_down;
    j["duration_ms"] = self->elapsed_ms();
    if (!o.error.empty()) j["end"] = o.error;
    self->st_->audit_write(std::move(j));
    self->close();
  };
}

// A client that never finished its head (slowloris): one line, so that the
// attack shows in the audit log and not only in the connection count.
void Session::log_header_timeout() {
  ++st_->stats.malformed;
  if (!st_->audit_on()) return;
  nlohmann::json j = audit_base("", 0);
  j["decision"] = "refused";
  j["rule"] = "header_timeout " + std::to_string(st_->cfg.header_timeout.count()) + "ms";
  j["reason"] = "request head not complete in time";
  j["bytes_up"] = in_.size();
  j["bytes_down"] = 0;
  j["duration_ms"] = elapsed_ms();
  st_->audit_write(std::move(j));
}

void Session::log_over_limit() {
  st_->count_refused("");
  if (!st_->audit_on()) return;
  nlohmann::json j = audit_base("", 0);
  j["decision"] = "refused";
  j["rule"] = "max_connections " + std::to_string(st_->cfg.max_connections);
  j["reason"] = "too many connections";
  j["bytes_up"] = 0;
  j["bytes_down"] = 0;
  j["duration_ms"] = 0;
  st_->audit_write(std::move(j));
}

void Session::log_connect_failure(const Outcome& o) {
  // The rules allowed it; the network did not. Still one line for the decision.
  ++st_->stats.allowed;
  if (!st_->audit_on()) return;
  nlohmann::json j = audit_base(o.host, o.port);
  if (o.address) j["address"] = o.address->str();
  if (!o.refused_addresses.empty()) j["refused_addresses"] = o.refused_addresses;
  j["decision"] = "allowed";
  j["rule"] = o.decision.rule;
  if (!o.via.empty()) j["via"] = o.via;
  j["error"] = o.kind == Outcome::DnsFailed ? "dns: " + o.error
               : o.kind == Outcome::TimedOut ? std::string("connect timeout")
                                             : "connect: " + o.error;
  j["bytes_up"] = 0;
  j["bytes_down"] = 0;
  j["duration_ms"] = elapsed_ms();
  st_->audit_write(std::move(j));
}

}  // namespace detail

// ---- Proxy ------------------------------------------------------------------------------------

struct Proxy::Impl : detail::ProxyState {
  using ProxyState::ProxyState;
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors;
  std::vector<std::shared_ptr<detail::DnsServer>> dns_servers;
  bool stopped = false;

  enum class Front { Http, Socks, Transparent, TransparentRelay };

  void accept(tcp::acceptor* acc, Front front, bool auth, std::shared_ptr<Impl> self) {
    acc->async_accept([this, acc, front, auth, self](const boost::system::error_code& ec, tcp::socket s) {
      if (stopped) return;
      if (ec == boost::asio::error::operation_aborted) return;
      if (ec) {
        // EMFILE and friends: back off instead of spinning on the listener.
        auto t = std::make_shared<boost::asio::steady_timer>(io, std::chrono::milliseconds(100));
        t->async_wait([this, acc, front, auth, self, t](const boost::system::error_code&) {
          if (!stopped) accept(acc, front, auth, self);
        });
        return;
      }
      boost::system::error_code e;
      if (!unix_listener(acc)) s.set_option(tcp::no_delay(true), e);
      if (active >= cfg.max_connections + detail::kOverLimitSlack) {
        s.close(e);
      } else {
        std::shared_ptr<detail::Session> sess =
            front == Front::Socks         ? detail::make_socks_session(self, std::move(s), auth)
            : front == Front::Transparent ? detail::make_transparent_session(self, std::move(s), false)
            : front == Front::TransparentRelay ? detail::make_transparent_session(self, std::move(s), true)
                                          : detail::make_http_session(self, std::move(s), auth);
        sess->register_self();
        if (active > cfg.max_connections) sess->refuse_over_limit();
        else sess->start();
      }
      accept(acc, front, auth, self);
    });
  }

  std::vector<tcp::acceptor*> unix_acceptors;
  bool unix_listener(tcp::acceptor* a) const {
    return std::find(unix_acceptors.begin(), unix_acceptors.end(), a) != unix_acceptors.end();
  }

  void add_listener(int fd, Front front, std::shared_ptr<Impl> self) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
    auto acc = std::make_unique<tcp::acceptor>(io);
    boost::system::error_code ec;
    acc->assign(ss.ss_family == AF_INET6 ? tcp::v6() : tcp::v4(), fd, ec);
    if (ec) {
      ::close(fd);
      return;
    }
    acc->non_blocking(true, ec);
    // A unix socket is reachable only through the file system (mode 0600): no token.
    bool is_unix = ss.ss_family == AF_UNIX;
    if (is_unix) unix_acceptors.push_back(acc.get());
    accept(acc.get(), front, !is_unix && !cfg.token.empty() && front != Front::Transparent && front != Front::TransparentRelay,
           self);
    acceptors.push_back(std::move(acc));
  }
};

Proxy::Proxy(boost::asio::io_context& io, const Rules& rules, AuditSink* audit, ProxyConfig cfg)
    : impl_(std::make_shared<Impl>(io, rules, audit, cfg)) {}

Proxy::~Proxy() { stop(); }

void Proxy::add_http_listener(int fd) { impl_->add_listener(fd, Impl::Front::Http, impl_); }
void Proxy::add_socks_listener(int fd) { impl_->add_listener(fd, Impl::Front::Socks, impl_); }
void Proxy::add_transparent_listener(int fd) { impl_->add_listener(fd, Impl::Front::Transparent, impl_); }
void Proxy::add_transparent_relay_listener(int fd) { impl_->add_listener(fd, Impl::Front::TransparentRelay, impl_); }
void Proxy::add_dns_socket(int fd) { impl_->dns_servers.push_back(detail::start_dns_server(impl_, fd)); }
void Proxy::add_dns_stream_listener(int fd) { impl_->dns_servers.push_back(detail::start_dns_stream_server(impl_, fd)); }
const ProxyStats& Proxy::stats() const { return impl_->stats; }
size_t Proxy::max_connections() const { return impl_->cfg.max_connections; }

void Proxy::stop() {
  if (!impl_ || impl_->stopped) return;
  impl_->stopped = true;
  impl_->sweep_timer.cancel();
  if (impl_->cfg.host_addresses) impl_->cfg.host_addresses->stop();  // while the loop still exists
  boost::system::error_code ec;
  for (auto& a : impl_->acceptors) a->close(ec);
  for (auto& d : impl_->dns_servers) detail::stop_dns_server(d);
  impl_->dns_servers.clear();  // each holds the state that holds it: the cycle ends here
  std::vector<std::shared_ptr<detail::Session>> live;
  for (auto& [p, w] : impl_->sessions)
    if (auto s = w.lock()) live.push_back(std::move(s));
  for (auto& s : live) s->close();
}

void Proxy::replace_rules(Rules rules, nlohmann::json audit_event) {
  auto now = detail::following(std::move(rules), impl_->cfg);
  impl_->set_rules(now);
  boost::asio::post(impl_->io, [st = impl_, now, ev = std::move(audit_event)]() mutable {
    std::vector<std::shared_ptr<detail::Session>> older;
    for (auto& [p, w] : st->sessions)
      if (auto s = w.lock(); s && s->judged_by() && s->judged_by() != now) older.push_back(std::move(s));
    for (auto& s : older) s->close();
    ev["cut"] = older.size();
    st->audit_write(std::move(ev));
  });
}

std::string ProxyStats::summary() const {
  std::string s = "egress: " + std::to_string(allowed) + " allowed, " + std::to_string(refused) + " refused";
  if (!refused_hosts.empty()) {
    std::vector<std::pair<uint64_t, std::string>> v;
    for (const auto& [h, n] : refused_hosts) v.emplace_back(n, h);
    std::sort(v.begin(), v.end(), [](auto& a, auto& b) { return a.first != b.first ? a.first > b.first : a.second < b.second; });
    s += " (";
    for (size_t i = 0; i < v.size() && i < 10; ++i) s += (i ? ", " : "") + v[i].second + " x" + std::to_string(v[i].first);
    if (v.size() > 10) s += ", ...";
    s += ")";
  }
  s += ", " + std::to_string(malformed) + " malformed";
  if (intercepted || exfiltration)
    s += ", " + std::to_string(intercepted) + " intercepted, " + std::to_string(exfiltration) + " exfiltration";
  return s;
}

}  // namespace exg::egress
