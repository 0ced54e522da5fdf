// `exguardian serve`: the E2B-compatible server (src/serve/).
#include "cli/serve.hpp"

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "cgroup/cgroup.hpp"
#include "serve/http_server.hpp"
#include "serve/log.hpp"
#include "serve/openapi.hpp"
#include "serve/sandbox_host.hpp"
#include "serve/sandbox_registry.hpp"
#include "serve/service.hpp"
#include "serve/templates.hpp"
#include "serve/tenants.hpp"
#include "util/lazy_libs.hpp"

namespace exg::cli {

namespace {

int serve_error(const std::string& what) {
  std::fprintf(stderr, "exguardian: serve: %s\n", what.c_str());
  return 125;
}

std::string canonical_dir(const std::string& d) {
  char buf[PATH_MAX];
  if (::realpath(d.c_str(), buf)) return buf;
  return d;
}

}  // namespace

int serve_main(int argc, char** argv) {
  CLI::App app{"Serve E2B's sandbox API: the unmodified e2b SDK drives ExGuardian sandboxes", "exguardian serve"};
  std::string listen, tenants_file, templates_file, state_dir = "/var/tmp/exg-serve", hash_key, log_file, domain;
  std::string tls_cert, tls_key;
  size_t max_sandboxes = 1000, max_body_kib = 1024, max_upload_mib = 100;
  double pause_ttl_hours = 720;  // fractions allowed (a test keeps a pause seconds)
  bool verbose = false, print_openapi = false, no_cgroup_limits = false;
  std::vector<std::string> warm = {"base=2"};
  app.add_option("--listen", listen, "ADDR:PORT (port 0: any free one) or unix:PATH");
  app.add_option("--tenants", tenants_file, "Tenants and their key hashes (JSON)");
  app.add_option("--templates", templates_file, "Templates: name -> layer, rootfs, policy, resources (JSON); `base` is built in");
  app.add_option("--state-dir", state_dir, "Where sandboxes' homes, sockets and logs live (under /tmp or /var/tmp; default /var/tmp/exg-serve)");
  app.add_option("--max-sandboxes", max_sandboxes, "Sandboxes over all tenants at once (default 1000)");
  app.add_option("--max-body-kib", max_body_kib, "Largest request body but uploads, KiB (default 1024)");
  app.add_option("--max-upload-mib", max_upload_mib, "Largest upload (POST /files), MiB (default 100)");
  app.add_option("--warm", warm,
                 "[TEMPLATE=]N: keep N sandboxes of TEMPLATE (default base) started ahead, so that a create takes one "
                 "at once (repeatable; default base=2; 0: none)");
  app.add_option("--domain", domain,
                 "The sandboxes' domain: a request whose Host is PORT-ID.DOMAIN (the SDK's getHost(port)) reaches that port "
                 "of that sandbox, with its traffic access token; creates answer it as E2B's `domain`");
  app.add_option("--tls-cert", tls_cert,
                 "Speak TLS on the listener with this certificate (PEM, the chain after it): for https:// API, envd and "
                 "PORT-ID.DOMAIN names (a wildcard *.DOMAIN in its SAN); with --tls-key");
  app.add_option("--tls-key", tls_key, "The certificate's private key (PEM), with --tls-cert");
  app.add_option("--pause-ttl-hours", pause_ttl_hours,
                 "How long a paused sandbox is kept (also across restarts) before it is killed, hours (default 720: 30 days)");
  app.add_option("--hash-key", hash_key, "Print the tenants-file entry of KEY (sha256:<hex>) and exit");
  app.add_flag("--print-openapi", print_openapi, "Print the OpenAPI document and exit");
  app.add_flag("--no-cgroup-limits", no_cgroup_limits,
               "Run sandboxes without per-sandbox cgroup limits (memory, pids, cpu) and without pause: a weaker mode, reported");
  app.add_option("--log", log_file,
                 "Write the log (JSON lines: requests, sandboxes' lifecycle, warnings) to FILE, appended (default: stderr)");
  app.add_flag("-v,--verbose", verbose, "Also log every supervisor's own lines, spawns and the warm pool's sandboxes");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "exguardian: serve: usage: %s (see exguardian serve --help)\n", e.what());
    return 125;
  }
  // OpenSSL (key hashes, TLS) is bound on first use: a missing library is said here, once.
  if (auto libs = load_shared_libs(); !libs) return serve_error(libs.error().str());
  if (!hash_key.empty()) {
    std::printf("%s\n", serve::key_entry(hash_key).c_str());
    return 0;
  }
  if (print_openapi) {
    std::fputs(serve::openapi_document().c_str(), stdout);
    return 0;
  }
  if (listen.empty()) return serve_error("--listen ADDR:PORT or unix:PATH is required");
  if (tenants_file.empty()) return serve_error("--tenants FILE is required");
  auto tenants = serve::Tenants::load(tenants_file);
  if (!tenants) return serve_error(tenants.error().str());
  serve::Templates templates;
  if (!templates_file.empty()) {
    auto t = serve::Templates::load(templates_file);
    if (!t) return serve_error(t.error().str());
    templates = std::move(*t);
  }
  if (!domain.empty())
    if (auto why = serve::domain_error(domain); !why.empty()) return serve_error("--domain " + domain + ": " + why);
  if (!(pause_ttl_hours > 0 && pause_ttl_hours <= 24.0 * 3650))
    return serve_error("--pause-ttl-hours " + std::to_string(pause_ttl_hours) + ": expected more than 0, at most 87600 (ten years)");
  if (max_body_kib < 1 || max_upload_mib < 1 || max_sandboxes < 1) return serve_error("limits must be at least 1");
  // Every sandbox sees the host's root read-only, but /tmp and /var/tmp are
  // its own: homes kept there are invisible to the other sandboxes.
  if (state_dir.empty() || state_dir[0] != '/') return serve_error("--state-dir " + state_dir + ": expected an absolute path");
  ::mkdir(state_dir.c_str(), 0700);
  std::string real = canonical_dir(state_dir);
  if (!(real.starts_with("/tmp/") || real.starts_with("/var/tmp/")))
    return serve_error("--state-dir " + state_dir + ": must be under /tmp or /var/tmp, which every sandbox has to itself "
                       "(anywhere else the other sandboxes' homes would be readable through the host's root)");
  // From here on the server speaks in JSON lines (docs/serve.md "Log"); what
  // stops it from starting is still one plain line on stderr and exit 125.
  serve::Log log;
  if (!log_file.empty())
    if (auto r = log.open(log_file); !r) return serve_error(r.error().str());
  char exe[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return serve_error("readlink /proc/self/exe failed");
  exe[n] = '\0';

  // A multi-tenant server does not run unbounded sandboxes by accident: the
  // limits every create asks for are tried once here, on a probe cgroup, so a
  // host (or user) that cannot enforce them is told at start-up, not per create.
  bool cgroup_limits = true;
  {
    plan::Limits probe;
    probe.memory_bytes = 64ull << 20, probe.pids = 64, probe.cpus = 1;
    probe.explicit_memory = probe.explicit_pids = probe.explicit_cpus = true;
    auto cg = cgroup::Cgroup::create("serve-probe", probe);
    if (!cg && !no_cgroup_limits)
      return serve_error(cg.error().str() +
                         ": every sandbox gets memory, pids and cpu limits from its template, and this server could not "
                         "set them (run it as root or inside a cgroup delegated to this user; or pass --no-cgroup-limits "
                         "to run sandboxes without them, and without pause)");
    if (no_cgroup_limits) {
      cgroup_limits = false;
      log.warn("weakened").str("msg", std::string("WEAKENED: --no-cgroup-limits: sandboxes run without memory, pids and cpu "
                                                  "limits and cannot be paused (") +
                                          (cg ? "asked for; this host could enforce them" : cg.error().str()) + ")");
    }
  }

  ::signal(SIGPIPE, SIG_IGN);
  // Each sandbox holds two of the server's descriptors (its control socket, its
  // supervisor's log pipe), each client connection one: 1000 sandboxes pass the
  // usual soft limit of 1024. The hard limit is the host's word.
  if (rlimit rl; ::getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    if (rl.rlim_cur < rl.rlim_max) {
      rl.rlim_cur = rl.rlim_max;
      ::setrlimit(RLIMIT_NOFILE, &rl);
    }
    ::getrlimit(RLIMIT_NOFILE, &rl);
    rlim_t need = 2 * static_cast<rlim_t>(max_sandboxes) + 1024 + 64;  // + connections, + the server's own
    if (rl.rlim_cur < need)
      log.warn("rlimit").str("msg", "RLIMIT_NOFILE is " + std::to_string(rl.rlim_cur) + ": fewer than --max-sandboxes " +
                                        std::to_string(max_sandboxes) + " need (" + std::to_string(need) + "); creates past it fail");
  }
  boost::asio::io_context io;
  serve::RegistryOptions ro;
  ro.state_dir = real;
  ro.exe = exe;
  ro.verbose = verbose;
  ro.max_sandboxes = max_sandboxes;
  ro.cgroup_limits = cgroup_limits;
  ro.pause_ttl = std::chrono::seconds(static_cast<int64_t>(pause_ttl_hours * 3600));
  ro.log = &log;
  serve::Registry registry(io, ro);
  auto cleaned = registry.open([&templates](const std::string& name) { return templates.find(name); });
  if (!cleaned) return serve_error(cleaned.error().str());
  for (const auto& id : *cleaned)
    log.info("recovery").str("sandbox", id).str("msg", "destroyed sandbox " + id + " left by a previous server");
  serve::ServiceOptions so;
  so.max_sandboxes = max_sandboxes;
  so.verbose = verbose;
  so.max_upload = max_upload_mib * 1024 * 1024;
  // The warm pool: checked here, filled once the server runs (first thing on its loop).
  std::vector<std::pair<serve::Template, size_t>> pools;
  for (const auto& w : warm) {
    auto eq = w.find('=');
    std::string name = eq == std::string::npos ? "base" : w.substr(0, eq);
    std::string count = eq == std::string::npos ? w : w.substr(eq + 1);
    char* end = nullptr;
    long n = std::strtol(count.c_str(), &end, 10);
    if (count.empty() || *end || n < 0 || n > 64) return serve_error("--warm " + w + ": expected [TEMPLATE=]N, N 0..64");
    const serve::Template* t = templates.find(name);
    if (!t) return serve_error("--warm " + w + ": no template " + name);
    pools.erase(std::remove_if(pools.begin(), pools.end(), [&](auto& p) { return p.first.name == name; }), pools.end());
    pools.emplace_back(*t, static_cast<size_t>(n));
  }
  so.cgroup_limits = cgroup_limits;
  so.domain = domain;
  serve::Service service(io, std::move(*tenants), std::move(templates), registry, so);
  serve::HttpLimits limits;
  limits.max_body = max_body_kib * 1024;
  limits.max_upload = max_upload_mib * 1024 * 1024;
  // One line per request once it is answered: no query string, header or body (keys, tokens, paths of files).
  auto served = [&log](const serve::Served& s) {
    auto l = log.at(s.status == 0 || s.status >= 500 ? "warn" : "info", "request");
    l.str("method", s.method).str("path", s.path).num("status", s.status).real("ms", s.ms);
    if (!s.tenant.empty()) l.str("tenant", s.tenant);
    if (!s.sandbox.empty()) l.str("sandbox", s.sandbox);
    if (s.client_gone) l.flag("client_gone", true);
  };
  serve::HttpServer server(io, [&service](serve::Request& r, serve::ExchangePtr ex) { service.handle(r, std::move(ex)); }, limits,
                           served);
  if (tls_cert.empty() != tls_key.empty()) return serve_error("--tls-cert and --tls-key go together");
  if (!tls_cert.empty())
    if (auto r = server.use_tls(tls_cert, tls_key); !r) return serve_error(r.error().str());
  if (auto r = server.listen(listen); !r) return serve_error(r.error().str());
  boost::asio::signal_set stop(io, SIGTERM, SIGINT, SIGHUP);
  int stop_signal = 0;
  stop.async_wait([&](boost::system::error_code ec, int sig) {
    if (ec) return;
    stop_signal = sig;
    log.info("stop").num("signal", sig).num("sandboxes", static_cast<int64_t>(registry.count()))
        .str("msg", "signal " + std::to_string(sig) + ": ending " + std::to_string(registry.count()) + " sandboxes");
    server.stop();
    registry.kill_all([&io] { io.stop(); });
  });
  for (auto& [t, n] : pools)
    if (n > 0) registry.set_pool(t, n);
  log.info("listening").str("address", server.bound()).str("state_dir", real).flag("tls", !tls_cert.empty())
      .str("msg", "listening on " + server.bound() + (tls_cert.empty() ? "" : " (TLS)") + " (state " + real + ")");
  // A handler that throws (a bug, never input: requests are validated) ends
  // that handler only; the server and its sandboxes go on.
  for (;;) {
    try {
      io.run();
      break;
    } catch (const std::exception& e) {
      log.error("internal_error").str("msg", std::string("in a handler: ") + e.what());
    }
  }
  return stop_signal ? 0 : 1;
}

}  // namespace exg::cli
