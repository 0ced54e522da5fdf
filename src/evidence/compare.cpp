#include "evidence/compare.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <sstream>

#include "evidence/documented_limits.hpp"
#include "evidence/foreign_sandbox.hpp"
#include "evidence/suite.hpp"

namespace exg::evidence {

namespace {

const char* const kStates[] = {"held", "ESCAPED", "FAILED", "not applicable", "not run"};

std::string esc(const std::string& s) { return html_escape(s); }

std::string cut(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n - 3) + "..."; }

const char* state_class(const std::string& st) {
  if (st == "held") return "c-held";
  if (st == "ESCAPED") return "c-escaped";
  if (st == "FAILED") return "c-failed";
  if (st == "not applicable") return "c-na";
  return "c-notrun";
}

// The probe ids in the order they first ran, with their category.
std::vector<std::pair<std::string, std::string>> rows_of(const SuiteReport& r) {
  std::vector<std::pair<std::string, std::string>> rows;
  for (const auto& p : r.probes)
    if (std::none_of(rows.begin(), rows.end(), [&](const auto& x) { return x.first == p.id; }))
      rows.emplace_back(p.id, p.category);
  return rows;
}

const ProbeResult* cell(const SuiteReport& r, const std::string& column, const std::string& id) {
  for (const auto& p : r.probes)
    if (p.layer == column && p.id == id) return &p;
  return nullptr;
}

// state -> count, over a column's probes (of one category when cat is set).
std::map<std::string, int> counts(const SuiteReport& r, const std::string& column, const std::string* cat = nullptr) {
  std::map<std::string, int> m;
  for (const auto* st : kStates) m[st] = 0;
  for (const auto& p : r.probes)
    if (p.layer == column && (!cat || p.category == *cat)) m[cell_state(p)]++;
  return m;
}

std::string counts_line(const std::map<std::string, int>& m) {
  std::string s;
  for (const auto* st : kStates)
    if (m.at(st)) s += (s.empty() ? "" : ", ") + std::to_string(m.at(st)) + " " + st;
  return s.empty() ? "-" : s;
}

// A peer's escape that its own documentation says it does not stop (none for ExGuardian's column).
const DocumentedLimit* finding_of(const std::string& column, const ProbeResult& p) {
  if (column == kExguardianColumn || p.verdict != Verdict::escaped) return nullptr;
  return documented_limit(column, p.id, p.category);
}

}  // namespace

std::string cell_state(const ProbeResult& p) {
  switch (p.verdict) {
    case Verdict::held: return "held";
    case Verdict::escaped: return "ESCAPED";
    case Verdict::failed: return "FAILED";
    case Verdict::skipped: return p.evidence.starts_with(kNotApplicable) ? "not applicable" : "not run";
  }
  return "not run";
}

int compare_status(const CompareReport& r) {
  if (r.tool_failed) return 1;
  for (const auto& c : r.columns)
    if (c.name == kExguardianColumn) {
      if (!c.not_run.empty()) return 1;
      for (const auto& p : r.all.probes)
        if (p.layer == c.name && (p.verdict == Verdict::escaped || p.verdict == Verdict::failed ||
                                  (p.verdict == Verdict::skipped && p.required)))
          return 1;
    }
  return 0;
}

nlohmann::json compare_json(const CompareReport& r) {
  nlohmann::json j = to_json(r.all);
  nlohmann::json cols = nlohmann::json::array();
  for (const auto& c : r.columns) {
    nlohmann::json cats = nlohmann::json::object();
    for (const auto& [id, cat] : rows_of(r.all)) {
      (void)id;
      if (!cats.contains(cat)) cats[cat] = counts(r.all, c.name, &cat);
    }
    cols.push_back({{"name", c.name},
                    {"about", c.about},
                    {"command", c.command},
                    {"version", c.version},
                    {"not_run", c.not_run},
                    {"status", c.status},
                    {"seconds", c.seconds},
                    {"summary", counts(r.all, c.name)},
                    {"by_category", cats}});
  }
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& [id, cat] : rows_of(r.all)) {
    nlohmann::json cells = nlohmann::json::object();
    for (const auto& c : r.columns) {
      const ProbeResult* p = cell(r.all, c.name, id);
      if (!p) cells[c.name] = {{"state", "not run"}, {"evidence", c.not_run.empty() ? "not in this column's catalogue" : c.not_run}};
      else {
        cells[c.name] = {{"state", cell_state(*p)}, {"evidence", p->evidence}, {"exit_status", p->exit_status}};
        if (const auto* f = finding_of(c.name, *p))
          cells[c.name]["finding"] = {{"documented_limit", f->limit}, {"source", f->source}};
      }
    }
    rows.push_back({{"id", id}, {"category", cat}, {"cells", cells}});
  }
  j["compare"] = {{"columns", cols},
                  {"rows", rows},
                  {"status", compare_status(r)},
                  {"tool_failed", r.tool_failed},
                  {"note", "a peer's escape is a finding about that peer, not a failure of the tool: the exit status "
                           "is non-zero only when ExGuardian's own column has an escape (or a failure) or the tool "
                           "itself failed; a cell's finding cites the peer's own documentation where it says the "
                           "peer does not stop that (in the configuration its preset models)"}};
  return j;
}

