#include <cstdio>

#include "cli/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"ExGuardian: run code an AI agent wrote, isolated, with egress and secrets closed", "exguardian"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "exguardian 0.1.0");
  exg::cli::RunOptions run;
  run.add_to(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "exguardian: usage: %s (see exguardian --help)\n", e.what());
    return 125;
  }
  if (run.sub->parsed()) return run.execute();
  return 125;
}
