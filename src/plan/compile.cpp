// Policy + invocation -> Plan. Resolves paths, chooses the identity, lays out
// the mounts in an order where later (deeper, stricter) steps win, and builds
// the environment. Reads the filesystem, never changes it.
#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <string_view>

#include "egress/rules.hpp"
#include "egress/transparent.hpp"
#include "plan/git_pointers.hpp"
#include "plan/host_sockets.hpp"
#include "plan/paths.hpp"
#include "plan/plan.hpp"
#include "plan/proxy_env.hpp"
#include "plan/protect.hpp"
#include "plan/secrets.hpp"
#include "util/dir_fd.hpp"
#include "util/proc_text.hpp"
#include "util/unique_fd.hpp"

namespace exg::plan {

namespace {

// The host file a generated one is bound over (/etc/resolv.conf, /etc/hosts):
// when it is a symlink (systemd-resolved's stub file under /run), what it points
// to. None when nothing is there (a container started without a network has no
// resolv.conf; a dangling link to a resolver that is not running): a sandbox
// sees the host's /etc read-only, where no mount point can be made, so the plan
// leaves the file out and says so instead of failing at set-up.
// (One lstat says all of it for a file that is not a link: three stats before.)
std::optional<std::string> host_file_to_cover(const std::string& path) {
  std::string target = path;
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return std::nullopt;
  if (S_ISLNK(st.st_mode)) {
    std::error_code ec;
    auto real = std::filesystem::weakly_canonical(target, ec);
    if (!ec && real.is_absolute()) target = real.string();
    if (::stat(target.c_str(), &st) != 0) return std::nullopt;
  }
  if (S_ISDIR(st.st_mode)) return std::nullopt;
  return target;
}

// Transparent egress's pinned names (ProxyPlan::pinned_names): each exact name
// of network.allowedDomains ("host" or "host:port", no wildcard, no literal)
// that the rules allow to be looked up, normalised, once, in policy order. A
// name that resolves outside to a refused address still gets its address
// here: the proxy refuses the connection instead of the lookup (and logs it).
std::vector<std::string> pinned_allowed_names(const policy::Network& net) {
  constexpr size_t kMaxPinned = 1024;  // a hosts file glibc reads on every lookup stays small
  std::vector<std::string> out;
  if (net.allowed_domains.empty()) return out;  // (no rules made for nothing to pin: their code is paged in for it)
  auto rules = egress::Rules::from_policy(net);
  if (!rules) return out;  // the proxy refuses to start with the same error
  for (const auto& d : net.allowed_domains) {
    if (out.size() >= kMaxPinned) break;
    std::string_view p = d.pattern;
    if (p.find('*') != std::string_view::npos || p.starts_with("[")) continue;
    if (auto colon = p.rfind(':'); colon != std::string_view::npos) p = p.substr(0, colon);
    auto host = egress::normalise_host(p);
    if (!host || host->literal || !rules->check_name(*host).allowed) continue;
    if (std::find(out.begin(), out.end(), host->name) == out.end()) out.push_back(host->name);
  }
  return out;
}

// A path's canonical form where it exists, else its deepest existing
// ancestor's canonical form with the rest appended.
std::string canonical_prefix(const std::string& p) {
  std::string head = p, tail;
  while (!head.empty() && head != "/") {
    if (auto c = canonical(head)) return *c + tail;
    auto s = head.rfind('/');
    tail = head.substr(s) + tail;
    head = s == 0 ? "/" : head.substr(0, s);
  }
  return p;
}

std::string random_hex(size_t bytes) {
  unsigned char buf[32];
  if (::getrandom(buf, bytes, 0) != static_cast<ssize_t>(bytes)) {
    for (size_t i = 0; i < bytes; ++i) buf[i] = static_cast<unsigned char>(::rand());
  }
  // Two digits a byte by hand: snprintf's first call pages in the printf machinery.
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s(2 * bytes, '0');
  for (size_t i = 0; i < bytes; ++i) {
    s[2 * i] = kDigits[buf[i] >> 4];
    s[2 * i + 1] = kDigits[buf[i] & 15];
  }
  return s;
}

// Local accounts' uids, read straight from /etc/passwd: NSS (systemd-userdb,
// sssd, ...) would cost more than the rest of the plan for a uid that is
// chosen far above any allocation range anyway.
std::set<uid_t> local_uids() {
  std::set<uid_t> uids;
  // read(2), not stdio; pieces as fgets into 1024 bytes gave them (a longer line in several).
  std::string text = util::read_proc_text("/etc/passwd");
  for (size_t at = 0; at < text.size();) {
    size_t nl = text.find('\n', at);
    size_t end = std::min({nl == std::string::npos ? text.size() : nl + 1, at + 1023, text.size()});
    std::string line = text.substr(at, end - at);
    at = end;
    const char* p = std::strchr(line.c_str(), ':');
    if (p) p = std::strchr(p + 1, ':');
    if (p) uids.insert(static_cast<uid_t>(std::strtoul(p + 1, nullptr, 10)));
  }
  return uids;
}

// A host uid no local account owns, in [1.5e9, 1.5e9 + 2^20): far above the
// ranges useradd, subuid and systemd allocate from.
uid_t pick_synthetic_uid() {
  auto taken = local_uids();
  for (int tries = 0; tries < 64; ++tries) {
    uint32_t r = 0;
    if (::getrandom(&r, sizeof r, 0) != sizeof r) r = static_cast<uint32_t>(::getpid()) * 2654435761u;
    uid_t u = 1500000000u + (r % (1u << 20));
    if (!taken.count(u)) return u;
  }
  return 1500000000u;
}

size_t depth(const std::string& p) { return std::count(p.begin(), p.end(), '/'); }

bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

struct Builder {
  const policy::Policy& pol;
  const Context& ctx;
  Plan plan;
  std::vector<std::string> writable;  // canonical host paths bound read-write
  std::map<std::string, std::string> secret_env_;  // NAME -> placeholder (or the variable with it in place of the value)
  std::string owner_name_;  // invoked as root: the workspace owner's user name, from the one passwd lookup

  Step& add(StepKind k, std::string target, std::string source = {}, std::string why = {}) {
    Step s;
    s.kind = k;
    s.target = std::move(target);
    s.source = std::move(source);
    s.why = std::move(why);
    plan.steps.push_back(std::move(s));
    return plan.steps.back();
  }

