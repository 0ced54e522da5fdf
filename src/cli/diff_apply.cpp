#include "cli/diff_apply.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "plan/protect.hpp"
#include "sandbox/overlay_apply.hpp"

namespace exg::cli {

namespace {

int bad(const std::string& what) {
  std::fprintf(stderr, "exguardian: %s\n", what.c_str());
  return 125;
}

sandbox::ApplyOptions options_for(const sandbox::LayerDirs& l) {
  sandbox::ApplyOptions opt;
  std::ifstream in(l.dir + "/protect");
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') opt.extra_names.push_back(line);
  opt.quarantine_dir = l.dir + "/quarantine";
  opt.worktree_roots.push_back(l.workspace);  // as the run's own apply would judge a snapshot's core.worktree
  // What the workspace's git directories point at (hooksPath, symlinked hooks), as of now.
  const char* home = std::getenv("HOME");
  opt.pointers = plan::find_protected_all(l.workspace, {false, opt.extra_names, home ? home : ""}).pointers;
  return opt;
}

int run(const std::string& dir, const std::string& workspace, bool apply) {
  if (dir.empty()) return bad(std::string(apply ? "apply" : "diff") + ": needs the kept layer directory");
  auto l = sandbox::read_layer_dirs(dir);
  if (!l) return bad((apply ? "apply: " : "diff: ") + l.error().str());
  if (!workspace.empty()) l->workspace = workspace;
  auto opt = options_for(*l);
  auto r = apply ? sandbox::apply_upper(l->upper, l->workspace, opt) : sandbox::diff_upper(l->upper, l->workspace, opt);
  if (!r) return bad((apply ? "apply: " : "diff: ") + r.error().str());
  for (const auto& line : sandbox::report_lines(*r)) std::printf("%s\n", line.c_str());
  std::fflush(stdout);
  return apply && !r->quarantined.empty() ? 1 : 0;
}

}  // namespace

int diff_main(const std::string& dir) { return run(dir, {}, false); }

int apply_main(const std::string& dir, const std::string& workspace) { return run(dir, workspace, true); }

}  // namespace exg::cli
