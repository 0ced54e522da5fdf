// escape-test reports with several layers: every result names its layer (JSON
// round trip, table, HTML), the summary is per layer as well as overall, and a
// skipped layer that is not installed does not fail the suite.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "evidence/suite.hpp"

namespace exg::evidence {
namespace {

ProbeResult probe(const std::string& layer, const std::string& id, Verdict v, bool required = true) {
  ProbeResult r;
  r.layer = layer;
  r.id = id;
  r.category = "kernel";
  r.verdict = v;
  r.required = required;
  r.evidence = v == Verdict::skipped ? "why: not here" : "evidence of " + id;
  return r;
}

SuiteReport two_layers() {
  SuiteReport r;
  r.layer = "all";
  r.probes = {probe("process", "kernel-bpf", Verdict::held), probe("process", "seed-touch-home", Verdict::held),
              probe("gvisor", "kernel-bpf", Verdict::held),
              probe("gvisor", "kernel-personality-query-allowed", Verdict::skipped, false),
              probe("microvm", "layer-microvm", Verdict::skipped, false)};
  return r;
}

std::string text_of(const SuiteReport& r) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = ::open_memstream(&buf, &len);
  write_text(f, r);
  std::fclose(f);
  std::string s(buf, len);
  std::free(buf);
  return s;
}

TEST(EscapeReport, LayerSurvivesTheJsonRoundTrip) {
  auto j = to_json(probe("container", "fd-leak", Verdict::escaped));
  EXPECT_EQ(j["layer"], "container");
  EXPECT_EQ(probe_result_from_json(j).layer, "container");
  nlohmann::json old = j;
  old.erase("layer");  // reports written before layers existed
  EXPECT_EQ(probe_result_from_json(old).layer, "process");
}

TEST(EscapeReport, LayersInRunOrderAndSummaryPerLayer) {
  auto r = two_layers();
  EXPECT_EQ(r.layers(), (std::vector<std::string>{"process", "gvisor", "microvm"}));
  EXPECT_EQ(r.summary_line("process"), "2 held, 0 escaped, 0 skipped");
  EXPECT_EQ(r.summary_line("gvisor"), "1 held, 0 escaped, 1 skipped (1 x why: not here)");
  EXPECT_EQ(r.summary_line(), "3 held, 0 escaped, 2 skipped (2 x why: not here)");
  EXPECT_TRUE(r.passed());  // optional skips only
  auto j = to_json(r);
  ASSERT_EQ(j["layers"].size(), 3u);
  EXPECT_EQ(j["layers"][1]["layer"], "gvisor");
  EXPECT_EQ(j["layers"][1]["held"], 1);
  EXPECT_EQ(j["layers"][1]["skipped"], 1);
  EXPECT_EQ(j["layers"][1]["escaped"], 0);
}

TEST(EscapeReport, AnEscapeOnOneLayerFailsTheWholeSuite) {
  auto r = two_layers();
  r.probes.push_back(probe("container", "sys-class-net", Verdict::escaped));
  EXPECT_FALSE(r.passed());
  EXPECT_EQ(r.summary_line("container"), "0 held, 1 escaped, 0 skipped");
  EXPECT_EQ(to_json(r)["summary"]["escaped"], 1);
}

TEST(EscapeReport, TableAndHtmlNameTheLayer) {
  auto r = two_layers();
  auto t = text_of(r);
  EXPECT_NE(t.find("LAYER"), std::string::npos);
  EXPECT_NE(t.find("gvisor    kernel-bpf"), std::string::npos);
  EXPECT_NE(t.find("layer process: 2 held, 0 escaped, 0 skipped"), std::string::npos);
  EXPECT_NE(t.find("layer gvisor: 1 held"), std::string::npos);
  auto h = render_html(r);
  EXPECT_NE(h.find("<th>Layer</th>"), std::string::npos);
  EXPECT_NE(h.find("<td>gvisor</td>"), std::string::npos);
  EXPECT_NE(h.find("<li><b>gvisor</b>: 1 held"), std::string::npos);
}

TEST(EscapeReport, OneLayerHasNoPerLayerLines) {
  SuiteReport r;
  r.layer = "container";
  r.probes = {probe("container", "kernel-bpf", Verdict::held)};
  auto t = text_of(r);
  EXPECT_EQ(t.find("layer container:"), std::string::npos);
  EXPECT_NE(t.find("1 held, 0 escaped, 0 skipped"), std::string::npos);
}

TEST(EscapeReport, LayersPresentAlwaysListsProcessFirst) {
  auto l = layers_present();
  ASSERT_GE(l.size(), 3u);
  EXPECT_EQ(l[0].name, "process");
  EXPECT_TRUE(l[0].present);
  for (const auto& x : l)
    if (!x.present) EXPECT_FALSE(x.why.empty()) << x.name;
}

}  // namespace
}  // namespace exg::evidence