  // Root invoking: a writable tree owned by someone else than the sandbox uid is
  // bound through an idmapped mount, so the code writes as itself and the files
  // keep their real owner on disk.
  void maybe_idmap(Step& s) {
    if (!plan.identity.invoked_as_root) return;
    struct stat st;
    if (::stat(s.source.c_str(), &st) != 0) return;
    if (st.st_uid == plan.identity.host_uid) return;
    s.idmap = true;
    s.idmap_from_uid = st.st_uid;
    s.idmap_from_gid = st.st_gid;
  }

  Result<void> identity(const std::string& ws) {
    Identity& id = plan.identity;
    if (ctx.uid != 0) {
      id.host_uid = id.inside_uid = ctx.uid;
      id.host_gid = id.inside_gid = ctx.gid;
      id.why = "the invoking user, through a user namespace";
      return {};
    }
    id.invoked_as_root = true;
    struct stat st;
    if (::stat(ws.c_str(), &st) != 0) return fail(Error::sys("workspace " + ws));
    if (st.st_uid != 0) {
      id.host_uid = st.st_uid;
      passwd* pw = ::getpwuid(st.st_uid);
      id.host_gid = pw ? pw->pw_gid : st.st_gid;
      if (pw) owner_name_ = pw->pw_name;  // USER and LOGNAME (build_env): not looked up a second time
      id.why = "invoked as root: runs as the workspace owner";
    } else {
      id.synthetic = true;
      id.host_uid = pick_synthetic_uid();
      id.host_gid = id.host_uid;
      id.why = "invoked as root and the workspace belongs to root: runs as an unused high uid, "
               "writes go through idmapped mounts and stay owned by root on disk";
    }
    id.inside_uid = id.host_uid;
    id.inside_gid = id.host_gid;
    return {};
  }

  void base() {
    // The host's top-level directories, read-only; the ones the sandbox gets
    // its own copy of are skipped.
    static const std::set<std::string> skip = {"proc", "sys", "dev", "tmp", "run", "lost+found"};
    DIR* d = ::opendir("/");
    std::vector<std::pair<std::string, unsigned char>> entries;
    while (dirent* e = d ? ::readdir(d) : nullptr) {
      std::string n = e->d_name;
      if (n == "." || n == ".." || skip.count(n)) continue;
      // The listing's own type (that of the entry, as lstat's); an lstat only
      // where the filesystem does not say.
      unsigned char t = e->d_type;
      if (t == DT_UNKNOWN) {
        struct stat st;
        std::string p = "/" + n;
        if (::lstat(p.c_str(), &st) != 0) continue;
        t = S_ISLNK(st.st_mode) ? DT_LNK : S_ISDIR(st.st_mode) ? DT_DIR : DT_REG;
      }
      entries.emplace_back(n, t);
    }
    if (d) ::closedir(d);
    std::sort(entries.begin(), entries.end());
    for (const auto& [n, t] : entries) {
      std::string p = "/" + n;
      if (t == DT_LNK) {
        char buf[4096];
        ssize_t len = ::readlink(p.c_str(), buf, sizeof buf - 1);
        if (len > 0) add(StepKind::Symlink, p, std::string(buf, len), "as on the host");
      } else if (t == DT_DIR) {
        add(StepKind::BindRo, p, p, "host, read-only");
      }
    }
  }

  void specials() {
    add(StepKind::Tmpfs, "/tmp", {}, "private /tmp").mode = 01777;
    add(StepKind::Tmpfs, "/run", {}, "runtime sockets (docker, dbus, ...) invisible").mode = 0755;
    struct stat st;
    if (::lstat("/var/run", &st) == 0 && S_ISDIR(st.st_mode))
      add(StepKind::Tmpfs, "/var/run", {}, "runtime sockets invisible").mode = 0755;
    if (::lstat("/var/tmp", &st) == 0 && S_ISDIR(st.st_mode))
      add(StepKind::Tmpfs, "/var/tmp", {}, "private /var/tmp").mode = 01777;
    add(StepKind::Tmpfs, "/dev", {}, "minimal /dev").mode = 0755;
    for (const char* n : {"null", "zero", "full", "random", "urandom", "tty"})
      add(StepKind::DevNode, std::string("/dev/") + n, std::string("/dev/") + n).is_dir = false;
    add(StepKind::Devpts, "/dev/pts", {}, "own ptys");
    add(StepKind::Symlink, "/dev/ptmx", "pts/ptmx");
    add(StepKind::Tmpfs, "/dev/shm", {}, "private shared memory").mode = 01777;
    add(StepKind::Symlink, "/dev/fd", "/proc/self/fd");
    add(StepKind::Symlink, "/dev/stdin", "/proc/self/fd/0");
    add(StepKind::Symlink, "/dev/stdout", "/proc/self/fd/1");
    add(StepKind::Symlink, "/dev/stderr", "/proc/self/fd/2");
    add(StepKind::ReadOnly, "/dev", {}, "no new device nodes");
    add(StepKind::Proc, "/proc", {}, "the sandbox's own processes only");
    for (const char* p : {"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"})
      add(StepKind::ProtectRo, p, {}, "kernel knobs read-only").is_dir = std::string(p) != "/proc/sysrq-trigger";
    add(StepKind::Sysfs, "/sys", {}, "read-only, own network devices only");
  }

