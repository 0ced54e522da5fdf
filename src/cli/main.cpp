#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "cli/agent_cmd.hpp"
#include "cli/commands.hpp"
#include "cli/diff_apply.hpp"
#include "cli/escape_test.hpp"
#include "cli/make_layer.hpp"
#include "cli/mcp.hpp"
#include "cli/oci_cmds.hpp"
#include "cli/proxy_cmd.hpp"
#include "cli/runtime_cmd.hpp"
#include "cli/serve.hpp"
#include "cli/session.hpp"
#include "cli/subcommands.hpp"
#include "init/oci_init.hpp"
#include "layer/layer.hpp"
#include "probe/probe_main.hpp"

namespace {

// Splits off everything after the first "--" (the command, untouched by option
// parsing) into `run`, then parses the rest. Returns the exit status when
// parsing ends the program (help, version, a usage error), nothing otherwise.
std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv, exg::cli::RunOptions& run) {
  int n = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--") {
      n = i;
      run.command.assign(argv + i + 1, argv + argc);
      run.explicit_command = true;
      break;
    }
  }
  try {
    app.parse(n, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "exguardian: usage: %s (see exguardian --help)\n", e.what());
    return 125;
  }
  return std::nullopt;
}

// The subcommand a command line names, as CLI11 will find it: the first word
// before "--" that is one of app's subcommands (exguardian's own options,
// --help and --version, take no value, so no such word is an option's value);
// nullptr when there is none.
const CLI::App* named_subcommand(const CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc && std::string_view(argv[i]) != "--"; ++i) {
    if (argv[i][0] == '-') continue;
    for (const CLI::App* sub : app.get_subcommands({}))
      if (sub->check_name(argv[i])) return sub;
  }
  return nullptr;
}

// A run has ended: execute() has waited for the sandbox and removed what it
// made; what is left is memory (CLI11's tree of options, the static objects),
// and freeing it at exit was 60K instructions, a tenth of exguardian's own
// start and exit. So every stdio stream still open is flushed and the process
// ends there. (Nothing registers atexit handlers or writes through a static
// object.) Under AddressSanitizer, the ordinary return, for its leak check.
int end_of_run(int status) {
#ifndef __SANITIZE_ADDRESS__
  std::fflush(nullptr);
  std::_Exit(status);
#endif
  return status;
}

constexpr const char* kAppDescription = "ExGuardian: run code an AI agent wrote, isolated, with egress and secrets closed";

}  // namespace

