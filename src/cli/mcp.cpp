// `exguardian mcp`: an MCP server over stdio (src/mcp/) whose tools are
// ExGuardian sandboxes. Standalone: it holds its own sandboxes, each an
// `exguardian session` supervisor driven through the service's registry.
// Client mode (--server URL --api-key-file F): the sandboxes of a running
// `exguardian serve`, through its E2B-compatible API.
#include "cli/mcp.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>

#include "mcp/jsonrpc.hpp"
#include "mcp/local_sandboxes.hpp"
#include "mcp/remote_sandboxes.hpp"
#include "mcp/server.hpp"
#include "serve/sandbox_registry.hpp"
#include "serve/templates.hpp"
#include "util/layer_kind.hpp"
#include "util/write_all.hpp"

namespace exg::cli {

namespace {

namespace fs = std::filesystem;

int mcp_error(const std::string& what) {
  std::fprintf(stderr, "exguardian: mcp: %s\n", what.c_str());
  return 125;
}

std::string canonical(const std::string& d) {
  char buf[PATH_MAX];
  return ::realpath(d.c_str(), buf) ? std::string(buf) : std::string();
}

// State directories of MCP servers that are gone (their lock is free): their
// supervisors ended (PDEATHSIG) or are ended here, the directories removed.
void sweep_stale_servers(boost::asio::io_context& io, const std::string& base, const std::string& exe) {
  std::error_code ec;
  for (auto& e : fs::directory_iterator(base, ec)) {
    std::string dir = e.path().string();
    int fd = ::open((dir + "/server.lock").c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) continue;  // not (yet) a server's
    bool stale = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
    ::close(fd);
    if (!stale) continue;
    serve::Registry old(io, {dir, exe, false, 1});
    if (old.open()) fs::remove_all(dir, ec);
  }
}

constexpr const char* kInstructions =
    "ExGuardian sandboxes: create_sandbox, then run_command / start_command + read_output and the file tools with its "
    "sandbox_id; destroy_sandbox when done. Everything runs inside the sandbox (no network unless allowed, only the "
    "workspace writable). A result's refusals say what the sandbox refused (egress, syscalls, planted files).";

// The API key: the file's one line (never an argument: those are visible to every user in ps).
Result<std::string> read_api_key(const std::string& file) {
  int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return fail(Error::sys("--api-key-file " + file));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > 4096) {
    ::close(fd);
    return fail(Error::msg("--api-key-file " + file, "expected a regular file of at most 4096 bytes holding the key"));
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  ssize_t got = ::read(fd, text.data(), text.size());
  ::close(fd);
  if (got < 0) return fail(Error::sys("--api-key-file " + file));
  text.resize(static_cast<size_t>(got));
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.erase(0, 1);
  if (text.empty()) return fail(Error::msg("--api-key-file " + file, "empty"));
  for (unsigned char ch : text)
    if (ch < 0x21 || ch > 0x7e) return fail(Error::msg("--api-key-file " + file, "expected one key (printable, no spaces or line breaks)"));
  return text;
}

// The MCP session on stdin/stdout until stdin closes or a signal: then every sandbox is destroyed.
int serve_stdio(boost::asio::io_context& io, mcp::Sandboxes& sandboxes, bool verbose) {
  int rc = 0;
  mcp::Server server(sandboxes, [](const std::string& line) { write_all(1, line); }, kInstructions);
  bool ending = false;
  auto end = [&](const char* why) {
    if (ending) return;
    ending = true;
    if (verbose) std::fprintf(stderr, "exguardian: mcp: %s: destroying the sandboxes\n", why);
    sandboxes.shutdown([&io] { io.stop(); });
  };
  boost::asio::signal_set stop(io, SIGTERM, SIGINT, SIGHUP);
  stop.async_wait([&](boost::system::error_code ec, int) {
    if (!ec) end("signal");
  });
  // stdin in a thread of its own: a pipe, a file or a terminal alike; lines are handled on the loop.
  std::thread([&io, &server, &end] {
    std::string acc;
    bool skipping = false;
    char buf[65536];
    for (;;) {
      ssize_t got = ::read(0, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;
      for (ssize_t i = 0; i < got; ++i) {
        if (buf[i] != '\n') {
          if (!skipping) acc += buf[i];
          if (acc.size() > mcp::kMaxLineBytes) skipping = true, acc.clear();
          continue;
        }
        std::string line = skipping ? std::string("[") + std::string(mcp::kMaxLineBytes + 1, ' ') + "]" : std::move(acc);
        acc.clear();
        skipping = false;
        boost::asio::post(io, [&server, line = std::move(line)] { server.handle_line(line); });
      }
    }
    boost::asio::post(io, [&end] { end("stdin closed"); });
  }).detach();
  for (;;) {
    try {
      io.run();
      break;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "exguardian: mcp: internal error in a handler: %s\n", e.what());
      rc = 1;
    }
  }
  return rc;
}

}  // namespace

int mcp_main(int argc, char** argv) {
  CLI::App app{"An MCP server over stdio whose tools are ExGuardian sandboxes", "exguardian mcp"};
  mcp::LocalOptions lo;
  std::string templates_file, state_base = "/var/tmp/exg-mcp-" + std::to_string(::getuid());
  std::vector<std::string> roots;
  long sandbox_timeout = 3600;
  bool verbose = false;
  std::vector<std::string> layer_names;
  for (auto k : layer::all_kinds()) layer_names.emplace_back(layer::name(k));
  app.add_option("--layer", lo.layer, "Default layer of new sandboxes: " + layer::names_text(layer::all_kinds()) + " (default process)")
      ->check(CLI::IsMember(layer_names));
  app.add_option("--policy", lo.policy, "A policy file every sandbox gets (ExGuardian or sandbox-runtime settings)");
  app.add_option("--allow-domain", lo.allow_domains, "A domain every sandbox may reach (repeatable)");
  app.add_option("--templates", templates_file, "Templates create_sandbox may name (the format of exguardian serve --templates)");
  app.add_option("--workspace-root", roots, "A host directory under which create_sandbox may mount a workspace (repeatable; default: the current directory)");
  app.add_flag("--lock-policy", lo.lock_policy, "create_sandbox may not choose layer, policy, allow_domains or workspace");
  app.add_option("--sandbox-timeout", sandbox_timeout, "Seconds a sandbox lives unless create_sandbox says otherwise (default 3600)")
      ->check(CLI::Range(1L, 7L * 86400));
  app.add_option("--max-sandboxes", lo.max_sandboxes, "Sandboxes at once (default 16)")->check(CLI::Range(size_t{1}, size_t{1000}));
  app.add_option("--state-dir", state_base, "Where sandboxes' state lives, under /tmp or /var/tmp (default /var/tmp/exg-mcp-UID)");
  std::string server_url, api_key_file;
  app.add_option("--server", server_url, "Client mode: the sandboxes of a running exguardian serve at unix:PATH or http://127.0.0.1:PORT");
  app.add_option("--api-key-file", api_key_file, "Client mode: a file holding the serve tenant's API key (required with --server)");
  app.add_flag("-v,--verbose", verbose, "Log every sandbox's life on stderr");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "exguardian: mcp: usage: %s (see exguardian mcp --help)\n", e.what());
    return 125;
  }
  if (!server_url.empty() || !api_key_file.empty()) {
    if (server_url.empty()) return mcp_error("--api-key-file: only with --server URL");
    if (api_key_file.empty()) return mcp_error("--server: needs --api-key-file FILE (the tenant's API key; never on the command line)");
    // The server's tenant, templates and policies decide these.
    for (const char* o : {"--layer", "--policy", "--templates", "--workspace-root", "--state-dir"})
      if (app.count(o)) return mcp_error(std::string(o) + ": not with --server: exguardian serve's templates and tenant decide (see exguardian mcp --help)");
    auto ep = mcp::parse_server_url(server_url);
    if (!ep) return mcp_error(ep.error().str());
    auto key = read_api_key(api_key_file);
    if (!key) return mcp_error(key.error().str());
    mcp::RemoteOptions remote;
    remote.server = std::move(*ep);
    remote.api_key = std::move(*key);
    remote.allow_domains = lo.allow_domains;
    remote.lock_policy = lo.lock_policy;
    remote.sandbox_timeout = std::chrono::seconds(sandbox_timeout);
    remote.max_sandboxes = lo.max_sandboxes;
    ::signal(SIGPIPE, SIG_IGN);
    boost::asio::io_context& io = *new boost::asio::io_context;  // never destroyed, as below
    mcp::RemoteSandboxes sandboxes(io, std::move(remote));
    return serve_stdio(io, sandboxes, verbose);
  }
  if (!templates_file.empty()) {
    auto t = serve::Templates::load(templates_file);
    if (!t) return mcp_error(t.error().str());
    lo.templates = std::move(*t);
  }
  if (!lo.policy.empty()) {
    std::string p = canonical(lo.policy);
    if (p.empty()) return mcp_error("--policy " + lo.policy + ": " + std::strerror(errno));
    lo.policy = p;
  }
  if (roots.empty()) roots.push_back(".");
  for (auto& r : roots) {
    std::string c = canonical(r);
    if (c.empty()) return mcp_error("--workspace-root " + r + ": " + std::strerror(errno));
    lo.workspace_roots.push_back(c);
  }
  lo.sandbox_timeout = std::chrono::seconds(sandbox_timeout);
  // As for serve: the sandboxes see the host's root read-only but /tmp and /var/tmp are their own,
  // so homes kept there are invisible to the other sandboxes.
  if (state_base.empty() || state_base[0] != '/') return mcp_error("--state-dir " + state_base + ": expected an absolute path");
  ::mkdir(state_base.c_str(), 0700);
  std::string base = canonical(state_base);
  if (!(base.starts_with("/tmp/") || base.starts_with("/var/tmp/")))
    return mcp_error("--state-dir " + state_base + ": must be under /tmp or /var/tmp, which every sandbox has to itself");
  struct stat st;
  if (::stat(base.c_str(), &st) != 0 || st.st_uid != ::getuid() || (st.st_mode & 077) != 0)
    return mcp_error("--state-dir " + base + ": must be a directory of this user's, mode 0700");
  char exe[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return mcp_error("readlink /proc/self/exe failed");
  exe[n] = '\0';
  lo.exe = exe;

  ::signal(SIGPIPE, SIG_IGN);
  // Never destroyed: the stdin thread may still post a line to it while the process exits.
  boost::asio::io_context& io = *new boost::asio::io_context;
  sweep_stale_servers(io, base, exe);
  // This server's own directory (several clients may each run one).
  std::string dir = base + "/" + std::to_string(::getpid()) + "-" + serve::random_id(8);
  lo.state_dir = dir;
  serve::RegistryOptions ro;
  ro.state_dir = dir;
  ro.exe = exe;
  ro.verbose = verbose;
  ro.max_sandboxes = lo.max_sandboxes;
  int rc = 0;
  {
    serve::Registry registry(io, ro);
    if (auto r = registry.open(); !r) return mcp_error(r.error().str());
    mcp::LocalSandboxes sandboxes(io, registry, lo);
    rc = serve_stdio(io, sandboxes, verbose);
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  return rc;
}

}  // namespace exg::cli