  Result<void> build() {
    // Workspace.
    std::string ws_in = ctx.workspace ? expand_path(*ctx.workspace, ctx.home, ctx.cwd) : ctx.cwd;
    auto ws = canonical(ws_in);
    if (!ws) return fail(Error::sys("workspace " + ws_in));
    if (!is_dir(*ws)) return fail(Error::msg("workspace " + *ws, "not a directory"));
    if (*ws == "/") return fail(Error::msg("workspace /", "the whole filesystem cannot be the workspace; pass --workspace DIR"));
    for (const char* bad : {"/proc", "/sys", "/dev", "/run"})
      if (is_within(*ws, bad)) return fail(Error::msg("workspace " + *ws, std::string("cannot be under ") + bad));
    std::string home;
    if (!ctx.home.empty()) home = canonical(ctx.home).value_or("");
    if (!home.empty() && home != "/" && is_within(home, *ws))
      return fail(Error::msg("workspace " + *ws,
                             "contains your home directory ($HOME " + home +
                                 "): its shell rc files and credentials would be writable; pass --workspace DIR "
                                 "with a project directory"));
    plan.workspace = *ws;
    // A Plan has some 50 steps: room for them once, not moved at each doubling.
    plan.steps.reserve(64);
    // (The workspace is most often the working directory itself: already resolved.)
    std::string cwd = ctx.cwd == ws_in ? *ws : canonical(ctx.cwd).value_or(*ws);
    plan.cwd = is_within(cwd, *ws) ? cwd : *ws;
    if (auto r = identity(*ws); !r) return r;
    plan.argv = ctx.argv;
    plan.sandbox_id = ctx.sandbox_id.empty() ? random_hex(8) : ctx.sandbox_id;
    plan.workspace_mode = ctx.workspace_mode;
    plan.allow_planted = ctx.allow_planted;
    {
      const char* state = nullptr;
      for (const auto& kv : ctx.environ)
        if (kv.starts_with("XDG_STATE_HOME=") && kv.size() > 15 && kv[15] == '/') state = kv.c_str() + 15;
      std::string base = state ? std::string(state) : (home.empty() ? std::string("/var/tmp") : home + "/.local/state");
      plan.quarantine_dir = base + "/exguardian/quarantine/" + plan.sandbox_id;
    }
    if (plan.workspace_mode != WorkspaceMode::Live) {
      if (ctx.keep_dir) {
        std::string k = expand_path(*ctx.keep_dir, ctx.home, ctx.cwd);
        if (is_within(k, *ws) || is_within(*ws, k))
          return fail(Error::msg("--keep " + k, "must be outside the workspace (and not contain it)"));
        plan.layer_dir = k;
        plan.keep_layer = true;
      } else {
        plan.layer_dir = "/var/tmp/exguardian-" + std::to_string(::getpid()) + "-" + plan.sandbox_id;
      }
    } else if (ctx.keep_dir) {
      return fail(Error::msg("--keep", "needs --workspace-mode overlay or discard"));
    }
    plan.timeout = pol.resources.timeout;
    plan.limits = default_limits();
    if (pol.resources.memory_bytes) {
      plan.limits.memory_bytes = pol.resources.memory_bytes;
      plan.limits.explicit_memory = true;
    }
    if (pol.resources.pids) {
      plan.limits.pids = pol.resources.pids;
      plan.limits.explicit_pids = true;
    }
    if (pol.resources.cpus) {
      plan.limits.cpus = pol.resources.cpus;
      plan.limits.explicit_cpus = true;
    }
    plan.limits.scratch_disk_bytes = pol.resources.scratch_disk_bytes;

    base();
    specials();
    // ExGuardian itself, so that `exguardian probe` works inside without a compiler.
    // The link's text is the kernel's own resolved path (one readlink, not
    // realpath's walk of every component); a binary deleted since it started
    // reads "PATH (deleted)", which is not a file: nothing to bind.
    char self[PATH_MAX];
    ssize_t self_len = ::readlink("/proc/self/exe", self, sizeof self - 1);
    struct stat self_st;
    if (self_len > 0 && self[0] == '/' &&
        ::stat(std::string(self, static_cast<size_t>(self_len)).c_str(), &self_st) == 0 && S_ISREG(self_st.st_mode)) {
      Step& s = add(StepKind::BindRo, "/run/exguardian/exguardian", std::string(self, static_cast<size_t>(self_len)),
                    "exguardian itself (for probes)");
      s.is_dir = false;
    }

    // HOME: readable as on the host, writes thrown away; unless allowWrite
    // names HOME itself (its bind below replaces the layer: none is made).
    bool home_writable = false;
    if (!home.empty())
      for (const auto& e : pol.filesystem.allow_write)
        for (const auto& h : resolve_entry(e, home))
          if (h == home) home_writable = true;  // (home is canonical: resolved above)
    if (!home.empty() && home != "/" && is_dir(home)) {
      plan.home = home;
      if (!home_writable) {
        Step& s = add(StepKind::Overlay, home, home, "readable as on the host; writes go to a throwaway layer");
        maybe_idmap(s);
      }
    } else {
      plan.home = "/tmp";
      plan.notes.push_back("HOME " + (ctx.home.empty() ? std::string("(unset)") : ctx.home) +
                           " is not a directory: HOME=/tmp inside");
    }

    // Writable trees: the workspace, then allowWrite entries.
    plan.protect_extra = pol.filesystem.protect;
    plan.allow_git_config = pol.filesystem.allow_git_config.value_or(false);
    if (plan.workspace_mode == WorkspaceMode::Live) {
      Step& s = add(StepKind::BindRw, *ws, *ws, "workspace: writable, persistent");
      maybe_idmap(s);
    } else {
      Step& s = add(StepKind::Overlay, *ws, *ws, plan.workspace_mode == WorkspaceMode::Overlay
                                                     ? "workspace: writes held outside, applied at exit"
                                                     : "workspace: writes held outside, dropped at exit");
      s.upper_dir = plan.layer_dir + "/upper";
      s.work_dir = plan.layer_dir + "/work";
      maybe_idmap(s);
    }
    writable.push_back(*ws);
    for (const auto& e : pol.filesystem.allow_write) {
      std::string p = expand_path(e.path, home, e.base_dir);
      if (p == "/tmp" || p == "/var/tmp" || p == "/private/tmp") {
        plan.notes.push_back(e.where.str() + ": allowWrite " + e.path +
                             ": the sandbox has its own private, writable " + p + "; the host's stays unwritable");
        continue;
      }
      auto hits = resolve_entry(e, home);
      if (hits.empty()) {
        plan.notes.push_back(e.where.str() + ": allowWrite " + e.path + " matches nothing that exists: skipped");
        continue;
      }
      for (const auto& h : hits) {
        if (h == *ws) continue;
        if (h == "/" ) return fail(Error::msg(e.where.str(), "allowWrite / would make the whole host writable"));
        for (const char* bad : {"/proc", "/sys", "/dev"})
          if (is_within(h, bad)) return fail(Error::msg(e.where.str(), "allowWrite " + h + ": not allowed"));
        Step& s = add(StepKind::BindRw, h, h, "allowWrite (" + e.where.str() + ")");
        s.is_dir = is_dir(h);
        maybe_idmap(s);
        writable.push_back(h);
      }
    }
    // The quarantine must be out of reach of the sandbox (a writable tree could
    // hold a link that leads the moved files somewhere they run): when a
    // writable tree holds it (allowWrite ~), a fresh directory under /var/tmp,
    // made at start with mkdir (never one that exists).
    {
      std::string q = canonical_prefix(plan.quarantine_dir);
      if (std::any_of(writable.begin(), writable.end(), [&](auto& w) { return is_within(q, w); })) {
        plan.notes.push_back("quarantine " + plan.quarantine_dir + " is inside a writable tree: using /var/tmp instead");
        plan.quarantine_dir = "/var/tmp/exg-quarantine-" + plan.sandbox_id;
        plan.quarantine_fresh = true;
      }
    }
    // A writable tree inside another keeps its own bind; order by depth so the
    // deeper bind lands on top.
    sort_range(StepKind::BindRw);

    // Read-only over writable: protected names at any depth, then denyWrite.
    std::vector<Step> ro;
    policy::Filesystem fs = pol.filesystem;
    ProtectOptions popt{fs.allow_git_config.value_or(false), protected_extra_names(fs.protect, home), home, writable};
    plan.protect_extra = popt.extra_names;
    std::set<std::string> seen, pinned;  // a pin (writable) must not hide a later read-only bind
    auto in_writable = [&](const std::string& h) {
      return std::any_of(writable.begin(), writable.end(), [&](auto& w) { return is_within(h, w); });
    };
    for (const auto& tree : writable) {
      if (!is_dir(tree)) continue;
      // Live trees are swept at exit (the workspace only in live mode).
      if (tree != *ws || plan.workspace_mode == WorkspaceMode::Live) plan.swept_trees.push_back(tree);
      auto found = find_protected_all(tree, popt);
      for (const auto& p : found.pointers)
        if (in_writable(p)) plan.protect_pointers.push_back(p);
      size_t too_long = 0;
      for (const auto& p : found.paths) {
        // A symlink's target outside every writable tree is read-only already
        // (and binding it could uncover a masked path).
        if (!in_writable(p.path)) continue;
        // A path no mount call can take: the sweep (fd-relative) judges it at exit.
        if (p.path.size() >= PATH_MAX - 1) {
          ++too_long;
          continue;
        }
        if (!(p.pin ? pinned : seen).insert(p.path).second) continue;
        Step s;
        s.kind = p.pin ? StepKind::Pin : StepKind::ProtectRo;
        s.target = p.path;
        s.is_dir = p.is_dir;
        s.why = p.why;
        ro.push_back(s);
      }
      if (too_long)
        plan.notes.push_back(std::to_string(too_long) + " protected path(s) in " + tree +
                             " are longer than PATH_MAX: not bound read-only, checked by the sweep at exit");
    }
    for (const auto& e : fs.deny_write) {
      for (const auto& h : resolve_entry(e, home)) {
        if (!in_writable(h) || !seen.insert(h).second) continue;
        Step s;
        s.kind = StepKind::ProtectRo;
        s.target = h;
        s.is_dir = is_dir(h);
        s.why = "denyWrite (" + e.where.str() + ")";
        s.deny_write = true;
        ro.push_back(s);
      }
    }
    // Pins (writable self-binds of .git) go before the read-only binds inside them.
    std::stable_sort(ro.begin(), ro.end(), [](const Step& a, const Step& b) {
      if (depth(a.target) != depth(b.target)) return depth(a.target) < depth(b.target);
      return a.target < b.target;
    });
    for (auto& s : ro) plan.steps.push_back(s);

    // Secrets: values read here, on the host; the sandbox gets placeholders.
    auto secrets = resolve_secrets(pol, ctx, home);
    if (!secrets) return fail(secrets.error());
    plan.secrets = std::move(secrets->secrets);
    secret_env_ = std::move(secrets->env);
    auto masked_files = masked_file_steps(pol, plan.secrets, home, secrets->dropped);
    if (!masked_files) return fail(masked_files.error());
    credential_trees(*masked_files, *ws);
    auto masked_copy = [&](const std::string& p) {
      return std::any_of(masked_files->begin(), masked_files->end(), [&](const Step& f) { return f.target == p; });
    };

    // Unreadable: credential locations and denyRead, unless allowRead says otherwise.
    std::vector<std::string> allow_read;
    for (const auto& e : fs.allow_read)
      for (const auto& h : resolve_entry(e, home)) allow_read.push_back(h);
    auto allowed = [&](const std::string& p) {
      return std::any_of(allow_read.begin(), allow_read.end(), [&](auto& a) { return is_within(p, a); });
    };
    std::vector<std::pair<std::string, std::string>> deny;  // path, why
    if (!plan.home.empty() && plan.home != "/tmp") {
      // HOME listed once: a credential location whose first component is not
      // in it cannot exist, and most do not (one listing, not ~45 stats). Not
      // listable (search but no read right): each is asked about.
      std::set<std::string, std::less<>> in_home;
      bool listed = false;
      if (UniqueFd hd(::open(plan.home.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)); hd)
        listed = list_dir(hd.get(), [&](std::string_view n, unsigned char) { in_home.emplace(n); });
      for (const auto& c : kCredentialPaths) {
        if (listed && !in_home.count(std::string_view(c).substr(0, c.find('/')))) continue;
        if (auto h = canonical(plan.home + "/" + c)) deny.emplace_back(*h, "credentials");
      }
    }
    for (const auto& e : fs.deny_read)
      for (const auto& h : resolve_entry(e, home)) deny.emplace_back(h, "denyRead (" + e.where.str() + ")");
    // A file a secret's value was read from: never readable inside, allowRead or not
    // (a declared secret file is seen as its masked copy instead).
    std::set<std::string> forced;
    for (const auto& f : secrets->source_files)
      if (!masked_copy(f) && forced.insert(f).second) deny.emplace_back(f, "a secret's source (read by the supervisor only)");
    std::sort(deny.begin(), deny.end(), [](auto& a, auto& b) {
      return depth(a.first) != depth(b.first) ? depth(a.first) < depth(b.first) : a.first < b.first;
    });
    std::set<std::string> masked;
    std::vector<std::string> mask_dirs;
    for (const auto& [p, why] : deny) {
      if (allowed(p) && !forced.count(p)) continue;
      if (masked_copy(p)) continue;  // covered by its masked copy below
      if (!masked.insert(p).second) continue;
      if (p == "/" || is_within(*ws, p)) return fail(Error::msg("denyRead " + p, "would hide the workspace"));
      bool d = is_dir(p);
      Step& s = add(d ? StepKind::MaskDir : StepKind::MaskFile, p, {}, why);
      s.is_dir = d;
      // A masked directory holding a masked credential copy or an allowRead
      // path can be passed through (to reach them), not listed.
      bool holds = std::any_of(masked_files->begin(), masked_files->end(),
                               [&](const Step& f) { return is_within(f.target, p); }) ||
                   std::any_of(allow_read.begin(), allow_read.end(),
                               [&](const std::string& a) { return a != p && is_within(a, p); });
      s.mode = d && holds ? 0111 : 0;
      if (d) mask_dirs.push_back(p);
    }
    // allowRead inside a masked directory: bound back read-only, then the mask sealed.
    for (const auto& a : allow_read) {
      bool under_mask = std::any_of(mask_dirs.begin(), mask_dirs.end(),
                                    [&](auto& m) { return a != m && is_within(a, m); });
      if (!under_mask) continue;
      Step& s = add(StepKind::BindRo, a, a, "allowRead inside a denied directory");
      s.is_dir = is_dir(a);
    }
    // Masked credential copies, before the masks around them are sealed.
    for (auto& f : *masked_files) plan.steps.push_back(std::move(f));
    if (auto r = host_sockets(home); !r) return r;
    for (const auto& m : mask_dirs) add(StepKind::ReadOnly, m, {}, "seal mask");

    plan.network = pol.network;
    // srt users may list an address among the domains; here an address needs a CIDR rule.
    for (const auto& d : pol.network.allowed_domains) {
      std::string host = d.pattern.starts_with("[") ? d.pattern.substr(1, d.pattern.find(']') - 1)
                                                   : d.pattern.substr(0, d.pattern.rfind(':') == std::string::npos
                                                                             ? d.pattern.size()
                                                                             : d.pattern.rfind(':'));
      bool literal = d.pattern.starts_with("[") ||
                     (!host.empty() && host.find_first_not_of("0123456789.") == std::string::npos);
      if (literal)
        plan.notes.push_back(d.where.str() + ": allowedDomains \"" + d.pattern +
                             "\" is an address: it allows nothing; add it to network.allowedCidrs instead");
    }
    plan.proxy.transparent = plan.proxy.enabled && pol.network.transparent.value_or(true);
    plan.proxy.resolver = plan.proxy.enabled && (pol.network.resolver.value_or(false) || plan.proxy.transparent);
    if (plan.proxy.enabled && !plan.proxy.transparent)
      plan.notes.push_back("network.transparent: false: only clients that use the proxy variables reach the network; "
                           "a connection to any other address fails (no route)");
    if (plan.proxy.resolver) {
      if (auto target = host_file_to_cover("/etc/resolv.conf")) {
        Step& s = add(StepKind::ResolvConf, *target, {}, "in-sandbox resolver: nameserver 127.0.0.53");
        s.is_dir = false;
      } else {
        plan.notes.push_back("network: this host has no /etc/resolv.conf (a container started without a network "
                             "has none), so nothing points the sandbox's lookups at its resolver: a name resolves "
                             "only through the proxy (clients that use HTTP(S)_PROXY); a direct lookup fails");
      }
    }
    if (plan.proxy.transparent) {
      // Every name but loopback's goes to the resolver, so that a name the
      // host's /etc/hosts holds reaches the capture too (the proxy still
      // reads the host's file when it resolves the name outside).
      plan.proxy.pinned_names = pinned_allowed_names(pol.network);
    }
    std::optional<std::string> hosts_file = plan.proxy.transparent ? host_file_to_cover("/etc/hosts") : std::nullopt;
    if (plan.proxy.transparent && !hosts_file)
      plan.notes.push_back("network: this host has no /etc/hosts: the sandbox's names come from its resolver alone");
    if (hosts_file) {
      Step& s = add(StepKind::File, *hosts_file, {},
                    "transparent egress: loopback names and the " + std::to_string(plan.proxy.pinned_names.size()) +
                        " exact allowed names' own addresses; the rest from the resolver");
      s.is_dir = false;
      s.mode = 0444;
      s.content = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" + plan.hostname + "\n";
      egress::HandedOutAddresses order;  // the proxy gives the same names the same addresses
      for (const auto& n : plan.proxy.pinned_names)
        if (auto a = order.address_for(n)) s.content += a->str() + "\t" + n + "\n";
    }
    // TLS to hosts with secrets or request rules ends at the proxy: the sandbox trusts its CA.
    plan.terminate_for_rules = plan.proxy.enabled && (!pol.network.rules.empty() || pol.network.read_only.value_or(false));
    if (plan.terminates_tls())
      for (auto& st : trust_bundle_steps(plan)) plan.steps.push_back(std::move(st));
    if (auto r = srt_network_checks(home); !r) return r;
    pin_ancestors();
    if (auto r = relocate_workspace(*ws); !r) return r;
    if (auto r = name_user(); !r) return r;
    build_landlock();
    build_env();
    for (const auto& n : pol.notes) plan.notes.push_back(n);
    return {};
  }

