// exguardian proxy: loads a policy, binds the HTTP (and SOCKS5) listeners and
// runs the egress proxy until SIGINT/SIGTERM.
#include "cli/proxy_cmd.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "egress/proxy.hpp"
#include "egress/rules.hpp"
#include "egress/secrets.hpp"
#include "plan/plan.hpp"
#include "plan/secrets.hpp"
#include "policy/policy.hpp"
#include "sandbox/audit.hpp"
#include "util/unique_fd.hpp"

namespace exg::cli {
namespace {

int error_line(const std::string& what) {
  std::fprintf(stderr, "exguardian: %s\n", what.c_str());
  return 2;
}

// "127.0.0.1:3128", "[::1]:3128" -> a sockaddr; nullopt when malformed.
std::optional<sockaddr_storage> parse_listen(const std::string& s, socklen_t& len) {
  std::string host, port;
  if (s.starts_with('[')) {
    size_t close = s.find("]:");
    if (close == std::string::npos) return std::nullopt;
    host = s.substr(1, close - 1);
    port = s.substr(close + 2);
  } else {
    size_t colon = s.rfind(':');
    if (colon == std::string::npos || s.find(':') != colon) return std::nullopt;
    host = s.substr(0, colon);
    port = s.substr(colon + 1);
  }
  unsigned p = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size() || p > 65535) return std::nullopt;
  sockaddr_storage ss{};
  auto* in4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (::inet_pton(AF_INET, host.c_str(), &in4->sin_addr) == 1) {
    in4->sin_family = AF_INET;
    in4->sin_port = htons((uint16_t)p);
    len = sizeof *in4;
  } else if (::inet_pton(AF_INET6, host.c_str(), &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons((uint16_t)p);
    len = sizeof *in6;
  } else {
    return std::nullopt;
  }
  return ss;
}

bool is_unix_spec(const std::string& s) { return s.starts_with("unix:"); }

// unix:/path: an AF_UNIX stream listener, mode 0600 from the start (umask
// around bind). A stale socket file (nobody accepts on it) is replaced.
Result<UniqueFd> bind_unix_listener(const std::string& spec) {
  std::string path = spec.substr(5);
  sockaddr_un sun{};
  sun.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof sun.sun_path)
    return fail(Error::msg("listen address " + spec, "expected unix:/path (at most 107 bytes)"));
  std::memcpy(sun.sun_path, path.data(), path.size());
  struct stat st{};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return fail(Error::msg("listen address " + spec, "exists and is not a socket"));
    UniqueFd probe(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (probe && ::connect(probe.get(), reinterpret_cast<sockaddr*>(&sun), sizeof sun) == 0)
      return fail(Error::msg("listen address " + spec, "another process is listening on it"));
    ::unlink(path.c_str());
  }
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return fail(Error::sys("socket"));
  mode_t old = ::umask(0177);
  int rc = ::bind(fd.get(), reinterpret_cast<sockaddr*>(&sun), sizeof sun);
  int err = errno;
  ::umask(old);
  if (rc != 0) return fail(Error::sys("bind " + spec, err));
  ::chmod(path.c_str(), 0600);
  if (::listen(fd.get(), SOMAXCONN) != 0) return fail(Error::sys("listen " + spec));
  return fd;
}

Result<UniqueFd> bind_listener(const std::string& spec) {
  if (is_unix_spec(spec)) return bind_unix_listener(spec);
  socklen_t len = 0;
  auto sa = parse_listen(spec, len);
  if (!sa)
    return fail(Error::msg("listen address " + spec,
                           "expected ADDR:PORT or unix:/path, e.g. 127.0.0.1:3128, [::1]:3128, unix:/run/exg-proxy.sock"));
  UniqueFd fd(::socket(sa->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return fail(Error::sys("socket"));
  int one = 1;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (sa->ss_family == AF_INET6) ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&*sa), len) != 0) return fail(Error::sys("bind " + spec));
  if (::listen(fd.get(), SOMAXCONN) != 0) return fail(Error::sys("listen " + spec));
  return fd;
}

bool is_loopback_spec(const std::string& s) { return s.starts_with("127.") || s.starts_with("[::1]"); }

