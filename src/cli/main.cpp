#include <cstdio>
#include <string>

#include "cli/commands.hpp"

int main(int argc, char** argv) {
  CLI::App app{"ExGuardian: run code an AI agent wrote, isolated, with egress and secrets closed", "exguardian"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "exguardian 0.1.0");
  exg::cli::RunOptions run;
  run.add_to(app);
  // Everything after the first "--" is the command, untouched by option parsing.
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
  if (run.sub->parsed()) return run.execute();
  return 125;
}