  // srt 0.0.83's network keys that shape the sandbox rather than the proxy.
  Result<void> srt_network_checks(const std::string& home) {
    const auto& net = pol.network;
    for (const auto& [entry, why] : net.denied_domain_reasons)
      if (std::none_of(net.denied_domains.begin(), net.denied_domains.end(),
                       [&](const policy::DomainEntry& d) { return d.pattern == entry; }))
        plan.notes.push_back("network.deniedDomainReasons \"" + entry +
                             "\" names no deniedDomains entry (they are matched exactly as written): never shown");
    // A secret goes only into TLS the proxy terminates: excluding its host would send the placeholder.
    for (const auto& s : plan.secrets)
      for (const auto& h : s.hosts) {
        std::string bare = h.substr(0, h.rfind(':') == std::string::npos || h.back() == ']' ? h.size() : h.rfind(':'));
        for (const auto& x : net.tls_exclude)
          if (x.pattern == bare || (x.pattern.starts_with("*.") && bare.ends_with(x.pattern.substr(1))))
            return fail(Error::msg(x.where.str() + ": network.tlsTerminate.excludeDomains " + x.pattern,
                                   "secret " + s.name + " is for " + h +
                                       ", which then would never be terminated: its value could not be put in"));
      }
    if (!net.extra_ca_certs.empty()) {
      // srt: only the CERTIFICATE blocks; a missing or unreadable file is skipped.
      for (const auto& e : net.extra_ca_certs) {
        auto hits = resolve_entry(e, home);
        if (hits.empty()) plan.notes.push_back("tlsTerminate.extraCaCertPaths " + e.path + ": no such file, skipped");
        for (const auto& path : hits) {
          std::ifstream f(path);
          std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
          size_t found = 0;
          for (size_t at = text.find("-----BEGIN CERTIFICATE-----"); at != std::string::npos;
               at = text.find("-----BEGIN CERTIFICATE-----", at + 1)) {
            size_t end = text.find("-----END CERTIFICATE-----", at);
            if (end == std::string::npos) break;
            plan.extra_ca_pem += text.substr(at, end + 25 - at) + "\n";
            ++found;
          }
          plan.notes.push_back("tlsTerminate.extraCaCertPaths " + path + ": " + std::to_string(found) +
                               " certificate(s) added to the trust bundle inside");
        }
      }
      // No secret, so no bundle with the sandbox's CA: the host's bundle plus these, made here.
      if (!plan.terminates_tls() && !plan.extra_ca_pem.empty()) {
        for (auto& st : trust_bundle_steps(plan)) {
          std::ifstream f(plan.host_trust_bundle);
          st.content.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
          if (!st.content.empty() && st.content.back() != '\n') st.content += '\n';
          st.content += plan.extra_ca_pem;
          st.trust_bundle = false;
          st.why = "trust: the host's CA bundle plus tlsTerminate.extraCaCertPaths";
          plan.steps.push_back(std::move(st));
        }
      }
    }
    return {};
  }