int main(int argc, char** argv) {
  // An OCI runtime (issue 17): runc's grammar, not CLI11's. Reached as
  // `exguardian runtime ...` or through a link named exguardian-runtime or
  // exguardian-runtime-HANDLER (how containerd's BinaryName and podman's
  // runtime table pick a handler: neither passes arguments of its own).
  {
    std::string self = argv[0];
    self = self.substr(self.rfind('/') == std::string::npos ? 0 : self.rfind('/') + 1);
    if (self == "exguardian-runtime") return exg::cli::runtime_main(argc - 1, argv + 1, "");
    if (self.starts_with("exguardian-runtime-"))
      return exg::cli::runtime_main(argc - 1, argv + 1, self.substr(std::string("exguardian-runtime-").size()));
    if (argc > 1 && std::string(argv[1]) == "runtime") return exg::cli::runtime_main(argc - 2, argv + 2, "");
  }
  // Pid 1 inside a container layer: before CLI11, nothing to parse but the command.
  // ("--agent FD" goes on whole: oci_init_main tells the two forms apart by it.)
  if (argc > 2 && std::string(argv[1]) == "oci-init" && std::string(argv[2]) == "--")
    return exg::init::oci_init_main(argc - 3, argv + 3);
  if (argc == 4 && std::string(argv[1]) == "oci-init" && std::string(argv[2]) == "--agent")
    return exg::init::oci_init_main(2, argv + 2);
  // The session's client: its own small grammar (verbs with their own options and a command).
  if (argc > 1 && std::string(argv[1]) == "session-client") return exg::cli::session_client_main(argc - 2, argv + 2);
  // The E2B-compatible server: its own options, no command.
  if (argc > 1 && std::string(argv[1]) == "serve") return exg::cli::serve_main(argc - 1, argv + 1);
  // The MCP server over stdio: likewise.
  if (argc > 1 && std::string(argv[1]) == "mcp") return exg::cli::mcp_main(argc - 1, argv + 1);
  // `run`, the path of every sandbox start: CLI11 is given only its options, not
  // every subcommand's (building them all took about 0.3 ms of each start).
  auto run_main = [](int n, char** v) {
    CLI::App app{kAppDescription, "exguardian"};
    app.require_subcommand(1);
    exg::cli::RunOptions run;
    run.add_to(app);
    run.add_options();
    if (auto status = parse_command_line(app, n, v, run)) return *status;
    return end_of_run(run.execute());
  };
  if (argc > 1 && std::string(argv[1]) == "run") return run_main(argc, argv);
  // An agent CLI under its shipped profile: `run` with the profile and the agent's program.
  if (argc > 1 && std::string(argv[1]) == "agent") {
    std::vector<std::string> run_argv;
    if (auto status = exg::cli::agent_command_line(argc, argv, run_argv)) return *status;
    std::vector<char*> v;
    for (auto& a : run_argv) v.push_back(a.data());
    v.push_back(nullptr);
    return run_main(static_cast<int>(run_argv.size()), v.data());
  }
  CLI::App app{kAppDescription, "exguardian"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "exguardian 0.1.0");
  app.footer("Also, each with its own options (exguardian(1)): serve, mcp, session-client, agent (an agent CLI\n"
             "under its shipped profile), and runtime (an OCI runtime with runc's command line for Podman,\n"
             "containerd and Kubernetes).");
  // Every subcommand by name and description (all `exguardian --help` shows of
  // them), then the options of the one the command line names only: building
  // every subcommand's options took two thirds of `exguardian --version`.
  exg::cli::RunOptions run;
  run.add_to(app);
  exg::cli::SessionOptions session;
  session.add_to(app);
  exg::cli::OciSpecOptions oci_spec;
  oci_spec.add_to(app);
  exg::cli::DockerArgsOptions docker_args;
  docker_args.add_to(app);
  auto* doctor = app.add_subcommand("doctor", "What this host can enforce, layer by layer");
  auto* recommend = app.add_subcommand("recommend", "Which layer a situation calls for, and a policy to start from");
  auto* proxy = app.add_subcommand("proxy", "Run the egress proxy on its own");
  auto* diff = app.add_subcommand("diff", "Show what a kept overlay layer (run --workspace-mode overlay --keep DIR) would change");
  auto* apply = app.add_subcommand("apply", "Apply a kept overlay layer to its workspace (protected names quarantined)");
  auto* probe = app.add_subcommand("probe", "Try one attack from inside a sandbox (used by escape tests)");
  auto* escape = app.add_subcommand("escape-test", "Attack a sandbox from inside and keep the evidence");
  const CLI::App* named = named_subcommand(app, argc, argv);

  if (named == run.sub) run.add_options();
  if (named == session.sub) session.add_options();
  if (named == oci_spec.sub) oci_spec.add_options();
  if (named == docker_args.sub) docker_args.add_options();
  bool doctor_json = false, recommend_json = false, probe_list = false;
  std::string situation, probe_name, probe_tag;
  if (named == doctor) doctor->add_flag("--json", doctor_json, "Machine-readable output");
  CLI::Option* situation_opt = nullptr;
  if (named == recommend) {
    situation_opt = recommend->add_option("--situation", situation,
                                          "laptop | ci | multi-tenant | privileged-tools (without it: the list)");
    recommend->add_flag("--json", recommend_json, "Machine-readable output");
  }
  std::string px_listen, px_socks, px_policy, px_audit, px_token, px_ca_out, px_ph_out;
  exg::cli::ProxyBounds px_bounds;
  if (named == proxy) {
    proxy->add_option("--listen", px_listen, "HTTP proxy address, ADDR:PORT or unix:/path")->required();
    proxy->add_option("--socks", px_socks, "SOCKS5 address, ADDR:PORT or unix:/path");
    proxy->add_option("--token-file", px_token,
                      "File holding the token clients of TCP listeners must present (or EXGUARDIAN_PROXY_TOKEN)");
    proxy->add_option("--policy", px_policy, "Policy file with network.allowedDomains etc.")->required();
    proxy->add_option("--audit-log", px_audit, "Append every decision as JSON lines to FILE");
    proxy->add_option("--ca-cert-out", px_ca_out,
                      "With secrets: write the proxy's CA certificate (PEM, public) to FILE for clients to trust");
    proxy->add_option("--placeholders-out", px_ph_out,
                      "With secrets: write NAME=placeholder lines (mode 0600) to FILE for the clients' environment");
    proxy->add_option("--max-connections", px_bounds.max_connections,
                      "Concurrent client connections; beyond, a 503 (SOCKS: reply 1) and an audit line (default 4096)")
        ->check(CLI::Range(size_t{1}, size_t{1} << 20));
    proxy->add_option("--header-timeout", px_bounds.header_timeout_s,
                      "Seconds a client has to send its whole request head (default 10)")
        ->check(CLI::Range(0.1, 3600.0));
  }
  std::string layer_dir;
  if (named == diff) diff->add_option("dir", layer_dir, "The kept layer directory")->required();
  if (named == apply) apply->add_option("dir", layer_dir, "The kept layer directory")->required();
  if (named == probe) {
    probe->add_option("name", probe_name, "Probe name");
    probe->add_flag("--list", probe_list, "List the probes");
    probe->add_option("--tag", probe_tag, "Name the probe's process TAG (its comm, up to 15 characters) and give up after 10 s (escape-test's batches)");
  }
  exg::cli::EscapeTestOptions esc;
  if (named == escape) {
    std::vector<std::string> escape_layers;
    for (auto k : exg::cli::buildable_kinds()) escape_layers.emplace_back(exg::layer::name(k));
    std::string escape_help;
    for (const auto& n : escape_layers) escape_help += n + " | ";
    escape_layers.emplace_back("all");
    escape_help += "all (every layer present here; microvm and landlock only by name)";
    escape->add_option("--layer", esc.layer, escape_help)
        ->check(CLI::IsMember(escape_layers));
    escape->add_option("--policy", esc.policy_file, "Policy to test (passed to every exguardian run)");
    escape->add_option("--json", esc.json_file, "Write the machine-readable report to FILE");
    escape->add_option("--html", esc.html_file, "Write a self-contained HTML report to FILE");
    escape->add_option("--run-arg", esc.run_args, "Pass ARG to every exguardian run (repeatable; e.g. to weaken it in tests)")
        ->allow_extra_args(false);
    escape->add_option("--probe-timeout", esc.probe_timeout_s, "Seconds one probe may take (default 20)");
    escape->add_flag("--keep", esc.keep, "Keep the workspace, fake HOME and per-probe logs");
    escape->add_flag("-v,--verbose", esc.verbose, "One line per probe as it runs");
    escape->add_option("--only", esc.only, "Run only probe ID (repeatable; sandbox-in-place always runs)")
        ->allow_extra_args(false);
    escape->add_option("--sandbox", esc.sandbox,
                       "Run every probe in a foreign sandbox: a preset (bwrap, bwrap-net, podman, podman-hardened, podman-runsc, srt; none: no sandbox, "
                       "only the probes safe without one) or a command prefix (placeholders {workspace}, {home}, {probe}, {image})");
    escape->add_option("--sandbox-image", esc.sandbox_image, "The image of --sandbox podman, podman-hardened or podman-runsc (or {image} in a prefix)");
    escape->add_option("--sandbox-settings", esc.sandbox_settings,
                       "The settings file of --sandbox srt (or {settings} in a prefix); default: the preset's own "
                       "(--dry-run shows it)");
    escape->add_flag("--dry-run", esc.dry_run, "With --sandbox: print the command every probe runs as, and exit");
    escape->add_option("--compare", esc.compare,
                       "Run the probes against each of a comma-separated list (exguardian: ExGuardian's own layer; presets "
                       "as for --sandbox) and write one report with a column per sandbox. Exit status non-zero only when "
                       "ExGuardian's own column has an escape or failure, or the tool failed: a peer's escape is a finding "
                       "about the peer");
  }
  if (auto status = parse_command_line(app, argc, argv, run)) return *status;
  if (run.sub->parsed()) return run.execute();
  for (exg::cli::PlanOptions* o : {static_cast<exg::cli::PlanOptions*>(&oci_spec), static_cast<exg::cli::PlanOptions*>(&docker_args),
                                   static_cast<exg::cli::PlanOptions*>(&session)}) {
    o->command = run.command;  // everything after the first "--"
    o->explicit_command = run.explicit_command;
  }
  if (oci_spec.sub->parsed()) return oci_spec.execute();
  if (session.sub->parsed()) return session.execute();
  if (docker_args.sub->parsed()) return docker_args.execute();
  if (doctor->parsed()) return exg::cli::doctor_main(doctor_json);
  if (recommend->parsed()) return exg::cli::recommend_main(situation, situation_opt && situation_opt->count() > 0, recommend_json);
  if (proxy->parsed()) return exg::cli::proxy_main(px_listen, px_socks, px_policy, px_audit, px_token, px_ca_out, px_ph_out, px_bounds);
  if (diff->parsed()) return exg::cli::diff_main(layer_dir);
  if (apply->parsed()) return exg::cli::apply_main(layer_dir);
  if (escape->parsed()) return exg::cli::escape_test_main(esc);
  if (probe->parsed()) return exg::probe::probe_main(probe_name, probe_list, probe_tag);
  return 125;
}
