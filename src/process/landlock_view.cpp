#include "process/landlock_view.hpp"

#include <dirent.h>
#include <fcntl.h>

#include <algorithm>
#include <string_view>

#include "util/dir_fd.hpp"

namespace exg::process {

namespace {

bool under(const std::string& path, const std::string& tree) {
  return path == tree || tree == "/" || (path.size() > tree.size() && path.starts_with(tree) && path[tree.size()] == '/');
}

std::string child_path(const std::string& dir, std::string_view name) {
  return (dir == "/" ? std::string("/") : dir + "/") + std::string(name);
}

}  // namespace

Result<std::vector<std::string>> readable_roots(const std::vector<std::string>& denied, size_t max_rules) {
  return readable_beneath("/", denied, max_rules);
}

namespace {

// The walk of readable_beneath(): the denied paths are validated and absolute.
struct BeneathWalk {
  const std::vector<std::string>& denied;
  size_t max_rules;
  std::vector<std::string> out;

  Result<void> visit(const std::string& dir) {
    // The denied paths strictly below dir, each as its first component below
    // it and whether that is all of it (denied) or a directory on its way:
    // entries are judged against these few names, not against every path.
    std::vector<std::pair<std::string_view, bool>> below;
    size_t base = dir == "/" ? 1 : dir.size() + 1;
    for (const auto& d : denied)
      if (d.size() > base && under(d, dir)) {
        std::string_view rest = std::string_view(d).substr(base);
        size_t slash = rest.find('/');
        below.emplace_back(rest.substr(0, slash), slash == std::string_view::npos);
      }
    UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd) return {};  // not listable by the invoker: its entries stay unreadable (errs closed)
    std::vector<std::pair<std::string, unsigned char>> entries;
    if (!list_dir(fd.get(), [&](std::string_view name, unsigned char type) { entries.emplace_back(name, type); }))
      return {};
    fd.reset();
    std::sort(entries.begin(), entries.end());
    for (const auto& [name, type] : entries) {
      bool is_denied = false, on_the_way = false;
      for (const auto& [first, whole] : below)
        if (first == name) (whole ? is_denied : on_the_way) = true;
      if (is_denied) continue;
      // A path on the way to a denied one: no rule of its own, its entries judged one by one.
      if (on_the_way) {
        if (type == DT_DIR)
          if (auto r = visit(child_path(dir, name)); !r) return r;
        continue;  // a symlink or file where a denied path's parent should be: nothing beneath to grant
      }
      // A symlink is not granted: its target is judged where it lies (a rule on
      // a link would follow it, perhaps into a denied tree).
      if (type == DT_LNK) continue;
      out.push_back(child_path(dir, name));
      if (out.size() > max_rules)
        return fail(Error::msg("landlock layer", "denyRead lies in directories with more than " +
                                                     std::to_string(max_rules) +
                                                     " entries on the way to it; Landlock would need a rule for each"));
    }
    return {};
  }
};

}  // namespace

Result<std::vector<std::string>> readable_beneath(const std::string& root, const std::vector<std::string>& denied,
                                                  size_t max_rules) {
  for (const auto& d : denied)
    if (d.empty() || d[0] != '/' || d == "/")
      return fail(Error::msg("landlock layer", "cannot deny reading " + (d.empty() ? std::string("\"\"") : d) +
                                                   ": not an absolute path below /"));
  for (const auto& d : denied)
    if (under(root, d)) return std::vector<std::string>{};  // the whole tree is denied
  if (std::none_of(denied.begin(), denied.end(), [&](const std::string& d) { return under(d, root); }))
    return std::vector<std::string>{root};
  BeneathWalk w{denied, max_rules, {}};
  if (auto r = w.visit(root); !r) return fail(r.error());
  return std::move(w.out);
}