  // A writable credential copy inside a writable tree (an agent's config
  // directory, its sessions and history live there): mounted over the host
  // file it would be a mount point, which the agent's rewrite by a rename (a
  // temporary file renamed over it, as Codex does) cannot replace (EBUSY). So
  // the tree is an overlay instead of its live bind (lower: the host's tree;
  // upper: a directory of this run on the host, holding the copy as a plain
  // file), and the supervisor applies the run's other changes to the tree at
  // exit (protected names quarantined, as for the workspace's overlay mode).
  void credential_trees(std::vector<Step>& masked_files, const std::string& workspace) {
    size_t n = 0;
    for (auto& f : masked_files) {
      if (!f.writable) continue;
      Step* tree = nullptr;
      for (auto& st : plan.steps)
        if ((st.kind == StepKind::BindRw || (st.kind == StepKind::Overlay && st.credential_tree)) && st.is_dir &&
            st.target != workspace && st.source == st.target && is_within(f.target, st.target) &&
            (!tree || st.target.size() > tree->target.size()))
          tree = &st;
      if (!tree) continue;  // (a copy in HOME's throwaway layer stays a mounted file)
      if (!tree->credential_tree) {
        std::string dir = "/var/tmp/exguardian-" + std::to_string(::getpid()) + "-" + plan.sandbox_id + "-tree" +
                          std::to_string(n++);
        tree->kind = StepKind::Overlay;
        tree->credential_tree = true;
        tree->upper_dir = dir + "/upper";
        tree->work_dir = dir + "/work";
        tree->why += ": holds a writable credential copy, so an overlay (the copy a plain file in its upper layer, "
                     "replaceable by a rename); the run's other changes applied at exit";
      }
      f.in_upper = true;
      f.why += "; a plain file in the overlay of " + tree->target + " (not a mount point)";
    }
  }

