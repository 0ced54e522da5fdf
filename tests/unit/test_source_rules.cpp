// Rules about the product's own source that a reviewer would otherwise have
// to remember. Each names the class of defect it keeps out.
#include <gtest/gtest.h>

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

}  // namespace
