// util/json_parse: the nesting bound every JSON from outside goes through.
#include "util/json_parse.hpp"

#include <gtest/gtest.h>

#include <string>

namespace exg {
namespace {

std::string nested(size_t n, const char* open = "[", const char* close = "]") {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += open;
  for (size_t i = 0; i < n; ++i) s += close;
  return s;
}

TEST(JsonParse, DepthCountsBracketsOutsideStrings) {
  EXPECT_EQ(json_depth("1"), 0u);
  EXPECT_EQ(json_depth(R"({"a":[1,{"b":[]}]})"), 4u);
  EXPECT_EQ(json_depth(R"({"a":"[[[[{{{{"})"), 1u);
  EXPECT_EQ(json_depth(R"({"a":"\"[[[[\\"})"), 1u);      // escaped quote, then an escaped backslash
  EXPECT_EQ(json_depth(R"(["\\", [[]]])"), 3u);
  EXPECT_EQ(json_depth("]]]][["), 2u);                      // not JSON: still a bounded count
  EXPECT_EQ(json_depth(nested(1000), 10), 11u);            // stops counting past the limit
}

TEST(JsonParse, DeeperThanTheBoundIsRefusedBeforeParsing) {
  std::string why;
  EXPECT_FALSE(parse_json(nested(kMaxJsonNesting), &why).is_discarded());
  EXPECT_TRUE(parse_json(nested(kMaxJsonNesting + 1), &why).is_discarded());
  EXPECT_EQ(why, "nested more than 256 levels deep");
  // Far deeper than any stack could copy or print: refused, no crash.
  auto deep = parse_json(nested(1000000, "{\"a\":", "}"), &why);
  EXPECT_TRUE(deep.is_discarded());
  EXPECT_EQ(why, "nested more than 256 levels deep");
  EXPECT_TRUE(parse_json("{\"a\":", &why).is_discarded());
  EXPECT_EQ(why, "not valid JSON");
  EXPECT_EQ(parse_json(R"({"a":[1,2]})")["a"][1], 2);
}

}  // namespace
}  // namespace exg