  // A protected path (read-only, masked, replaced by a generated file) is a
  // mount point and cannot be renamed, but its parent directories can, and the
  // protection would move with them: `mv cfg cfg.old && mkdir cfg` puts a new,
  // unprotected cfg/prod.yaml where the protected one was. So every directory
  // between a writable tree and a protected path inside it is pinned (bound
  // onto itself, writable): a mount point cannot be renamed or removed in the
  // sandbox's mount namespace (EBUSY), on the host nothing changes.
  void pin_ancestors() {
    auto protects = [](StepKind k) {
      return k == StepKind::ProtectRo || k == StepKind::MaskDir || k == StepKind::MaskFile || k == StepKind::File ||
             k == StepKind::ResolvConf || k == StepKind::Pin;
    };
    std::vector<std::string> roots, sealed;  // writable trees; trees nothing inside can be renamed in
    size_t insert_at = 0;
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      const Step& s = plan.steps[i];
      if (s.kind == StepKind::BindRw || s.kind == StepKind::Overlay) {
        if (s.is_dir) roots.push_back(s.target);
        insert_at = i + 1;
      }
      if (s.kind == StepKind::ProtectRo || s.kind == StepKind::MaskDir) sealed.push_back(s.target);
    }
    std::set<std::string> have;
    for (const auto& s : plan.steps)
      if (s.kind == StepKind::Pin) have.insert(s.target);
    std::set<std::string> pins;
    for (const auto& s : plan.steps) {
      if (!protects(s.kind)) continue;
      // The deepest writable tree holding it: directories above that tree's root are read-only already.
      const std::string* root = nullptr;
      for (const auto& r : roots)
        if (s.target != r && is_within(s.target, r) && (!root || r.size() > root->size())) root = &r;
      if (!root) continue;
      for (std::string d = s.target.substr(0, s.target.rfind('/')); d.size() > root->size();
           d = d.substr(0, d.rfind('/'))) {
        bool in_sealed = std::any_of(sealed.begin(), sealed.end(), [&](const std::string& t) { return is_within(d, t); });
        if (!in_sealed && !have.count(d)) pins.insert(d);
      }
    }
    std::vector<Step> add;
    for (const auto& d : pins) {
      Step s;
      s.kind = StepKind::Pin;
      s.target = d;
      s.is_dir = true;
      s.why = "holds a protected path: pinned, so it cannot be renamed away with it";
      add.push_back(std::move(s));
    }
    std::stable_sort(add.begin(), add.end(), [](const Step& a, const Step& b) { return depth(a.target) < depth(b.target); });
    plan.steps.insert(plan.steps.begin() + static_cast<long>(insert_at), add.begin(), add.end());
  }

