// id_map_lines: the gid maps of idmapped workspace mounts (issue 12, part 6).
#include <gtest/gtest.h>

#include <sstream>

#include "process/id_map.hpp"

namespace exg::process {
namespace {

struct Line {
  uint64_t inside, outside, count;
};

std::vector<Line> parse(const std::string& text) {
  std::vector<Line> out;
  std::istringstream in(text);
  Line l;
  while (in >> l.inside >> l.outside >> l.count) out.push_back(l);
  return out;
}

// Where id goes, or -1 when the map does not map it.
int64_t lookup(const std::vector<Line>& m, uint64_t id) {
  for (const auto& l : m)
    if (id >= l.inside && id - l.inside < l.count) return static_cast<int64_t>(l.outside + (id - l.inside));
  return -1;
}

TEST(IdMap, OwnerOnlyWithoutIdentityRest) {
  EXPECT_EQ(id_map_lines(0, 1500000000u, false), "0 1500000000 1\n");
}

TEST(IdMap, EveryOtherIdOntoItselfNeverTwice) {
  auto m = parse(id_map_lines(0, 1500000000u, true));
  EXPECT_EQ(lookup(m, 0), 1500000000);
  EXPECT_EQ(lookup(m, 100), 100);            // `users`: stays itself
  EXPECT_EQ(lookup(m, 1), 1);
  EXPECT_EQ(lookup(m, 1499999999u), 1499999999);
  EXPECT_EQ(lookup(m, 1500000000u), -1);     // the sandbox's own id is not also an on-disk id
  EXPECT_EQ(lookup(m, 4294967294u), 4294967294);
  EXPECT_EQ(lookup(m, 4294967295u), -1);
  // No outside id is given twice, and the kernel's limit of 340 lines holds.
  EXPECT_LE(m.size(), 340u);
  for (size_t i = 0; i < m.size(); ++i)
    for (size_t j = i + 1; j < m.size(); ++j) {
      bool overlap_in = m[i].inside < m[j].inside + m[j].count && m[j].inside < m[i].inside + m[i].count;
      bool overlap_out = m[i].outside < m[j].outside + m[j].count && m[j].outside < m[i].outside + m[i].count;
      EXPECT_FALSE(overlap_in || overlap_out) << i << " " << j;
    }
}

TEST(IdMap, ExcludedIdsStayUnmapped) {
  auto m = parse(id_map_lines(1000, 1000, true, {5, 70000}));
  EXPECT_EQ(lookup(m, 1000), 1000);
  EXPECT_EQ(lookup(m, 5), -1);
  EXPECT_EQ(lookup(m, 70000), -1);
  EXPECT_EQ(lookup(m, 4), 4);
  EXPECT_EQ(lookup(m, 70001), 70001);
}

}  // namespace
}  // namespace exg::process
