// Rules about the product's own source that a reviewer would otherwise have
// to remember. Each names the class of defect it keeps out.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> product_sources() {
  std::vector<fs::path> out;
  for (const auto& e : fs::recursive_directory_iterator(fs::path(EXG_SOURCE_DIR) / "src"))
    if (e.is_regular_file() && (e.path().extension() == ".cpp" || e.path().extension() == ".hpp")) out.push_back(e.path());
  return out;
}

// std::regex's libstdc++ matcher takes a stack frame per character of the
// text and backtracks exponentially: on anything a user, a project's policy
// or a client can make long, that is a crash or a hang (the service's routes
// and secrets' extract patterns had it). Patterns go through RE2
// (policy/extract_pattern.hpp); fixed shapes are scanned by hand.
TEST(SourceRules, NoStdRegexInTheProduct) {
  auto files = product_sources();
  ASSERT_GT(files.size(), 100u) << "the source tree was not found under " << EXG_SOURCE_DIR;
  for (const auto& f : files) {
    std::ifstream in(f);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_EQ(text.str().find("#include <regex>"), std::string::npos) << f << " includes <regex>";
  }
}

// Copying, comparing, dumping or walking a JSON value recurses once per level
// of nesting: JSON from outside goes through util/json_parse's parse_json,
// which refuses more than 256 levels before parsing (a line 200 000 deep
// crashed `exguardian mcp`). The exceptions bound the nesting themselves or
// read only what the supervisor wrote.
TEST(SourceRules, JsonFromOutsideIsParsedWithANestingBound) {
  const std::vector<std::string> allowed = {
      "src/util/json_parse.cpp",   // parse_json itself
      "src/agent/protocol.cpp",    // json_depth(header, 8) first
      "src/init/walls_exec.cpp",   // the walls the supervisor wrote for pid 1
  };
  for (const auto& f : product_sources()) {
    std::string rel = fs::relative(f, EXG_SOURCE_DIR).string();
    if (std::find(allowed.begin(), allowed.end(), rel) != allowed.end()) continue;
    std::ifstream in(f);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_EQ(text.str().find("json::parse("), std::string::npos) << rel << " calls nlohmann's parse: use parse_json";
  }
}

}  // namespace
