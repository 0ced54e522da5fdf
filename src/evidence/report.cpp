// The escape test's reports: a table for the terminal and a self-contained
// HTML page (inline CSS, no external resources) a person can keep.
#include <cstdio>
#include <map>
#include <sstream>

#include "evidence/suite.hpp"

namespace exg::evidence {
std::string html_escape(const std::string& s) {
  std::string r;
  r.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': r += "&amp;"; break;
      case '<': r += "&lt;"; break;
      case '>': r += "&gt;"; break;
      case '"': r += "&quot;"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') r += "?";
        else r += c;
    }
  }
  return r;
}

namespace {

std::string esc(const std::string& s) { return html_escape(s); }

std::string cut(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n - 3) + "..."; }

const char* css_class(Verdict v) {
  switch (v) {
    case Verdict::held: return "held";
    case Verdict::escaped: return "escaped";
    case Verdict::failed: return "failed";
    case Verdict::skipped: return "skipped";
  }
  return "";
}

// A probe's own line says "NOT AS EXPECTED" when its answer differs from the
// process layer's; the verdict beside it is escape-test's, from both sides. In a
// row that held or was not run that phrase reads as a failure: say what it means.
std::string plain_output_line(const std::string& line, Verdict v) {
  if (v == Verdict::escaped || v == Verdict::failed) return line;
  static const std::string kPhrase = "NOT AS EXPECTED";
  auto at = line.find(kPhrase);
  if (at == std::string::npos) return line;
  return line.substr(0, at) + "another answer than the process layer's" + line.substr(at + kPhrase.size());
}

// The layer by category grid: one row per category, one column per layer, each
// cell the counts of its verdicts; a cell is a link that filters the table below.
void write_grid(std::ostringstream& h, const SuiteReport& r) {
  auto layers = r.layers();
  std::map<std::string, std::map<std::string, std::map<Verdict, int>>> grid;  // category -> layer -> counts
  for (const auto& p : r.probes) grid[p.category][p.layer][p.verdict]++;
  h << "<h2>By layer and category</h2>\n<table class=\"grid\"><tr><th>Category</th>";
  for (const auto& l : layers) h << "<th>" << esc(l) << "</th>";
  h << "</tr>\n";
  for (const auto& [cat, by_layer] : grid) {
    h << "<tr><td><b>" << esc(cat) << "</b></td>";
    for (const auto& l : layers) {
      auto it = by_layer.find(l);
      if (it == by_layer.end()) {
        h << "<td class=\"none\">-</td>";
        continue;
      }
      const auto& m = it->second;
      auto n = [&](Verdict v) { auto f = m.find(v); return f == m.end() ? 0 : f->second; };
      const char* cls = n(Verdict::escaped) ? "escaped" : n(Verdict::failed) ? "failed" : n(Verdict::held) ? "held" : "skipped";
      h << "<td class=\"cell " << cls << "\"><a href=\"#probes\" data-layer=\"" << esc(l) << "\" data-cat=\"" << esc(cat)
        << "\">";
      std::string parts;
      auto add = [&](int k, const char* what) {
        if (k) parts += (parts.empty() ? "" : ", ") + std::to_string(k) + " " + what;
      };
      add(n(Verdict::held), "held");
      add(n(Verdict::escaped), "ESCAPED");
      add(n(Verdict::failed), "FAILED");
      add(n(Verdict::skipped), "not run here");
      h << parts << "</a></td>";
    }
    h << "</tr>\n";
  }
  h << "</table>\n";
}

// The filter above the probes' table: layer, category, verdict and free text,
// applied by a few lines of inline script (the page stays self-contained).
void write_filter(std::ostringstream& h, const SuiteReport& r) {
  std::map<std::string, int> cats;
  for (const auto& p : r.probes) cats[p.category]++;
  h << "<div class=\"filter\">Show <select id=\"f-layer\"><option value=\"\">every layer</option>";
  for (const auto& l : r.layers()) h << "<option>" << esc(l) << "</option>";
  h << "</select> <select id=\"f-cat\"><option value=\"\">every category</option>";
  for (const auto& [c, _] : cats) h << "<option>" << esc(c) << "</option>";
  h << "</select> <select id=\"f-verdict\"><option value=\"\">every verdict</option><option value=\"held\">held</option>"
       "<option value=\"escaped\">ESCAPED</option><option value=\"failed\">FAILED</option>"
       "<option value=\"skipped\">not run here</option></select> "
       "<input id=\"f-text\" type=\"search\" placeholder=\"probe id or text\"> <span id=\"f-count\"></span></div>\n";
}