std::string trim_token(std::string t) {
  while (!t.empty() && std::strchr(" \t\r\n", t.back())) t.pop_back();
  size_t b = 0;
  while (b < t.size() && std::strchr(" \t\r\n", t[b])) ++b;
  return t.substr(b);
}

// Writes `text` to a new or truncated file with `mode` (owner only for secrets' placeholders).
Result<void> write_file(const std::string& path, const std::string& text, mode_t mode) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode));
  if (!fd) return fail(Error::sys("write " + path));
  if (::fchmod(fd.get(), mode) != 0) return fail(Error::sys("chmod " + path));
  for (size_t off = 0; off < text.size();) {
    ssize_t n = ::write(fd.get(), text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return fail(Error::sys("write " + path));
    off += (size_t)n;
  }
  return {};
}

// The policy's secrets for the standalone proxy: values read here, a CA in memory.
Result<std::shared_ptr<const egress::SecretsConfig>> proxy_secrets(const policy::Policy& pol, const std::string& ca_out,
                                                                   const std::string& ph_out) {
  // Request rules are judged inside TLS too: a CA for them, secrets or not.
  const bool rules = !pol.network.rules.empty() || pol.network.read_only.value_or(false);
  if (pol.secrets.empty()) {
    if (!ph_out.empty()) return fail(Error::msg("--placeholders-out", "the policy declares no secrets"));
    if (!rules || ca_out.empty()) {
      if (!ca_out.empty())
        return fail(Error::msg("--ca-cert-out", "the policy declares no secrets and no request rules"));
      if (rules)
        std::fprintf(stderr, "exguardian: proxy: without --ca-cert-out, tunnels to hosts under network.rules are "
                             "refused (their requests could not be judged)\n");
      return std::shared_ptr<const egress::SecretsConfig>();
    }
  }
  if (!pol.secret_files.empty())
    std::fprintf(stderr, "exguardian: proxy: secretFiles are for sandboxes; the standalone proxy ignores them\n");
  plan::Context ctx = plan::Context::from_process({});
  auto resolved = plan::resolve_secrets(pol, ctx, ctx.home);
  if (!resolved) return fail(resolved.error());
  auto ca = egress::CertAuthority::generate("proxy-" + std::to_string(::getpid()));
  if (!ca) return fail(ca.error());
  auto cfg = std::make_shared<egress::SecretsConfig>();
  cfg->secrets = std::move(resolved->secrets);
  cfg->ca = std::move(*ca);
  if (auto idx = egress::SecretIndex::build(cfg); !idx) return fail(idx.error());
  if (!ca_out.empty())
    if (auto w = write_file(ca_out, cfg->ca->cert_pem(), 0644); !w) return fail(w.error());
  if (!ph_out.empty()) {
    std::string lines;
    for (const auto& s : cfg->secrets) lines += s.name + "=" + s.placeholder + "\n";
    if (auto w = write_file(ph_out, lines, 0600); !w) return fail(w.error());
  }
  for (const auto& s : cfg->secrets) {
    std::string hosts;
    for (const auto& h : s.hosts) hosts += (hosts.empty() ? "" : ", ") + h;
    std::fprintf(stderr, "exguardian: proxy: secret %s (placeholder %s) goes to %s only\n", s.name.c_str(),
                 s.placeholder.c_str(), hosts.c_str());
  }
  return std::shared_ptr<const egress::SecretsConfig>(std::move(cfg));
}

}  // namespace