  // The host's pathname Unix sockets that the sandbox's view shows: each masked
  // (connect() needs only write permission on the inode, which a read-only
  // mount leaves; the mask, a mount point, cannot be renamed away either),
  // unless network.allowUnixSockets names it or allowAllUnixSockets is set. An
  // allowed socket hidden by one of the sandbox's own tmpfs (/run, /tmp, ...)
  // is bound in.
  Result<void> host_sockets(const std::string& home) {
    const auto& net = pol.network;
    if (net.allow_all_unix_sockets.value_or(false)) {
      plan.notes.push_back("network.allowAllUnixSockets: the host's Unix sockets visible inside are not masked");
      plan.host_unix_sockets_allowed = true;
      plan.unix_sockets_all_allowed = true;
      return {};
    }
    std::set<std::string> allowed;
    for (const auto& e : net.allow_unix_sockets)
      for (auto& h : resolve_entry(e, home)) allowed.insert(h);
    plan.unix_sockets_allowed.assign(allowed.begin(), allowed.end());
    std::vector<std::string> allowed_seen;
    // Each allowed entry that is not a bound socket now, said once.
    auto say_allowed = [&](std::string n) {
      for (const auto& a : allowed_seen) n += "; allowed: " + a;
      for (const auto& a : allowed)
        if (std::find(allowed_seen.begin(), allowed_seen.end(), a) == allowed_seen.end())
          n += "; allowUnixSockets " + a + ": not a bound socket now";
      plan.notes.push_back(n);
    };
    if (!ctx.mask_host_sockets) {
      // No mounts to mask with: the host's sockets stay where they are and the
      // supervisor's gate refuses a connect() to any the policy does not allow.
      for (const auto& a : allowed) {
        struct stat st;
        if (::lstat(a.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
        allowed_seen.push_back(a);
        plan.host_unix_sockets_allowed = true;
      }
      say_allowed("host Unix sockets: not masked on this layer (no mounts); the supervisor refuses a connect() to "
                  "any that network.allowUnixSockets does not name");
      return {};
    }
    auto found = find_host_sockets();
    if (!found)
      return fail(Error::msg("host Unix sockets", found.error().str() +
                                                      ": none could be masked; network.allowAllUnixSockets: true "
                                                      "runs without masking them"));
    const HostSockets& hs = *found;
    size_t masked = 0;
    for (const auto& p : hs.paths) {
      // What covers p inside: the deepest mount over it (the later one at equal depth).
      const Step* cover = nullptr;
      for (const auto& st : plan.steps) {
        bool mounts = st.kind == StepKind::BindRo || st.kind == StepKind::BindRw || st.kind == StepKind::Overlay ||
                      st.kind == StepKind::Tmpfs || st.kind == StepKind::MaskDir || st.kind == StepKind::MaskFile ||
                      st.kind == StepKind::Proc || st.kind == StepKind::Sysfs;
        if (mounts && is_within(p, st.target) && (!cover || st.target.size() >= cover->target.size())) cover = &st;
      }
      if (!cover || cover->kind == StepKind::MaskDir || cover->kind == StepKind::MaskFile) continue;
      bool host_view = cover->kind == StepKind::BindRo || cover->kind == StepKind::BindRw || cover->kind == StepKind::Overlay;
      if (allowed.count(p)) {
        allowed_seen.push_back(p);
        plan.host_unix_sockets_allowed = true;
        if (cover->kind == StepKind::Tmpfs) add(StepKind::BindRo, p, p, "network.allowUnixSockets").is_dir = false;
        continue;
      }
      if (!host_view) continue;
      Step& s = add(StepKind::MaskFile, p, {}, "host Unix socket (network.allowUnixSockets lets it through)");
      s.is_dir = false;
      s.if_present = true;
      ++masked;
    }
    std::string n = "host Unix sockets: " + std::to_string(masked) + " masked (found in " + std::to_string(hs.netns) +
                    " network namespace" + (hs.netns == 1 ? "" : "s") + "; sockets bound later are not masked)";
    if (hs.relative) n += "; " + std::to_string(hs.relative) + " bound by a relative name could not be located";
    say_allowed(std::move(n));
    return {};
  }

  // --workspace-at: the workspace (and every step inside it: protected names,
  // pins, masks) moves to that path inside; the host path is not mounted.
  // The parent becomes a fresh tmpfs (the host's /home is not seen), and the
  // steps under it outside the workspace (HOME's layer and its masks, when
  // the host's HOME is there) go: the tmpfs hides them. What runs on the
  // host (the sweep, the quarantine, overlay upper dirs) keeps host paths.
  Result<void> relocate_workspace(const std::string& ws) {
    const std::string& at = ctx.workspace_at;
    if (at.empty()) return {};
    std::string parent = at.substr(0, at.rfind('/'));
    if (at[0] != '/' || at.find("/.") != std::string::npos || at.find("//") != std::string::npos || at.back() == '/' ||
        parent.empty())
      return fail(Error::msg("--workspace-at " + at, "expected an absolute path below a top-level directory, such as /home/user"));
    for (const char* bad : {"/proc", "/sys", "/dev", "/run", "/tmp", "/etc", "/usr"})
      if (is_within(at, bad)) return fail(Error::msg("--workspace-at " + at, std::string("cannot be under ") + bad));
    auto rebase = [&](std::string& p) {
      if (is_within(p, ws)) p = at + p.substr(ws.size());
    };
    std::vector<Step> kept;
    for (auto& s : plan.steps) {
      if (is_within(s.target, parent) && !is_within(s.target, ws)) continue;  // under the new tmpfs: hidden anyway
      rebase(s.target);
      if (s.kind == StepKind::BindRw || s.kind == StepKind::Overlay)
        if (s.target == at) {
          Step t;
          t.kind = StepKind::Tmpfs;
          t.target = parent;
          t.why = "the workspace's parent: empty (the host's " + parent + " is not seen)";
          kept.push_back(std::move(t));
          s.why += " (at " + at + ")";
        }
      kept.push_back(std::move(s));
    }
    plan.steps = std::move(kept);
    rebase(plan.cwd);
    plan.home = at;
    plan.notes.push_back("workspace " + ws + " is " + at + " inside (HOME, and the cwd)");
    return {};
  }

  // --user-name: the sandbox's uid gets a name in its own /etc/passwd and
  // /etc/group (generated files over the host's, its line first: a name
  // lookup of the uid finds it before any host account with that uid).
  Result<void> name_user() {
    const std::string& name = ctx.user_name;
    if (name.empty()) return {};
    bool ok = name.size() <= 32 && (std::islower(static_cast<unsigned char>(name[0])) || name[0] == '_');
    for (char c : name) ok = ok && (std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_' || c == '-');
    if (!ok) return fail(Error::msg("--user-name " + name, "expected a lower-case account name such as user"));
    const uid_t uid = plan.identity.inside_uid;
    const gid_t gid = plan.identity.inside_gid;
    if (uid == 0) {
      plan.notes.push_back("--user-name " + name + ": the sandbox's user is root inside: root's name kept");
      return {};
    }
    const char* shell = ::access("/bin/bash", X_OK) == 0 ? "/bin/bash" : "/bin/sh";
    struct Db {
      const char* path;
      std::string first;
    };
    for (const Db& db : {Db{"/etc/passwd", name + ":x:" + std::to_string(uid) + ":" + std::to_string(gid) + "::" + plan.home + ":" + shell + "\n"},
                         Db{"/etc/group", name + ":x:" + std::to_string(gid) + ":\n"}}) {
      auto covered = host_file_to_cover(db.path);
      if (!covered) {
        plan.notes.push_back("--user-name " + name + ": this host has no " + db.path + " to put the name in");
        continue;
      }
      const std::string& target = *covered;
      std::ifstream f(target);
      std::string content = db.first, line;
      while (std::getline(f, line))
        if (!line.starts_with(name + ":")) content += line + "\n";
      Step& s = add(StepKind::File, target, {}, "the sandbox's user is " + name);
      s.is_dir = false;
      s.mode = 0444;
      s.content = std::move(content);
    }
    return {};
  }

  // Landlock mirrors the mounts: read and execute everywhere, full access only
  // where a writable mount is (workspace, allowWrite, HOME's throwaway layer,
  // the private tmpfs dirs), writing existing files in /dev and /proc.
  void build_landlock() {
    auto& ll = plan.landlock;
    ll.read_only = {"/"};
    for (const auto& s : plan.steps) {
      bool writable = s.kind == StepKind::BindRw || s.kind == StepKind::Overlay ||
                      (s.kind == StepKind::Tmpfs && s.target != "/dev");
      if (writable) ll.read_write.push_back(s.target);
    }
    ll.write_files = {"/dev", "/proc"};
    ll.required = pol.landlock_required.value_or(false);
  }

  void sort_range(StepKind k) {
    auto first = std::find_if(plan.steps.begin(), plan.steps.end(), [&](auto& s) { return s.kind == k; });
    std::stable_sort(first, plan.steps.end(), [](const Step& a, const Step& b) { return depth(a.target) < depth(b.target); });
  }

  // The host's value of NAME (its first setting, as getenv finds it).
  std::optional<std::string_view> host_env(std::string_view name) const {
    for (const auto& kv : ctx.environ)
      if (kv.size() > name.size() && kv[name.size()] == '=' && std::string_view(kv).starts_with(name))
        return std::string_view(kv).substr(name.size() + 1);
    return std::nullopt;
  }

  void build_env() {
    // The host's variables on the allowlist, judged in place (no copy of the
    // whole environment: it is read once a run, most of it to be dropped).
    std::map<std::string, std::string> env;
    for (const auto& kv : ctx.environ) {
      auto eq = kv.find('=');
      if (eq == std::string::npos) continue;
      std::string_view k(kv.data(), eq);
      bool ok = std::find(kEnvAllowlist.begin(), kEnvAllowlist.end(), k) != kEnvAllowlist.end() ||
                k.starts_with("LC_");
      if (ok) env.emplace(std::string(k), kv.substr(eq + 1));  // (emplace: the first setting wins, as getenv's)
    }
    if (!env.count("PATH")) env["PATH"] = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
    env["HOME"] = plan.home;
    env["TMPDIR"] = "/tmp";
    env["PWD"] = plan.cwd;
    if (!env.count("TERM")) env["TERM"] = "dumb";
    if (plan.identity.invoked_as_root) {
      std::string name = !owner_name_.empty() ? owner_name_ : "exguardian";
      env["USER"] = env["LOGNAME"] = name;
    }
    if (!ctx.user_name.empty() && plan.identity.inside_uid != 0) env["USER"] = env["LOGNAME"] = ctx.user_name;
    if (plan.proxy.enabled) {
      // Every common client finds the proxy (srt sets the same names).
      for (auto& [k, v] : proxy_env(plan.proxy.http_port, plan.proxy.socks_port)) env[std::move(k)] = std::move(v);
    }
    env["EXGUARDIAN"] = "1";
    env["EXGUARDIAN_SANDBOX_ID"] = plan.sandbox_id;
    env["SANDBOX_RUNTIME"] = "1";
    // Python's own compiled caches go to a private tmpfs, not __pycache__ in
    // the tree: a *.pyc that appears in a swept tree was then written on
    // purpose, and the sweep quarantines it (protected_names.cpp). The first
    // private tmpfs no tree reaching the host covers (the workspace may be
    // /tmp itself: its caches would be quarantined, every Python run 123).
    for (const char* dir : {"/tmp", "/var/tmp", "/dev/shm"}) {
      bool reaches_host = !plan.workspace.empty() && is_within(dir, plan.workspace);
      for (const auto& tree : plan.swept_trees) reaches_host = reaches_host || is_within(dir, tree);
      if (reaches_host) continue;
      env["PYTHONPYCACHEPREFIX"] = std::string(dir) + "/.exguardian-pycache";
      break;
    }
    for (const auto& name : pol.env.allow) {
      if (auto v = host_env(name)) env[name] = std::string(*v);
      else plan.notes.push_back("--env " + name + ": not set on the host, not passed");
    }
    for (const auto& [k, v] : pol.env.set) env[k] = v;
    for (const auto& name : pol.env.deny) env.erase(name);
    // Secrets last: a placeholder wins over any host value or setting of that name.
    for (const auto& [k, v] : secret_env_) {
      if (env.count(k)) plan.notes.push_back("env " + k + ": secret " + k + "'s placeholder replaces what was passed or set");
      env[k] = v;
    }
    // srt's git.safeDirectories and javaAgentJarPath.
    if (!pol.git_safe_directories.empty()) {
      size_t n = 0;
      if (auto it = env.find("GIT_CONFIG_COUNT"); it != env.end()) n = std::strtoul(it->second.c_str(), nullptr, 10);
      for (const auto& d : pol.git_safe_directories) {
        env["GIT_CONFIG_KEY_" + std::to_string(n)] = "safe.directory";
        env["GIT_CONFIG_VALUE_" + std::to_string(n)] = d;
        ++n;
      }
      env["GIT_CONFIG_COUNT"] = std::to_string(n);
    }
    if (pol.java_agent_jar) {
      std::string& j = env["JAVA_TOOL_OPTIONS"];
      j = (j.empty() ? "" : j + " ") + "-javaagent:" + *pol.java_agent_jar;
    }
    if (plan.terminates_tls() || !plan.extra_ca_pem.empty())
      for (const auto& n : kCaEnvNames) env[n] = plan.trust_bundle_path;
    if (!plan.secrets.empty()) {
      // A secret's value under another name (GH_TOKEN passed with env.allow,
      // GITHUB_TOKEN declared as a secret) would carry it in anyway.
      for (auto& [k, v] : env) {
        std::string masked = mask_values(v, plan.secrets);
        if (masked != v) {
          plan.notes.push_back("env " + k + ": held a secret's value; the sandbox sees its placeholder instead");
          v = std::move(masked);
        }
      }
    }
    // Each NAME=VALUE made at its size once (k + "=" + v grew it twice), the list reserved once.
    plan.env.reserve(plan.env.size() + env.size());
    for (const auto& [k, v] : env) {
      std::string& kv = plan.env.emplace_back();
      kv.reserve(k.size() + 1 + v.size());
      kv.append(k).append(1, '=').append(v);
    }
  }
};

}  // namespace

Result<Plan> compile(const policy::Policy& policy, const Context& ctx) {
  if (ctx.argv.empty()) return fail(Error::msg("run", "no command given (usage: exguardian run [options] -- COMMAND [ARGS...])"));
  Builder b{policy, ctx, {}, {}, {}};
  if (auto r = b.build(); !r) return fail(r.error());
  return std::move(b.plan);
}

}  // namespace exg::plan