const char* kFilterScript =
    "<script>\n"
    "(function(){\n"
    "var ids=['f-layer','f-cat','f-verdict','f-text'];\n"
    "function apply(){\n"
    " var l=document.getElementById('f-layer').value,c=document.getElementById('f-cat').value,\n"
    "     v=document.getElementById('f-verdict').value,t=document.getElementById('f-text').value.toLowerCase();\n"
    " var rows=document.querySelectorAll('tr.probe'),shown=0;\n"
    " rows.forEach(function(r){var ok=(!l||r.dataset.layer===l)&&(!c||r.dataset.cat===c)&&(!v||r.dataset.verdict===v)&&\n"
    "   (!t||r.textContent.toLowerCase().indexOf(t)>=0);r.style.display=ok?'':'none';if(ok)shown++;});\n"
    " document.getElementById('f-count').textContent=shown+' of '+rows.length+' shown';\n"
    "}\n"
    "ids.forEach(function(i){var e=document.getElementById(i);e.addEventListener('input',apply);e.addEventListener('change',apply);});\n"
    "document.querySelectorAll('table.grid a').forEach(function(a){a.addEventListener('click',function(){\n"
    " document.getElementById('f-layer').value=a.dataset.layer;document.getElementById('f-cat').value=a.dataset.cat;\n"
    " document.getElementById('f-verdict').value='';document.getElementById('f-text').value='';apply();});});\n"
    "apply();\n"
    "})();\n"
    "</script>\n";

}  // namespace

void write_text(std::FILE* out, const SuiteReport& r) {
  std::fprintf(out, "exguardian escape-test  layer=%s  policy=%s\n", r.layer.c_str(), r.policy_file.c_str());
  for (const auto& w : r.warnings) std::fprintf(out, "!! %s\n", w.c_str());
  std::fprintf(out, "%-9s %-34s %-16s %-8s %s\n", "LAYER", "ID", "CATEGORY", "VERDICT", "EVIDENCE");
  for (const auto& p : r.probes)
    std::fprintf(out, "%-9s %-34s %-16s %-8s %s\n", p.layer.c_str(), p.id.c_str(), p.category.c_str(),
                 verdict_name(p.verdict), cut(p.evidence, 140).c_str());
  auto layers = r.layers();
  std::fprintf(out, "\n");
  if (layers.size() > 1)
    for (const auto& l : layers) std::fprintf(out, "layer %s: %s\n", l.c_str(), r.summary_line(l).c_str());
  std::fprintf(out, "%s\n", r.summary_line().c_str());
  std::fprintf(out, "%s (%zu probes in %.1f s)\n", r.passed() ? "RESULT: the sandbox held" : "RESULT: NOT HELD",
               r.probes.size(), r.seconds);
}