int proxy_main(const std::string& listen, const std::string& socks, const std::string& policy_file,
               const std::string& audit_log, const std::string& token_file, const std::string& ca_cert_out,
               const std::string& placeholders_out, const ProxyBounds& bounds) {
  // The token: required when any listener is TCP (anyone who can reach the port could use the proxy).
  std::string token;
  if (!token_file.empty()) {
    std::ifstream f(token_file);
    if (!f) return error_line("cannot read --token-file " + token_file + ": " + std::strerror(errno));
    std::stringstream ss;
    ss << f.rdbuf();
    token = trim_token(ss.str());
    if (token.empty()) return error_line("--token-file " + token_file + " is empty");
  } else if (const char* e = std::getenv("EXGUARDIAN_PROXY_TOKEN"); e && *e) {
    token = trim_token(e);
  }
  bool any_tcp = !is_unix_spec(listen) || (!socks.empty() && !is_unix_spec(socks));
  if (any_tcp && token.empty()) {
    std::fprintf(stderr, "exguardian: proxy: a TCP listener needs a token: --token-file FILE or EXGUARDIAN_PROXY_TOKEN "
                         "(or listen on unix:/path)\n");
    return 125;
  }
  if (token.find_first_of("\r\n") != std::string::npos || token.size() > 255)
    return error_line("the proxy token must be one line of at most 255 bytes");
  auto pol = policy::load_policy_file(policy_file);
  if (!pol) return error_line(pol.error().message);
  // srt's fallback: a parent proxy the policy does not name comes from HTTP_PROXY & co.
  if (auto r = policy::parent_proxy_from_environment(*pol, [](const char* n) { return std::getenv(n); }); !r)
    return error_line(r.error().message);
  for (const auto& n : pol->notes)
    if (n.starts_with("network.parentProxy")) std::fprintf(stderr, "exguardian: proxy: %s\n", n.c_str());
  auto egress_config = egress::config_from_policy(pol->network);
  if (!egress_config) return error_line(egress_config.error().str());
  auto secrets = proxy_secrets(*pol, ca_cert_out, placeholders_out);
  if (!secrets) return error_line(secrets.error().str());
  // This host's own addresses are refused like loopback, followed for the proxy's whole life.
  auto watch = egress::HostAddressWatch::open();
  if (!watch) return error_line(watch.error().str());

  sandbox::AuditLog audit;
  std::string log_path = !audit_log.empty() ? audit_log : pol->audit_log.value_or("");
  if (!log_path.empty()) {
    auto a = sandbox::AuditLog::open(log_path, "proxy-" + std::to_string(::getpid()));
    if (!a) return error_line(a.error().str());
    audit = std::move(*a);
  }

  auto http_fd = bind_listener(listen);
  if (!http_fd) return error_line(http_fd.error().str()), 1;
  Result<UniqueFd> socks_fd = UniqueFd();
  if (!socks.empty()) {
    socks_fd = bind_listener(socks);
    if (!socks_fd) return error_line(socks_fd.error().str()), 1;
  }
  for (const auto& s : {listen, socks})
    if (!s.empty() && !is_unix_spec(s) && !is_loopback_spec(s))
      std::fprintf(stderr, "exguardian: warning: %s is not a loopback address; anyone who reaches it can use the proxy\n",
                   s.c_str());

  // Every tunnel holds two sockets and up to four pipe ends.
  rlimit rl;
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
  ::signal(SIGPIPE, SIG_IGN);

  boost::asio::io_context io(1);
  egress::ProxyConfig cfg = std::move(egress_config->proxy);
  cfg.token = token;  // asked of TCP listeners' clients only
  cfg.host_addresses = *watch;
  cfg.secrets = *secrets;
  if (bounds.max_connections) cfg.max_connections = bounds.max_connections;
  if (bounds.header_timeout_s > 0)
    cfg.header_timeout = std::chrono::milliseconds(static_cast<long>(bounds.header_timeout_s * 1000));
  egress::Proxy proxy(io, egress_config->rules, &audit, cfg);
  if (proxy.max_connections() < cfg.max_connections)
    std::fprintf(stderr, "exguardian: proxy: at most %zu connections (the descriptor limit, RLIMIT_NOFILE, allows no more)\n",
                 proxy.max_connections());
  proxy.add_http_listener(http_fd->release());
  if (*socks_fd) proxy.add_socks_listener(socks_fd->release());
  if (egress_config->rules.empty())
    std::fprintf(stderr, "exguardian: proxy: the policy allows no destination; every request is refused\n");
  std::fprintf(stderr, "exguardian: proxy: HTTP on %s%s%s\n", listen.c_str(), socks.empty() ? "" : ", SOCKS5 on ",
               socks.c_str());

  boost::asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (ec) return;
    proxy.stop();
    io.stop();
  });
  io.run();
  for (const auto& s : {listen, socks})
    if (is_unix_spec(s)) ::unlink(s.substr(5).c_str());
  std::fprintf(stderr, "exguardian: proxy: %s\n", proxy.stats().summary().c_str());
  return 0;
}

}  // namespace exg::cli
