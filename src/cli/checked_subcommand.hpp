// A subcommand that checks its options' names for clashes with a set, once per
// option, instead of CLI11's comparison with every option added before.
//
// Why: CLI11 (2.1) checks each new option's names against every option the
// subcommand already has, copying both name lists for every pair; for `run`'s
// 33 options that quadratic check was a quarter of the instructions exguardian
// spent before it looked at the command line (every sandbox start pays it).
// add_option and add_flag here hide the options added so far from that check
// (CLI11 looks at options_ only), put them back in order, and check the new
// option's names against the set: a clash is still an error at the first start
// (CLI::OptionAlreadyAdded, with CLI11's message), and --help, parsing and
// errors see the same options in the same order.
#pragma once
#include <CLI/CLI.hpp>
#include <iterator>
#include <memory>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace exg::cli {

class CheckedSubcommand : public CLI::App {
 public:
  // As parent.add_subcommand(name, description): the same constructor, so the
  // same settings inherited from the parent.
  static CheckedSubcommand* add_to(CLI::App& parent, std::string name, std::string description) {
    auto* sub = parent.add_subcommand(
        std::shared_ptr<CLI::App>(new CheckedSubcommand(std::move(description), std::move(name), &parent)));
    return static_cast<CheckedSubcommand*>(sub);
  }

  // CLI::App's, with the check above (they hide the base class's: call them
  // through a CheckedSubcommand*).
  template <class... A>
  CLI::Option* add_option(A&&... a) {
    return adding([&] { return CLI::App::add_option(std::forward<A>(a)...); });
  }
  template <class... A>
  CLI::Option* add_flag(A&&... a) {
    return adding([&] { return CLI::App::add_flag(std::forward<A>(a)...); });
  }

 private:
  CheckedSubcommand(std::string description, std::string name, CLI::App* parent)
      : CLI::App(std::move(description), std::move(name), parent) {}

  template <class Add>
  CLI::Option* adding(Add&& add) {
    // Names compared without case or underscores: CLI11's own check (exguardian sets neither).
    if (ignore_case_ || ignore_underscore_ || option_defaults_.get_ignore_case() ||
        option_defaults_.get_ignore_underscore())
      return add();
    if (names_.empty())
      for (const auto& o : options_) remember(*o);  // -h,--help
    std::vector<CLI::Option_p> earlier;
    earlier.swap(options_);  // what CLI11 compares the new option with: none
    auto put_back = [&] {
      earlier.insert(earlier.end(), std::make_move_iterator(options_.begin()), std::make_move_iterator(options_.end()));
      options_.swap(earlier);
    };
    CLI::Option* o = nullptr;
    try {
      o = add();
    } catch (...) {
      put_back();
      throw;
    }
    put_back();
    try {
      remember(*o);
    } catch (...) {
      remove_option(o);
      throw;
    }
    return o;
  }

  void remember(const CLI::Option& o) {
    std::vector<std::pair<std::string, std::string>> keys;  // ("-s" or "--long", the name as CLI11 says it)
    for (const auto& n : o.get_snames()) keys.emplace_back("-" + n, n);
    for (const auto& n : o.get_lnames()) keys.emplace_back("--" + n, n);
    for (const auto& [key, name] : keys)
      if (names_.count(key)) throw CLI::OptionAlreadyAdded("added option matched existing option name: " + name);
    for (auto& [key, name] : keys) names_.insert(std::move(key));
  }

  std::unordered_set<std::string> names_;  // "-s" and "--long" of every option so far
};

}  // namespace exg::cli
