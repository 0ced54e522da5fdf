#include "cli/agent_cmd.hpp"

#include <limits.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "util/json_parse.hpp"

namespace exg::cli {
namespace {

// The agents with a shipped profile: the program each runs and what it is.
// What an agent needs beyond its program (directories made before its first
// run, its credentials) is in its profile, so `exguardian run --policy
// PROFILE` does the same.
struct AgentProfile {
  const char* name;
  const char* program;
  const char* what;
};
constexpr AgentProfile kAgents[] = {
    {"claude", "claude", "Claude Code (@anthropic-ai/claude-code)"},
    {"codex", "codex", "Codex CLI (@openai/codex)"},
    {"gemini", "gemini", "Gemini CLI (@google/gemini-cli)"},
    {"opencode", "opencode", "OpenCode (opencode-ai)"},
};

const AgentProfile* find_agent(const std::string& name) {
  for (const auto& a : kAgents)
    if (name == a.name) return &a;
  return nullptr;
}

std::string dir_of_exe() {
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  std::string p(buf, static_cast<size_t>(n));
  return p.substr(0, p.rfind('/'));
}

bool readable(const std::string& path) { return ::access(path.c_str(), R_OK) == 0; }

// Where NAME's profile is: the user's own copy first, then the installed one,
// then the source tree beside a build directory.
std::string find_profile(const std::string& name, std::vector<std::string>* tried) {
  std::vector<std::string> places;
  if (const char* d = std::getenv("EXGUARDIAN_AGENT_PROFILES"); d && *d) places.push_back(d);
  if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x == '/')
    places.push_back(std::string(x) + "/exguardian/agents");
  else if (const char* h = std::getenv("HOME"); h && *h == '/')
    places.push_back(std::string(h) + "/.config/exguardian/agents");
  std::string exe = dir_of_exe();
  if (!exe.empty()) {
    places.push_back(exe + "/../share/exguardian/agents");
    places.push_back(exe + "/../profiles/agents");
  }
  for (const auto& d : places) {
    std::string f = d + "/" + name + ".json";
    if (tried) tried->push_back(f);
    if (!readable(f)) continue;
    char real[PATH_MAX];
    return ::realpath(f.c_str(), real) ? std::string(real) : f;
  }
  return "";
}

// One line per part of the profile, for --list.
std::string summary(const std::string& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  auto j = parse_json(text.str(), nullptr, true);
  if (j.is_discarded() || !j.is_object()) return "  (" + file + ": not valid JSON)";
  auto list = [](const nlohmann::json& a) {
    std::string s;
    if (a.is_array())
      for (const auto& e : a)
        if (e.is_string()) s += (s.empty() ? "" : ", ") + e.get<std::string>();
    return s.empty() ? std::string("none") : s;
  };
  std::string out = "  allows: " + list(j.value("/network/allowedDomains"_json_pointer, nlohmann::json::array())) + "\n";
  out += "  writable: the workspace, " + list(j.value("/filesystem/allowWrite"_json_pointer, nlohmann::json::array())) + "\n";
  if (auto m = j.value("/filesystem/makeDirs"_json_pointer, nlohmann::json::array()); !m.empty())
    out += "  made before a run when missing: " + list(m) + "\n";
  std::string secrets;
  for (const auto& s : j.value("secrets", nlohmann::json::array()))
    if (s.is_object())
      secrets += (secrets.empty() ? "" : "; ") + s.value("name", std::string("?")) + " (from " +
                 s.value("from", std::string("?")) + ") only to " + list(s.value("hosts", nlohmann::json::array()));
  out += "  kept outside: " + (secrets.empty() ? std::string("nothing") : secrets) + "\n";
  out += "  profile: " + file + "\n";
  return out;
}

int list_agents() {
  std::printf("agents (exguardian agent NAME [run options] [-- ARGS]; the profile is an ordinary policy file):\n");
  for (const auto& a : kAgents) {
    std::string f = find_profile(a.name, nullptr);
    std::printf("%-9s %s, runs `%s`\n%s", a.name, a.what, a.program,
                f.empty() ? "  profile: not found (see --help)\n" : summary(f).c_str());
  }
  return 0;
}

int usage(FILE* to) {
  std::fprintf(to,
               "usage: exguardian agent NAME [RUN OPTIONS] [-- ARGS]\n"
               "       exguardian agent --list | --show NAME\n"
               "Runs the agent CLI NAME whole in a sandbox under its profile: its key stays outside (a placeholder\n"
               "inside, the real value only in requests to its vendor's API), its settings and hooks protected,\n"
               "only its vendor's hosts reached. RUN OPTIONS are exguardian run's (--layer, --policy, --dry-run, ...);\n"
               "--policy files merge over the profile. Profiles are looked for in $EXGUARDIAN_AGENT_PROFILES,\n"
               "~/.config/exguardian/agents, then beside the binary (share/exguardian/agents).\n"
               "Agents: claude, codex, gemini, opencode (--list says what each allows).\n");
  return to == stderr ? 2 : 0;
}

}  // namespace

std::optional<int> agent_command_line(int argc, char** argv, std::vector<std::string>& run_argv) {
  if (argc < 3) return usage(stderr);
  std::string first = argv[2];
  if (first == "--help" || first == "-h") return usage(stdout);
  if (first == "--list") return list_agents();
  if (first == "--show") {
    if (argc < 4) return usage(stderr);
    std::string f = find_profile(argv[3], nullptr);
    if (!find_agent(argv[3]) || f.empty()) {
      std::fprintf(stderr, "exguardian: agent --show %s: no such agent profile (exguardian agent --list)\n", argv[3]);
      return 2;
    }
    std::ifstream in(f);
    std::stringstream ss;
    ss << in.rdbuf();
    std::fputs(ss.str().c_str(), stdout);
    return 0;
  }
  const AgentProfile* agent = find_agent(first);
  if (!agent) {
    std::fprintf(stderr, "exguardian: agent %s: no such agent; known: claude, codex, gemini, opencode "
                         "(exguardian agent --list)\n", first.c_str());
    return 2;
  }
  std::vector<std::string> tried;
  std::string profile = find_profile(agent->name, &tried);
  if (profile.empty()) {
    std::string t;
    for (const auto& p : tried) t += (t.empty() ? "" : ", ") + p;
    std::fprintf(stderr, "exguardian: agent %s: its profile was not found (looked for %s)\n", agent->name, t.c_str());
    return 2;
  }
  // exguardian run --policy PROFILE [options before --] -- PROGRAM [ARGS after --]
  run_argv = {argv[0], "run", "--policy", profile};
  int i = 3;
  for (; i < argc && std::string(argv[i]) != "--"; ++i) run_argv.push_back(argv[i]);
  run_argv.push_back("--");
  run_argv.push_back(agent->program);
  for (++i; i < argc; ++i) run_argv.push_back(argv[i]);
  return std::nullopt;
}

}  // namespace exg::cli