Result<LandlockView> landlock_view(const plan::Plan& plan, const std::string& private_tmp) {
  using plan::StepKind;
  if (plan.identity.invoked_as_root && (plan.identity.synthetic || plan.identity.host_uid == 0))
    return fail(Error::msg("landlock layer",
                           "invoked as root with a workspace root owns: the command cannot run as root here (uid 0 "
                           "without capabilities still reads and writes every file root owns), and an unused uid "
                           "cannot write the workspace without idmapped mounts, which need a user namespace; give "
                           "the workspace to an ordinary user (chown) or run exguardian as one"));
  LandlockView v;
  auto& r = v.rules;
  r.handle_reads = true;  // also TRUNCATE: no read-only mount stops truncate(2) here
  r.handle_net = true;    // the host's network: TCP connect to the proxy's ports only, no bind
  r.required = true;
  r.scope_signals = r.scope_abstract_unix = true;
  // Existing files written outside the writable trees: the harmless devices
  // only (not all of /dev: a device node root's DAC allows, not /proc).
  r.write_files = {"/dev/null", "/dev/zero", "/dev/full", "/dev/tty"};
  if (!private_tmp.empty()) r.read_write.push_back(private_tmp);
  bool tmp_said = false;
  // What the process layer shows of the host's temporary trees (below).
  std::vector<std::string> shown;
  bool minimal_dev = false;  // the process layer's /dev holds only its device nodes and own ptys
  for (const auto& s : plan.steps) {
    switch (s.kind) {
      case StepKind::BindRw:
        if (s.source != s.target)
          return fail(Error::msg("landlock layer", "the writable bind of " + s.source + " at " + s.target +
                                                       " needs a mount; without namespaces a path is where it is"));
        r.read_write.push_back(s.target);
        break;
      case StepKind::Overlay:
        // A tree holding a writable credential copy: writable here as its live bind
        // would be; the copy cannot be put in (no mounts), so the file below is
        // denied inside a writable tree, which refuses the run (fail closed).
        if (s.credential_tree) {
          r.read_write.push_back(s.target);
          break;
        }
        if (s.target == plan.workspace)
          return fail(Error::msg("landlock layer", std::string("workspace mode ") + plan::to_string(plan.workspace_mode) +
                                                       " needs an overlay mount; this layer runs the workspace live "
                                                       "(--workspace-mode live) or not at all"));
        v.cautions.push_back(s.target + " is read-only here (the process layer gives it a throwaway writable layer)");
        shown.push_back(s.target);
        break;
      case StepKind::Tmpfs:
        if (s.target == "/dev") minimal_dev = true;
        if ((s.target == "/tmp" || s.target == "/var/tmp" || s.target == "/dev/shm") && !tmp_said) {
          tmp_said = true;
          v.cautions.push_back("the host's /tmp, /var/tmp and /dev/shm are unreadable and unwritable but for what "
                               "the process layer would show there (the workspace, HOME, allowRead, allowWrite); "
                               "TMPDIR is a private directory of this run");
        }
        break;
      case StepKind::MaskDir:
        v.denied.push_back(s.target);
        break;
      case StepKind::MaskFile:
        if (!s.if_present) v.denied.push_back(s.target);  // (a host socket: the supervisor's gate judges connect())
        break;
      case StepKind::File:
        if (s.trust_bundle) {
          v.trust_bundle = true;
        } else if (!(plan.proxy.transparent && s.target == "/etc/hosts")) {
          v.denied.push_back(s.target);
          v.cautions.push_back(s.target + " is unreadable here instead of its masked copy");
        }
        break;
      case StepKind::ProtectRo:
        // (a denyWrite entry is made a step only inside a writable tree: Landlock cannot take the
        // write right away below it, and without a mount nothing else can; protected names: the sweep)
        if (s.deny_write)
          return fail(Error::msg("landlock layer", "cannot deny writing " + s.target + " (" + s.why +
                                                       ") inside a writable tree: Landlock cannot take a tree's "
                                                       "rights away below it, and this layer makes no mounts"));
        break;
      case StepKind::DevNode:
        shown.push_back(s.target);
        break;
      case StepKind::Devpts:  // (the host's here: a session's agent opens its terminals there)
        shown.insert(shown.end(), {s.target, "/dev/ptmx"});
        break;
      case StepKind::BindRo:
        if (s.source != s.target)
          v.cautions.push_back(s.source + " is not also at " + s.target + " here (no mounts)");
        shown.push_back(s.source);
        break;
      default:  // the host's own /proc, /sys, /dev, /run and names; protected names: see below
        break;
    }
  }
  for (const auto& d : v.denied)
    for (const auto& w : r.read_write)
      if (under(d, w))
        return fail(Error::msg("landlock layer", "cannot deny reading " + d + " inside the writable tree " + w +
                                                     ": Landlock cannot take a tree's rights away below it"));
  // The host's temporary trees are where sibling sandboxes of the same uid
  // keep their private TMPDIRs, fresh workspaces and serve's or mcp's state:
  // unreadable as trees (the process layer mounts its own over them), readable
  // only where a writable tree (the workspace, TMPDIR, allowWrite) or what the
  // process layer shows (HOME, allowRead, exguardian itself) lies inside them.
  // (Landlock grants are inherited by what appears later beneath them: a rule
  // on /tmp would show every sibling made after the start.)
  // /dev likewise where the process layer's is minimal: its device nodes and
  // ptys, not the host's disks, and a hundred rules fewer than its entries.
  // A writable tree holding a whole temporary tree (a workspace at /tmp) would
  // hold the siblings' directories too, writable: refused.
  std::vector<std::string> hidden = v.denied;
  for (const char* t : kHostTempTrees) {
    for (const auto& w : r.read_write)
      if (under(t, w))
        return fail(Error::msg("landlock layer", "the writable tree " + w + " holds the host's " + t +
                                                     ", where other sandboxes of this uid keep their private "
                                                     "directories, and Landlock cannot take them out of it; give "
                                                     "a directory inside it instead"));
    if (!(minimal_dev && under(t, "/dev"))) hidden.push_back(t);
  }
  if (minimal_dev) hidden.push_back("/dev");
  auto roots = readable_roots(hidden, kMaxReadRules);
  if (!roots) return fail(roots.error());
  r.read_only = std::move(*roots);
  for (const auto& p : shown) {
    bool in_temp = std::any_of(hidden.begin() + static_cast<std::ptrdiff_t>(v.denied.size()), hidden.end(),
                               [&](const std::string& t) { return under(p, t); });
    bool denied = std::any_of(v.denied.begin(), v.denied.end(), [&](const std::string& d) { return under(p, d); });
    if (!in_temp || denied) continue;
    if (std::any_of(std::begin(kHostTempTrees), std::end(kHostTempTrees), [&](const char* t) { return under(t, p); })) {
      v.cautions.push_back(p + " is unreadable here: it is the host's shared temporary tree (other sandboxes' "
                               "private directories are in it)");
      continue;
    }
    auto beneath = readable_beneath(p, v.denied, kMaxReadRules - std::min(kMaxReadRules, r.read_only.size()));
    if (!beneath) return fail(beneath.error());
    r.read_only.insert(r.read_only.end(), beneath->begin(), beneath->end());
  }
  if (!plan.protect_extra.empty() || !plan.swept_trees.empty())
    v.cautions.push_back("protected names in the workspace (.git/hooks, .git/config, ...) are not read-only during the "
                         "run: the end-of-run sweep quarantines what was planted");
  if (plan.proxy.transparent || plan.proxy.resolver)
    v.cautions.push_back("no transparent egress or in-sandbox resolver: only clients that use the proxy variables "
                         "reach the network");
  return v;
}

}  // namespace exg::process
