// cli/checked_subcommand.hpp: the same options, help and errors as a plain
// CLI11 subcommand, and a name clash still refused.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/checked_subcommand.hpp"

namespace {

struct Values {
  std::string policy, mode;
  std::vector<std::string> env;
  bool verbose = false, quiet = false;
};

// The same options on either kind of subcommand (add_option/add_flag of the type given).
template <class Sub>
void add_options(Sub* s, Values& v) {
  s->add_option("--policy", v.policy, "Policy file");
  s->add_option("--mode", v.mode, "live or overlay")->check(CLI::IsMember({"live", "overlay"}));
  s->add_option("--env", v.env, "NAME=VALUE (repeatable)");
  s->add_flag("-v,--verbose", v.verbose, "Say more");
  s->add_flag("-q,--quiet", v.quiet, "Say less");
  s->footer("A footer.");
}

struct Outcome {
  std::string help, error;
  Values values;
};

Outcome parse(bool checked, std::vector<std::string> args) {
  CLI::App app{"test app", "t"};
  app.require_subcommand(1);
  Outcome out;
  CLI::App* sub = nullptr;
  if (checked) {
    auto* c = exg::cli::CheckedSubcommand::add_to(app, "run", "Run it");
    add_options(c, out.values);
    sub = c;
  } else {
    sub = app.add_subcommand("run", "Run it");
    add_options(sub, out.values);
  }
  out.help = sub->help();
  std::vector<char*> argv;
  std::string name = "t";
  argv.push_back(name.data());
  for (auto& a : args) argv.push_back(a.data());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    out.error = e.what();
  }
  return out;
}

TEST(CheckedSubcommand, SameHelpParsingAndErrorsAsCli11) {
  const std::vector<std::vector<std::string>> lines = {
      {"run", "--policy", "p.json", "--env", "A=1", "--env", "B", "-vq", "--mode", "overlay"},
      {"run", "--mode", "nope"},
      {"run", "--bogus"},
      {"run", "--policy"},
      {"run", "-v", "--verbose"},
  };
  for (const auto& line : lines) {
    Outcome plain = parse(false, line), checked = parse(true, line);
    EXPECT_EQ(plain.help, checked.help);
    EXPECT_EQ(plain.error, checked.error) << line.back();
    EXPECT_EQ(plain.values.policy, checked.values.policy);
    EXPECT_EQ(plain.values.mode, checked.values.mode);
    EXPECT_EQ(plain.values.env, checked.values.env);
    EXPECT_EQ(plain.values.verbose, checked.values.verbose);
    EXPECT_EQ(plain.values.quiet, checked.values.quiet);
  }
  EXPECT_EQ(parse(true, lines[0]).values.env, (std::vector<std::string>{"A=1", "B"}));
  EXPECT_NE(parse(true, {"run", "--help"}).help.find("--verbose"), std::string::npos);
}

TEST(CheckedSubcommand, NameClashRefusedAsCli11Does) {
  for (const char* clash : {"--policy", "-v", "--verbose", "-h", "--help", "-x,--policy"}) {
    CLI::App app{"test app", "t"};
    Values v;
    auto* c = exg::cli::CheckedSubcommand::add_to(app, "run", "Run it");
    add_options(c, v);
    std::string other;
    std::string plain_error, checked_error;
    {
      CLI::App plain_app{"test app", "t"};
      Values pv;
      auto* p = plain_app.add_subcommand("run", "Run it");
      add_options(p, pv);
      try {
        p->add_option(clash, other, "clash");
      } catch (const CLI::OptionAlreadyAdded& e) {
        plain_error = e.what();
      }
    }
    try {
      c->add_option(clash, other, "clash");
    } catch (const CLI::OptionAlreadyAdded& e) {
      checked_error = e.what();
    }
    EXPECT_FALSE(checked_error.empty()) << clash;
    EXPECT_EQ(plain_error, checked_error) << clash;
    // The refused option is not left behind: help and parsing as before.
    EXPECT_EQ(c->get_options().size(), 6u) << clash;  // -h and the five
  }
}

}  // namespace