std::string render_html(const SuiteReport& r, const HtmlFrame* frame) {
  std::ostringstream h;
  bool ok = frame ? frame->ok : r.passed();
  int esc_n = r.count(Verdict::escaped), fail_n = r.count(Verdict::failed);
  h << "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
    << "<title>ExGuardian escape test: " << (ok ? "held" : "NOT HELD") << "</title>\n<style>\n"
    << "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:0;background:#f6f7f9;color:#1d2330}\n"
    << "main{max-width:1100px;margin:0 auto;padding:24px}\n"
    << "h1{font-size:1.6em;margin:0 0 4px}h2{margin-top:32px;border-bottom:2px solid #dde1e7;padding-bottom:4px}\n"
    << ".banner{border-radius:10px;padding:20px 24px;color:#fff;margin:16px 0}\n"
    << ".banner.ok{background:#1f7a44}.banner.bad{background:#b3261e}.banner.ok *,.banner.bad *{color:#fff}\n"
    << ".banner .big{font-size:1.8em;font-weight:700}.banner .line{font-size:1.1em;margin-top:6px}\n"
    << ".warn{background:#fff4ce;border:2px solid #e0a800;border-radius:8px;padding:10px 14px;margin:8px 0;font-weight:600}\n"
    << ".weak{background:#b3261e;color:#fff;border-color:#7a1712}\n"
    << "table{border-collapse:collapse;width:100%;background:#fff;font-size:.92em}\n"
    << "th,td{text-align:left;padding:6px 8px;border-bottom:1px solid #e6e8ec;vertical-align:top}\n"
    << "th{background:#eef0f4}code,pre{font-family:ui-monospace,'SFMono-Regular',Menlo,monospace;font-size:.9em}\n"
    << "pre{background:#f0f2f5;padding:6px 8px;border-radius:4px;white-space:pre-wrap;word-break:break-all;margin:4px 0}\n"
    << ".v{font-weight:700;border-radius:4px;padding:1px 6px;white-space:nowrap}\n"
    << ".v.held{background:#d7f0df;color:#1f7a44}.v.escaped{background:#b3261e;color:#fff}\n"
    << ".v.failed{background:#ffd8b0;color:#8a3b00}.v.skipped{background:#e4e6ea;color:#555}\n"
    << "tr.escaped td{background:#fde8e6}tr.failed td{background:#fff1e3}\n"
    << ".meta td:first-child{font-weight:600;width:180px}.cats span{display:inline-block;margin:2px 8px 2px 0}\n"
    << "details{margin:2px 0}summary{cursor:pointer;color:#335}.ok{color:#1f7a44}.no{color:#b3261e}\n"
    << "footer{color:#667;font-size:.85em;margin:32px 0}\n"
    << "table.grid td.cell a{color:inherit;text-decoration:none;display:block}td.cell.held{background:#d7f0df}\n"
    << "td.cell.escaped{background:#b3261e;color:#fff}td.cell.failed{background:#ffd8b0}td.cell.skipped{background:#eceef1;color:#555}\n"
    << "td.none{color:#aaa}.filter{margin:8px 0 12px}.filter select,.filter input{font-size:1em;margin-right:6px}\n"
    << "table.compare td small{color:#555}td.c-held{background:#d7f0df}td.c-escaped{background:#fde8e6}"
       "td.c-failed{background:#fff1e3}td.c-na,td.c-notrun{background:#f3f4f6;color:#555}\n"
    << "</style></head><body><main>\n";
  h << "<h1>ExGuardian escape test</h1>\n<div>The sandbox attacked itself the way an agent would; every verdict is "
       "checked from the other side too (host files, the test world's servers, the audit log).</div>\n";
  if (frame)
    h << "<div class=\"banner " << (ok ? "ok" : "bad") << "\"><div class=\"big\">" << esc(frame->big)
      << "</div><div class=\"line\">" << esc(frame->line) << "</div></div>\n";
  else
  h << "<div class=\"banner " << (ok ? "ok" : "bad") << "\"><div class=\"big\">"
    << (ok ? "HELD: nothing escaped"
           : esc_n ? "NOT HELD: " + std::to_string(esc_n) + " escape" + (esc_n == 1 ? "" : "s")
                   : fail_n ? "NOT HELD: " + std::to_string(fail_n) + " probe(s) failed"
                            : std::string("NOT HELD: required probes were skipped"))
    << "</div><div class=\"line\">" << esc(r.summary_line()) << "</div></div>\n";
  for (const auto& w : r.warnings)
    h << "<div class=\"warn" << (w.starts_with("SANDBOX DELIBERATELY WEAKENED") ? " weak" : "") << "\">" << esc(w)
      << "</div>\n";
  if (frame) h << frame->section;

  // Per category counts.
  std::map<std::string, std::map<Verdict, int>> cats;
  for (const auto& p : r.probes) cats[p.category][p.verdict]++;
  h << "<table class=\"meta\">\n";
  auto row = [&](const std::string& k, const std::string& v) { h << "<tr><td>" << esc(k) << "</td><td>" << v << "</td></tr>\n"; };
  row("Started", esc(r.started));
  char dur[32];
  std::snprintf(dur, sizeof dur, "%.1f s", r.seconds);
  row("Duration", dur);
  {
    auto layers = r.layers();
    std::string l = esc(r.layer);
    if (layers.size() > 1) {
      l += "<ul>";
      for (const auto& x : layers) l += "<li><b>" + esc(x) + "</b>: " + esc(r.summary_line(x)) + "</li>";
      l += "</ul>";
    }
    row("Layer", l);
  }
  row("Policy", "<code>" + esc(r.policy_file) + "</code>");
  std::string args;
  for (auto& a : r.run_args) args += (args.empty() ? "" : " ") + a;
  row("Extra run arguments", args.empty() ? "none" : "<code>" + esc(args) + "</code>");
  row("exguardian", "<code>" + esc(r.exguardian) + "</code>");
  if (r.host.contains("identity")) row("Host", "<code>" + esc(r.host["identity"].dump()) + "</code>");
  if (r.host.contains("user")) row("User", "<code>" + esc(r.host["user"].dump()) + "</code>");
  row("Network test world", r.world_up ? "built (no real address is ever contacted)" : "not built: " + esc(r.world_why));
  std::string c;
  for (auto& [cat, m] : cats) {
    c += "<span><b>" + esc(cat) + "</b>: ";
    bool first = true;
    for (auto& [v, n] : m) {
      c += std::string(first ? "" : ", ") + std::to_string(n) + " " + verdict_name(v);
      first = false;
    }
    c += "</span>";
  }
  row("By category", "<div class=\"cats\">" + c + "</div>");
  h << "</table>\n";

  write_grid(h, r);
  h << "<h2 id=\"probes\">Probes</h2>\n";
  write_filter(h, r);
  h << "<table><tr><th>#</th><th>Layer</th><th>Probe</th><th>Verdict</th><th>Command, expectation and evidence</th></tr>\n";
  int i = 0;
  // Escapes and failures first, then the rest in run order.
  std::vector<const ProbeResult*> order;
  for (auto want : {Verdict::escaped, Verdict::failed})
    for (const auto& p : r.probes) if (p.verdict == want) order.push_back(&p);
  for (const auto& p : r.probes) if (p.verdict != Verdict::escaped && p.verdict != Verdict::failed) order.push_back(&p);
  for (const auto* pp : order) {
    const auto& p = *pp;
    h << "<tr class=\"probe " << css_class(p.verdict) << "\" data-layer=\"" << esc(p.layer) << "\" data-cat=\""
      << esc(p.category) << "\" data-verdict=\"" << css_class(p.verdict) << "\"><td>" << ++i << "</td><td>" << esc(p.layer) << "</td><td><b>"
      << esc(p.id) << "</b><br><small>"
      << esc(p.category) << (p.required ? "" : " (optional)") << "</small></td><td><span class=\"v " << css_class(p.verdict)
      << "\">" << (p.verdict == Verdict::skipped ? "not run here" : verdict_name(p.verdict)) << "</span></td><td>";
    if (!p.command.empty()) h << "<pre>" << esc(p.command) << "</pre>";
    h << "<div><b>Must:</b> " << esc(p.expectation) << "</div>";
    if (p.verdict == Verdict::skipped)
      h << "<div><b>Not run on this layer, because:</b> " << esc(p.evidence) << "</div>";
    else
      h << "<div><b>Evidence:</b> " << esc(p.evidence) << "</div>";
    if (p.exit_status >= 0 || !p.output.empty()) {
      h << "<details><summary>exit " << p.exit_status << (p.timed_out ? " (timed out)" : "");
      if (!p.run_args.empty()) {
        std::string a;
        for (auto& x : p.run_args) a += " " + x;
        h << ", run with" << esc(a);
      }
      h << ", " << static_cast<int>(p.seconds * 1000) << " ms</summary>";
      if (!p.output.empty()) {
        h << "<pre>";
        for (auto& l : p.output) h << esc(plain_output_line(l, p.verdict)) << "\n";
        h << "</pre>";
      }
      h << "</details>";
    }
    h << "</td></tr>\n";
  }
  h << "</table>\n";

  h << "<h2>What this host can enforce (exguardian doctor)</h2>\n";
  if (r.host.contains("layers")) {
    h << "<table><tr><th>Layer</th><th></th><th>Why</th></tr>\n";
    for (auto& l : r.host["layers"])
      h << "<tr><td>" << esc(l.value("name", "")) << "</td><td class=\"" << (l.value("available", false) ? "ok\">available" : "no\">not available")
        << "</td><td>" << esc(l.value("why", "")) << "</td></tr>\n";
    h << "</table><br>\n";
  }
  if (r.host.contains("capabilities")) {
    h << "<table><tr><th>Capability</th><th></th><th>Detail</th></tr>\n";
    for (auto& c2 : r.host["capabilities"])
      h << "<tr><td>" << esc(c2.value("name", "")) << "</td><td class=\"" << (c2.value("ok", false) ? "ok\">yes" : "no\">no")
        << "</td><td>" << esc(c2.value("detail", "")) << "</td></tr>\n";
    h << "</table>\n";
  }
  h << "<footer>Verdicts: <b>held</b> the attack was refused (or the ordinary work worked) and the other side agrees; "
       "<b>ESCAPED</b> an attack got through; <b>FAILED</b> the expected outcome was not observed but nothing got out "
       "(ordinary work broken, a refusal missing from the audit log); <b>not run here</b> (skipped in the JSON) the probe "
       "does not apply to that layer or host, with why; optional ones do not fail the suite. "
       "Generated by <code>exguardian escape-test</code>.</footer>\n"
    << kFilterScript << "</main></body></html>\n";
  return h.str();
}

}  // namespace exg::evidence
