#include "cli/oci_cmds.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>

#include "oci/spec.hpp"
#include "plan/paths.hpp"

namespace exg::cli {

namespace {

void print_notes(const std::vector<std::string>& notes) {
  for (const auto& n : notes) std::fprintf(stderr, "exguardian: note: %s\n", n.c_str());
}

Result<oci::Runtime> parse_runtime(const std::string& r) {
  std::string base = r.substr(r.rfind('/') == std::string::npos ? 0 : r.rfind('/') + 1);
  if (base == "crun") return oci::Runtime::Crun;
  if (base == "runc") return oci::Runtime::Runc;
  if (base == "runsc") return oci::Runtime::Runsc;
  return fail(Error::msg("--runtime " + r, "expected crun, runc, runsc or a path to one of them"));
}

// One shell word: bare when safe, else single-quoted.
std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=./:,@%") ==
                        std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  return static_cast<bool>(out);
}

// The host's root, read-only, as a skeleton in the bundle: the top-level
// mount points and links, every directory bound from the host by the spec's
// own mounts. (Runtimes mount inside root.path in their own view: with "/"
// itself, the tmpfs on /tmp would hide a workspace source under /tmp.)
Result<void> make_skeleton_root(const std::string& root, const plan::Plan& plan, const nlohmann::json& spec) {
  if (::mkdir(root.c_str(), 0755) != 0 && errno != EEXIST) return fail(Error::sys("mkdir " + root));
  std::set<std::string> seen;
  for (const auto& s : plan.steps)
    if (s.kind == plan::StepKind::Symlink && s.target.find('/', 1) == std::string::npos && seen.insert(s.target).second)
      if (::symlink(s.source.c_str(), (root + s.target).c_str()) != 0 && errno != EEXIST)
        return fail(Error::sys("symlink " + root + s.target));
  for (const auto& m : spec["mounts"]) {
    std::string dest = m.value("destination", "");
    if (dest.size() < 2 || dest[0] != '/') continue;
    std::string top = dest.substr(0, dest.find('/', 1));
    if (!seen.insert(top).second) continue;
    struct stat st;
    bool file = top == dest && m.value("type", "") == "bind" && ::stat(m.value("source", "").c_str(), &st) == 0 &&
                !S_ISDIR(st.st_mode);
    std::string p = root + top;
    if (file) {
      int fd = ::open(p.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
      if (fd < 0) return fail(Error::sys("create " + p));
      ::close(fd);
    } else if (::mkdir(p.c_str(), 0755) != 0 && errno != EEXIST) {
      return fail(Error::sys("mkdir " + p));
    }
  }
  return {};
}

}  // namespace

void OciSpecOptions::add_to(CLI::App& app) {
  sub = CheckedSubcommand::add_to(app, "oci-spec", "Print the OCI runtime config.json (crun, runc, runsc) for a command and policy");
}

void OciSpecOptions::add_options() {
  add_plan_options(sub);
  sub->add_option("--runtime", runtime, "The runtime that will run it: crun (default), runc, runsc, or a path to one");
  sub->add_option("--rootfs", rootfs, "Root filesystem DIR (default: the host's root, read-only)");
  sub->add_option("--bundle", bundle, "Write DIR/config.json (DIR is created) instead of printing it");
  sub->add_option("--netns", netns, "Join this network namespace (e.g. /run/netns/NAME; default: a new, empty one)");
  sub->add_option("--cgroups-path", cgroups_path, "linux.cgroupsPath");
  sub->add_flag("--terminal", terminal, "process.terminal: the runtime gives the command a terminal");
}

int OciSpecOptions::execute() {
  if (auto c = take_command(sub, "exguardian oci-spec [options] -- COMMAND [ARGS...]"); !c)
    return usage_error(c.error().str());
  auto rt = parse_runtime(runtime);
  if (!rt) return usage_error(rt.error().str());
  oci::SpecOptions so;
  so.runtime = *rt;
  if (!rootfs.empty()) {
    auto canon = plan::canonical(rootfs);
    struct stat st;
    if (!canon || ::stat(canon->c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      return usage_error("--rootfs " + rootfs + ": not a directory");
    so.rootfs = *canon;
  }
  exported = true;
  auto built = build_plan();
  if (!built) return usage_error(built.error().str());
  const plan::Plan& plan = built->plan;
  so.rootless = !plan.identity.invoked_as_root;
  so.netns_path = netns;
  so.cgroups_path = cgroups_path;
  so.terminal = terminal;
  so.unstaged_overlay_read_only = true;
  std::vector<std::string> notes;
  so.notes = &notes;
  auto spec = oci::make_spec(plan, so);
  if (!spec) return usage_error(spec.error().str());
  for (const auto& s : plan.steps)
    if (s.idmap && s.kind == plan::StepKind::BindRw)
      notes.push_back(s.target + ": owned by uid " + std::to_string(s.idmap_from_uid) +
                      " on disk; exguardian run --layer container writes through an idmapped mount, this spec as uid " +
                      std::to_string(plan.identity.inside_uid));
  if (netns.empty())
    notes.push_back("network: a new namespace with loopback only; exguardian run --layer container adds the egress proxy");
  if (!bundle.empty() && ::mkdir(bundle.c_str(), 0755) != 0 && errno != EEXIST)
    return usage_error("--bundle " + bundle + ": " + std::strerror(errno));
  if (rootfs.empty()) {
    if (bundle.empty()) {
      (*spec)["root"]["path"] = "rootfs";
      notes.push_back("root.path is the bundle's rootfs/: --bundle DIR creates it (the host's top-level directories as "
                      "mount points, bound read-only from the host)");
    } else {
      auto cb = plan::canonical(bundle);
      if (!cb) return usage_error("--bundle " + bundle + ": " + std::strerror(errno));
      std::string root = *cb + "/rootfs";
      if (auto r = make_skeleton_root(root, plan, *spec); !r) return usage_error("--bundle " + bundle + ": " + r.error().str());
      (*spec)["root"]["path"] = root;
    }
  }
  std::string text = spec->dump(2) + "\n";
  if (!bundle.empty()) {
    if (!write_file(bundle + "/config.json", text)) return usage_error("--bundle " + bundle + ": cannot write config.json");
  } else {
    std::fputs(text.c_str(), stdout);
  }
  print_notes(notes);
  return 0;
}

void DockerArgsOptions::add_to(CLI::App& app) {
  sub = CheckedSubcommand::add_to(app, "docker-args", "Print the hardened docker/podman run command line for a command and policy");
}

void DockerArgsOptions::add_options() {
  add_plan_options(sub);
  sub->add_option("--engine", engine, "docker (default) or podman")->check(CLI::IsMember({"docker", "podman"}));
  sub->add_option("--image", image, "Image to run (podman: or an absolute root directory)");
  sub->add_option("--seccomp-out", seccomp_out, "Write ExGuardian's seccomp profile to FILE (required unless --unsafe-no-seccomp)");
  sub->add_flag("--lines", lines, "One argument per line instead of one shell-quoted line");
}

int DockerArgsOptions::execute() {
  if (auto c = take_command(sub, "exguardian docker-args [options] -- COMMAND [ARGS...]"); !c)
    return usage_error(c.error().str());
  exported = true;
  auto built = build_plan();
  if (!built) return usage_error(built.error().str());
  const plan::Plan& plan = built->plan;
  if (plan.seccomp && seccomp_out.empty())
    return usage_error("docker-args: --seccomp-out FILE is needed (the engine reads the profile from a file)");
  std::string profile_path;
  if (plan.seccomp) {
    size_t slash = seccomp_out.rfind('/');
    std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : seccomp_out.substr(0, slash);
    std::string name = slash == std::string::npos ? seccomp_out : seccomp_out.substr(slash + 1);
    auto cdir = plan::canonical(dir);
    if (!cdir || name.empty()) return usage_error("--seccomp-out " + seccomp_out + ": not a file in an existing directory");
    profile_path = (*cdir == "/" ? std::string() : *cdir) + "/" + name;
  }
  std::vector<std::string> notes;
  auto eng = engine == "podman" ? oci::Engine::Podman : oci::Engine::Docker;
  auto args = oci::docker_args(plan, eng, image, profile_path, &notes);
  if (!args) return usage_error(args.error().str());
  if (plan.seccomp && !write_file(profile_path, oci::seccomp_profile().dump(2) + "\n"))
    return usage_error("--seccomp-out " + seccomp_out + ": cannot write");
  if (lines) {
    std::printf("%s\n", engine.c_str());
    for (const auto& a : *args) std::printf("%s\n", a.c_str());
  } else {
    std::string line = engine;
    for (const auto& a : *args) line += " " + shell_quote(a);
    std::printf("%s\n", line.c_str());
  }
  print_notes(notes);
  return 0;
}

}  // namespace exg::cli
