#include "microvm/view.hpp"

#include <algorithm>

namespace exg::microvm {

namespace {

// The guest mounts its own proc, sysfs and /dev: nothing of qemu's goes there.
bool guest_owned(const std::string& t) {
  for (const char* d : {"/proc", "/sys", "/dev"}) {
    std::string s = d;
    if (t == s || t.starts_with(s + "/")) return true;
  }
  return false;
}

std::string under_view(const std::string& t) { return t == "/" ? std::string(kViewRoot) : kViewRoot + t; }

}  // namespace

plan::Plan with_exported_view(const plan::Plan& plan) {
  plan::Plan out = plan;
  // The view's own root: an empty tmpfs, sealed read-only by the copy of the
  // plan's "ReadOnly /" step when there is one, else at the end.
  plan::Step root{plan::StepKind::Tmpfs, "", kViewRoot, "microvm: root of the guest's view (9p export)"};
  out.steps.push_back(root);
  // Mount points for the guest's own filesystems (made while the root is still
  // writable), each an empty read-only tmpfs.
  for (const char* d : {"/proc", "/sys", "/dev"}) {
    plan::Step m{plan::StepKind::MaskDir, "", under_view(d), "microvm view: the guest mounts its own here"};
    out.steps.push_back(m);
  }
  bool sealed = false;
  for (const auto& s : plan.steps) {
    if (guest_owned(s.target)) continue;
    if (s.target == "/" && s.kind == plan::StepKind::Tmpfs) continue;  // the root above
    plan::Step c = s;
    c.target = under_view(s.target);
    if (s.kind == plan::StepKind::ProtectRo || s.kind == plan::StepKind::Pin) c.source = under_view(s.source);
    c.why = "microvm view: " + s.why;
    // A mask that is passed through (an allowRead path or a masked credential
    // copy inside) must be readable here: qemu's 9p server opens every directory
    // of a walk for reading, so at 0111 the guest got EACCES for what it may
    // read. The mask is an empty tmpfs: listing it shows only those names.
    if (s.kind == plan::StepKind::MaskDir && s.mode == 0111) c.mode = 0555;
    if (s.kind == plan::StepKind::ReadOnly && s.target == "/") sealed = true;
    out.steps.push_back(std::move(c));
  }
  if (!sealed) out.steps.push_back({plan::StepKind::ReadOnly, "", kViewRoot, "microvm view: root read-only"});
  std::vector<std::string> rw;
  for (const auto& p : plan.landlock.read_write)
    if (!guest_owned(p)) rw.push_back(under_view(p));
  out.landlock.read_write.insert(out.landlock.read_write.end(), rw.begin(), rw.end());
  return out;
}

std::vector<guest::ScratchDir> guest_scratch_dirs(const plan::Plan& plan, bool disk) {
  using guest::strictly_below;
  auto at_or_below = [](const std::string& p, const std::string& dir) { return p == dir || strictly_below(p, dir); };
  std::vector<guest::ScratchDir> dirs;
  for (const auto& s : plan.steps) {
    if (s.kind != plan::StepKind::Tmpfs || s.target == "/" || guest_owned(s.target)) continue;
    if (!guest::scratch_path_ok(s.target)) continue;
    bool sealed = false;
    for (const auto& r : plan.steps)
      if (r.kind == plan::StepKind::ReadOnly && r.target != "/" && at_or_below(s.target, r.target)) sealed = true;
    if (sealed) continue;
    dirs.push_back({s.target, s.mode, {}, disk && s.target == "/var/tmp" ? guest::kOnDiskDir : guest::kOnTmpfs});
  }
  if (disk)
    for (const char* o : kDiskOverlays)
      if (std::none_of(dirs.begin(), dirs.end(), [&](const guest::ScratchDir& d) { return at_or_below(o, d.path); }))
        // First: a tmpfs directory the plan makes below it is mounted over it.
        dirs.insert(dirs.begin(), {o, 0755, {}, guest::kOnDiskOverlay});
  if (disk)
    // Directories of the disk of their own over the overlay: the host's may be
    // unreadable to qemu's uid (podman leaves /var/lib/containers 0700), which
    // an overlay could not copy up.
    for (const char* d : kDiskStores)
      if (std::none_of(dirs.begin(), dirs.end(), [&](const guest::ScratchDir& x) { return x.path == d; }))
        dirs.push_back({d, 0700, {}, guest::kOnDiskDir});
  for (auto& d : dirs) {
    // Below d, not inside a scratch directory nested in d (that one carries its own).
    auto mine = [&](const std::string& t) {
      if (!strictly_below(t, d.path)) return false;
      for (const auto& o : dirs)
        if (o.path != d.path && strictly_below(o.path, d.path) && at_or_below(t, o.path)) return false;
      return true;
    };
    std::vector<std::string> all;
    for (const auto& s : plan.steps)
      if (s.kind != plan::StepKind::ReadOnly && s.kind != plan::StepKind::Tmpfs && mine(s.target)) all.push_back(s.target);
    // A carried directory brings everything below it (in the guest it is one
    // 9p tree): keep the outermost only, in plan order.
    for (const auto& t : all) {
      bool covered = false;
      for (const auto& o : all)
        if (strictly_below(t, o)) covered = true;
      if (!covered && std::find(d.carry.begin(), d.carry.end(), t) == d.carry.end()) d.carry.push_back(t);
    }
  }
  return dirs;
}

}  // namespace exg::microvm