void write_compare_text(std::FILE* out, const CompareReport& r) {
  std::fprintf(out, "exguardian escape-test --compare\n");
  for (const auto& w : r.all.warnings) std::fprintf(out, "!! %s\n", w.c_str());
  for (const auto& c : r.columns)
    std::fprintf(out, "column %s: %s%s\n", c.name.c_str(), c.version.empty() ? "" : (c.version + "; ").c_str(),
                 c.not_run.empty() ? c.command.c_str() : ("NOT RUN: " + c.not_run).c_str());
  std::fprintf(out, "%-34s", "ID");
  for (const auto& c : r.columns) std::fprintf(out, " %-15s", cut(c.name, 15).c_str());
  std::fprintf(out, "\n");
  for (const auto& [id, cat] : rows_of(r.all)) {
    std::fprintf(out, "%-34s", id.c_str());
    for (const auto& c : r.columns) {
      const ProbeResult* p = cell(r.all, c.name, id);
      std::fprintf(out, " %-15s", p ? cell_state(*p).c_str() : "not run");
    }
    std::fprintf(out, "\n");
  }
  std::fprintf(out, "\n");
  for (const auto& c : r.columns)
    std::fprintf(out, "%s: %s (%.1f s)\n", c.name.c_str(), counts_line(counts(r.all, c.name)).c_str(), c.seconds);
  int st = compare_status(r);
  std::fprintf(out, "RESULT: %s (%zu results in %.1f s; a peer's escape is a finding about the peer)\n",
               r.tool_failed ? "the tool failed"
               : st == 0     ? "ExGuardian held"
                             : "ExGuardian NOT HELD",
               r.all.probes.size(), r.all.seconds);
}

std::string render_compare_html(const CompareReport& r) {
  std::ostringstream h;
  h << "<h2>Side by side</h2>\n<p>The same probes in the same world against each sandbox. A peer's escape is a "
       "finding about that peer, reported as seen, with the limit its own documentation states where it "
       "states one (<i>documented limit</i>); <b>not applicable</b> says why a probe needs ExGuardian's own "
       "machinery; <b>not run</b> says why it was not run there (with no sandbox: unsafe without one).</p>\n";
  h << "<table class=\"meta\"><tr><th>Sandbox</th><th>Version</th><th>Every probe ran as</th><th>Summary</th></tr>\n";
  for (const auto& c : r.columns)
    h << "<tr><td><b>" << esc(c.name) << "</b><br><small>" << esc(c.about) << "</small></td><td><code>"
      << esc(c.version) << "</code></td><td><code>" << esc(c.not_run.empty() ? c.command : "NOT RUN: " + c.not_run)
      << "</code></td><td>" << esc(counts_line(counts(r.all, c.name))) << "</td></tr>\n";
  h << "</table>\n<h3>By category</h3>\n<table class=\"compare\"><tr><th>Category</th>";
  for (const auto& c : r.columns) h << "<th>" << esc(c.name) << "</th>";
  h << "</tr>\n";
  std::vector<std::string> cats;
  for (const auto& [id, cat] : rows_of(r.all))
    if (std::find(cats.begin(), cats.end(), cat) == cats.end()) cats.push_back(cat);
  for (const auto& cat : cats) {
    h << "<tr><td><b>" << esc(cat) << "</b></td>";
    for (const auto& c : r.columns) {
      auto m = counts(r.all, c.name, &cat);
      h << "<td class=\"" << (m["ESCAPED"] ? "c-escaped" : m["FAILED"] ? "c-failed" : m["held"] ? "c-held" : "c-na") << "\">"
        << esc(counts_line(m)) << "</td>";
    }
    h << "</tr>\n";
  }
  h << "</table>\n<h3>By probe</h3>\n<table class=\"compare\"><tr><th>Probe</th>";
  for (const auto& c : r.columns) h << "<th>" << esc(c.name) << "</th>";
  h << "</tr>\n";
  for (const auto& [id, cat] : rows_of(r.all)) {
    h << "<tr><td><b>" << esc(id) << "</b><br><small>" << esc(cat) << "</small></td>";
    for (const auto& c : r.columns) {
      const ProbeResult* p = cell(r.all, c.name, id);
      std::string st = p ? cell_state(*p) : "not run";
      std::string ev = p ? p->evidence : c.not_run;
      h << "<td class=\"" << state_class(st) << "\" title=\"" << esc(ev) << "\"><b>" << esc(st) << "</b><br><small>"
        << esc(cut(ev, 160)) << "</small>";
      if (const auto* f = p ? finding_of(c.name, *p) : nullptr)
        h << "<br><small class=\"finding\">documented limit: " << esc(f->limit) << " (" << esc(f->source) << ")</small>";
      h << "</td>";
    }
    h << "</tr>\n";
  }
  h << "</table>\n";
  HtmlFrame f;
  int st = compare_status(r);
  f.ok = st == 0;
  f.big = r.tool_failed ? "The tool failed" : st == 0 ? "ExGuardian held" : "ExGuardian NOT HELD";
  for (const auto& c : r.columns) f.line += (f.line.empty() ? "" : " | ") + c.name + ": " + counts_line(counts(r.all, c.name));
  f.section = h.str();
  return render_html(r.all, &f);
}

std::string program_version(const std::vector<std::string>& argv) {
  int fds[2];
  if (argv.empty() || ::pipe2(fds, O_CLOEXEC) != 0) return "";
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    int nul = ::open("/dev/null", O_RDONLY);
    ::dup2(nul, 0);
    std::vector<char*> a;
    for (const auto& x : argv) a.push_back(const_cast<char*>(x.c_str()));
    a.push_back(nullptr);
    ::execvp(a[0], a.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  std::string out;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0 && out.size() < 4096;) out.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int st = 0;
  if (pid > 0) ::waitpid(pid, &st, 0);
  if (pid < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return "";
  auto e = out.find('\n');
  return out.substr(0, e);
}

}  // namespace exg::evidence
