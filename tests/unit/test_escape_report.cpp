// escape-test reports with several layers: every result names its layer (JSON
// round trip, table, HTML), the summary is per layer as well as overall, and a
// skipped layer that is not installed does not fail the suite.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "evidence/progress.hpp"
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
  for (const auto& x : l) {
    if (!x.present) {
      EXPECT_FALSE(x.why.empty()) << x.name;
    }
  }
}


// Issue 40, 5: the HTML report has a layer by category grid and a filter, and a
// skip is worded as one (no probe's "NOT AS EXPECTED" inside a row that held).
TEST(EscapeReport, HtmlHasTheGridTheFilterAndPlainSkips) {
  auto r = two_layers();
  auto held = probe("gvisor", "kernel-personality", Verdict::held);
  held.output = {"kernel-personality: NOT AS EXPECTED: errno 38 (ENOSYS)"};
  held.exit_status = 1;
  r.probes.push_back(held);
  auto esc = probe("process", "fd-leak", Verdict::escaped);
  esc.category = "leaks";
  esc.output = {"fd-leak: NOT AS EXPECTED: read the canary"};
  esc.exit_status = 1;
  r.probes.push_back(esc);
  auto h = render_html(r);
  EXPECT_NE(h.find("<table class=\"grid\">"), std::string::npos);
  EXPECT_NE(h.find("<th>process</th><th>gvisor</th><th>microvm</th>"), std::string::npos);
  EXPECT_NE(h.find("data-layer=\"gvisor\" data-cat=\"kernel\">2 held, 1 not run here</a>"), std::string::npos) << h;
  EXPECT_NE(h.find("data-layer=\"process\" data-cat=\"leaks\">1 ESCAPED</a>"), std::string::npos);
  EXPECT_NE(h.find("<select id=\"f-layer\">"), std::string::npos);
  EXPECT_NE(h.find("<tr class=\"probe held\" data-layer=\"gvisor\" data-cat=\"kernel\" data-verdict=\"held\">"),
            std::string::npos);
  EXPECT_NE(h.find("Not run on this layer, because:</b> why: not here"), std::string::npos);
  // The held row's probe output is reworded; the escaped row's is kept as the probe said it.
  EXPECT_NE(h.find("kernel-personality: another answer than the process layer's"), std::string::npos) << h;
  EXPECT_EQ(h.find("kernel-personality: NOT AS EXPECTED"), std::string::npos);
  EXPECT_NE(h.find("fd-leak: NOT AS EXPECTED: read the canary"), std::string::npos);
  EXPECT_EQ(h.find("src=\"http"), std::string::npos);  // still self-contained
}

// The live line: counts, the layer, the probe running now; an escape or a
// failure on a line of its own; nothing at all when off (piped).
TEST(EscapeProgress, DrawsInPlaceAndPrintsFailuresAsTheyCome) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = ::open_memstream(&buf, &len);
  {
    Progress p(true, f, "container", 0);
    p.now("building the test world");
    // (the seconds since the start are left out: no assertion on time)
    EXPECT_EQ(p.line().substr(0, 55), "escape-test: container layer: building the test world (");
    p.set_total(3);
    p.now("kernel-bpf");
    EXPECT_EQ(p.line().substr(0, 50), "escape-test: container layer: 0/3 probes, 0 held (");
    EXPECT_TRUE(p.line().ends_with(" s): kernel-bpf")) << p.line();
    p.done(probe("container", "kernel-bpf", Verdict::held));
    p.done(probe("container", "fd-leak", Verdict::escaped));
    p.done(probe("container", "x", Verdict::skipped, false));
    EXPECT_NE(p.line().find("3/3 probes, 1 held, 1 ESCAPED, 1 not run here"), std::string::npos) << p.line();
    p.finish();
  }
  std::fclose(f);
  std::string out(buf, len);
  std::free(buf);
  EXPECT_NE(out.find("\r\033[K"), std::string::npos);
  EXPECT_NE(out.find("\r\033[Kescape-test: ESCAPED container fd-leak: evidence of fd-leak\n"), std::string::npos) << out;
  EXPECT_EQ(out.back(), '\n');

  buf = nullptr;
  len = 0;
  f = ::open_memstream(&buf, &len);
  {
    Progress p(false, f, "process", 3);
    p.now("kernel-bpf");
    p.done(probe("process", "fd-leak", Verdict::escaped));
    p.finish();
  }
  std::fclose(f);
  EXPECT_EQ(len, 0u);
  std::free(buf);
}

TEST(EscapeReport, AnInstalledMicrovmLeftOutOfAllSaysSo) {
  for (const auto& x : layers_present())
    if (x.name == "microvm" && x.installed) {
      EXPECT_FALSE(x.present);
      EXPECT_NE(x.why.find("leaves it out on purpose"), std::string::npos) << x.why;
      EXPECT_NE(x.why.find("--layer microvm"), std::string::npos) << x.why;
    }
}

}  // namespace
}  // namespace exg::evidence

// --compare: a cell's state, and an exit status that follows ExGuardian's own column only.
#include "evidence/compare.hpp"
namespace exg::evidence {
namespace {
TEST(EscapeCompare, CellStatesAndTheExitStatusFollowExguardiansColumn) {
  auto probe = [](const char* col, const char* id, Verdict v, const char* ev) {
    ProbeResult p;
    p.layer = col;
    p.id = id;
    p.category = "network";
    p.verdict = v;
    p.evidence = ev;
    p.required = v != Verdict::skipped;
    return p;
  };
  CompareReport r;
  r.columns = {{"exguardian", "", "", "", "", 0}, {"none", "", "", "", "", 1}};
  r.all.probes = {probe("exguardian", "net-direct-metadata", Verdict::held, "nothing arrived"),
                  probe("none", "net-direct-metadata", Verdict::escaped, "the world's server received: 169.254.169.254"),
                  probe("exguardian", "limit-pids", Verdict::held, "pids limit 64"),
                  probe("none", "limit-pids", Verdict::skipped, "not run: unsafe without a sandbox: a fork bomb"),
                  probe("none", "cleanup-cgroups", Verdict::skipped, "not applicable: ExGuardian's cgroups")};
  EXPECT_EQ(cell_state(r.all.probes[1]), "ESCAPED");
  EXPECT_EQ(cell_state(r.all.probes[3]), "not run");
  EXPECT_EQ(cell_state(r.all.probes[4]), "not applicable");
  EXPECT_EQ(compare_status(r), 0) << "a peer's escape is a finding, not the tool's failure";
  auto j = compare_json(r);
  ASSERT_EQ(j["compare"]["rows"].size(), 3u);
  EXPECT_EQ(j["compare"]["rows"][0]["cells"]["none"]["state"], "ESCAPED");
  EXPECT_EQ(j["compare"]["rows"][2]["cells"]["exguardian"]["state"], "not run");  // not in its column at all
  EXPECT_EQ(j["compare"]["columns"][1]["by_category"]["network"]["ESCAPED"], 1);
  std::string html = render_compare_html(r);
  EXPECT_NE(html.find("<th>exguardian</th><th>none</th>"), std::string::npos);
  EXPECT_NE(html.find("ExGuardian held"), std::string::npos);
  r.all.probes[0].verdict = Verdict::escaped;
  EXPECT_EQ(compare_status(r), 1);
  r.all.probes[0].verdict = Verdict::held;
  r.tool_failed = true;
  EXPECT_EQ(compare_status(r), 1);
}
}  // namespace
}  // namespace exg::evidence
