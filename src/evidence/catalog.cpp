#include "evidence/catalog.hpp"
#include "evidence/world.hpp"
#include "evidence/foreign_sandbox.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "microvm/layer.hpp"
#include "probe/probes.hpp"
#include "util/layer_kind.hpp"
#include "util/unique_fd.hpp"

namespace exg::evidence {

std::optional<std::string> read_whole(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

namespace {

// A file's content as its SHA-256, read in pieces; nullopt when it cannot be opened. (Kept whole,
// the exguardian binary alone, 200 MB with debug information, took seconds and 600 MB to read
// into memory for every layer's run, and as long again to compare.)
std::optional<std::string> content_digest(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> md(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!md || EVP_DigestInit_ex(md.get(), EVP_sha256(), nullptr) != 1) return "no SHA-256";
  std::vector<char> buf(1 << 16);
  ssize_t n;
  while ((n = ::read(fd.get(), buf.data(), buf.size())) > 0) EVP_DigestUpdate(md.get(), buf.data(), static_cast<size_t>(n));
  if (n < 0) return "unreadable: " + std::string(std::strerror(errno));  // (a directory: never equal to a digest)
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_DigestFinal_ex(md.get(), out, &len);
  return std::string(reinterpret_cast<const char*>(out), len);
}

}  // namespace

bool process_running(pid_t pid) {
  if (pid <= 0 || (::kill(pid, 0) != 0 && errno == ESRCH)) return false;
  // "PID (comm) S ...": the state follows the last ')'.
  auto stat = read_whole("/proc/" + std::to_string(pid) + "/stat").value_or("");
  auto close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() || (stat[close + 2] != 'Z' && stat[close + 2] != 'X');
}

void HostFiles::remember(const std::string& path) { files_[path] = content_digest(path); }

void HostFiles::remember_again() {
  for (auto& [path, digest] : files_) digest = content_digest(path);
}

std::string HostFiles::changed(const std::string& path) const {
  auto it = files_.find(path);
  if (it == files_.end()) return "";
  auto now = content_digest(path);
  if (now == it->second) return "";
  if (!it->second) return path + " created on the host";
  if (!now) return path + " removed on the host";
  return path + " changed on the host";
}

std::string HostFiles::any_changed() const {
  for (const auto& [p, _] : files_) {
    auto c = changed(p);
    if (!c.empty()) return c;
  }
  return "";
}

namespace {

bool has(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

std::string first_line(const std::string& s) {
  auto b = s.find_first_not_of("\n");
  if (b == std::string::npos) return "";
  auto e = s.find('\n', b);
  std::string l = s.substr(b, e == std::string::npos ? std::string::npos : e - b);
  if (l.size() > 160) l = l.substr(0, 157) + "...";
  return l;
}

std::string status_text(const Outcome& o) {
  if (o.timed_out) return "timed out";
  return "exit " + std::to_string(o.status);
}

std::string said(const Outcome& o) {
  auto l = first_line(o.out);
  return l.empty() ? status_text(o) + ", no output" : status_text(o) + ": " + l;
}

Judgement held(std::string e) { return {Verdict::held, std::move(e)}; }
Judgement escaped(std::string e) { return {Verdict::escaped, std::move(e)}; }
Judgement failed(std::string e) { return {Verdict::failed, std::move(e)}; }

// The proxy's refusal in this probe's audit log: "host:port refused (rule)", or "".
// With `rule`: only a refusal by that rule.
std::string egress_refusal(const Outcome& o, const std::string& rule = "") {
  for (const auto& j : o.audit) {
    if (j.value("event", "") != "egress" || j.value("decision", "") != "refused") continue;
    if (!rule.empty() && j.value("rule", "") != rule) continue;
    std::string s = j.value("host", std::string("?"));
    if (j.contains("port")) s += ":" + j["port"].dump();
    return s + " refused (" + j.value("rule", std::string("?")) + ")";
  }
  return "";
}

std::string syscall_refusal(const Outcome& o) {
  for (const auto& j : o.audit)
    if (j.value("event", "") == "syscall_refused")
      return "audit: " + j.value("syscall", std::string("?")) + " refused (errno " + j.value("errno", nlohmann::json(0)).dump() + ")";
  return "";
}

std::string world_first(const Outcome& o) { return first_line(o.world_log); }

// A request or datagram the world's servers must never see.
Judgement judge_network(const Outcome& o, const Context& ctx, bool via_proxy) {
  if (!o.world_log.empty()) return escaped("the world's server received: " + world_first(o));
  if (has(o.out, "hello from")) return escaped("got a server's answer: " + first_line(o.out));
  if (has(o.out, ctx.canary)) return escaped("canary in the output");
  if (via_proxy) {
    auto r = egress_refusal(o);
    if (r.empty()) return failed("nothing arrived, but the audit log has no refusal for it (" + said(o) + ")");
    return held("audit: " + r + "; nothing arrived at the world's servers");
  }
  return held(said(o) + "; nothing arrived at the world's servers");
}

// Output must not carry the canary, and nothing on the host may have changed.
Judgement judge_secret(const Outcome& o, const Context& ctx) {
  if (has(o.out, ctx.canary)) return escaped("canary in the output: " + first_line(o.out));
  if (auto c = ctx.files.any_changed(); !c.empty()) return escaped(c);
  return held(said(o) + "; no canary in the output; host files unchanged");
}

Judgement judge_unchanged(const Outcome& o, const Context& ctx, const std::string& path) {
  if (auto c = ctx.targets.changed(path); !c.empty()) return escaped(c);
  if (auto c = ctx.files.any_changed(); !c.empty()) return escaped(c);
  return held(said(o) + "; " + path.substr(path.rfind('/') + 1) + " unchanged on the host");
}

// Regular files with a set-uid or set-gid bit under dir (not in .git), "path (mode)".
std::vector<std::string> setid_files(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec); !ec && it != std::filesystem::end(it);
       it.increment(ec)) {
    if (it->path().filename() == ".git") {
      it.disable_recursion_pending();
      continue;
    }
    struct stat st;
    if (::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & (S_ISUID | S_ISGID))) {
      char m[8];
      std::snprintf(m, sizeof m, "%04o", st.st_mode & 07777);
      out.push_back(it->path().string() + " (" + m + ")");
    }
  }
  return out;
}

// Code planted for later in a place a name list would not look: after the run
// it must be gone from the host's tree (quarantined), the run must say so
// (exit 123) and the audit log must have its "planted" line with where it went.
// present: whether it is still on the host (the probe knows how to look).
Judgement judge_planted(const Outcome& o, const std::string& path, bool present) {
  if (present) return escaped(path + " is still on the host after the run (" + status_text(o) + ")");
  for (const auto& j : o.audit) {
    if (j.value("event", "") != "planted") continue;
    std::string p = j.value("path", std::string()), to = j.value("quarantined_to", std::string());
    if (to.empty() || !(path == p || path.starts_with(p + "/"))) continue;
    if (o.status != 123) return failed("quarantined, but the run exited " + std::to_string(o.status) + ", not 123");
    std::string shown = p.size() > 80 ? "..." + p.substr(p.size() - 77) : p;
    return held("exit 123; audit: planted " + shown + " -> quarantine; gone from the host's tree");
  }
  return failed("gone from the host's tree, but no \"planted\" audit line names it (" + said(o) + ")");
}

bool on_host(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

std::string category_of_kernel_probe(const std::string& n) {
  if (n.find("setuid") != std::string::npos || n.find("setgid") != std::string::npos || n == "openat2-creat")
    return "set-id files";
  if (n.starts_with("tiocsti") || n.starts_with("tioclinux")) return "terminal";
  if (n.starts_with("socket-vsock") || n == "socketpair-vsock") return "network";
  if (probe::probe_expects_success(n)) return "ordinary work";
  return "kernel";
}

std::string q(const std::string& s) {  // single-quote for sh
  std::string r = "'";
  for (char c : s) r += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return r + "'";
}

// The catalog on the microVM layer: the command runs on the guest's own
// kernel, behind the walls the guest's init puts up (microvm/guest/walls.hpp:
// the process layer's seccomp rules, errno-only; Landlock; the pids limit in
// the guest's cgroup), so the syscall-filter probes and limit-pids run against
// those. What does not apply is skipped, saying why, and not required; one
// probe proves the kernel is another; sandbox-status says what the guest applied.
void adapt_for_microvm(std::vector<ProbeSpec>& v, const Context& c) {
  auto first_line_of = [](const char* path) {
    std::ifstream f(path);
    std::string l;
    std::getline(f, l);
    return l;
  };
  const std::string host_boot = first_line_of("/proc/sys/kernel/random/boot_id");
  const std::string host_release = first_line_of("/proc/sys/kernel/osrelease");
  // Does the layer carry the proxy's ports into the guest? It says so in its cautions when not.
  plan::Plan with_egress;
  with_egress.network.allowed_domains.push_back({"allowed.test", {}});
  const bool egress = microvm::MicrovmLayer({}, {}).cautions(with_egress).empty();
  auto skip = [](ProbeSpec& p, std::string why) {
    if (!p.skip_why.empty()) return;
    p.skip_why = std::move(why);
    p.required = false;
  };
  for (auto& p : v) {
    // One guest per probe under TCG (software emulation): seconds where a process starts in ms.
    p.timeout_s = std::max(p.timeout_s, p.id == "work-compile-c" ? 180 : 90);
    if (p.needs_world && !egress && p.id != "net-direct-tcp" && p.id != "net-direct-metadata" && p.id != "net-udp")
      skip(p, "needs the proxy: egress is not carried into the guest yet (no NIC; nothing listens on 127.0.0.1:3128)");
    else if (p.id == "net-allowed-control" && !egress)
      skip(p, "needs the proxy: egress is not carried into the guest yet");
    else if (p.id == "limit-memory")
      skip(p, "a guest needs at least 384M (--memory 128M is refused, exit 125); the guest's own kernel bounds its RAM");
    else if (p.id == "proc-pid1")
      p.judge = [](const Outcome& o) {
        // The guest's pid 1 is our init (guest/init.cpp), the initramfs's /init.
        if (o.status == 0 && first_line(o.out) == "init" && o.out.find("\n/init ") != std::string::npos)
          return held("/proc/1 is the guest's init (/init, exguardian-guest-init)");
        return escaped("pid 1 is not the guest's init: " + said(o));
      };
    else if (p.id == "sandbox-status") {
      // With -v: the guest's report of what it applied is part of the evidence.
      p.run_args.push_back("-v");
      p.judge = [judge = p.judge](const Outcome& o) {
        const std::string in_guest = "exguardian: microvm: in the guest: ";
        Outcome cmd = o;
        cmd.out.clear();
        std::string walls, seccomp = "no seccomp filter", landlock = "no Landlock", pids = "no pids limit";
        std::istringstream is(o.out);
        for (std::string l; std::getline(is, l);) {
          if (!l.starts_with("exguardian: ")) cmd.out += l + "\n";
          if (!l.starts_with(in_guest)) continue;
          std::string w = l.substr(in_guest.size());
          walls += (walls.empty() ? "" : "; ") + w;
          // The short form first (the text report cuts evidence at 140 characters), the whole after.
          if (w.starts_with("seccomp: ") && has(w, "filter")) seccomp = "seccomp filter (errno-only)";
          if (w.starts_with("landlock: ABI ")) landlock = "Landlock ABI " + w.substr(14, w.find(':', 14) - 14);
          if (w.starts_with("pids: limit ")) pids = "pids limit " + w.substr(12, w.find(' ', 12) - 12);
        }
        Judgement j = judge(cmd);
        if (j.verdict != Verdict::held) return j;
        if (walls.empty()) return failed("the guest did not say what it applied (no \"in the guest\" lines with -v): " + j.evidence);
        return held("in the guest: " + seccomp + ", " + landlock + ", " + pids + "; " + j.evidence + "; " + walls);
      };
    }
  }
  // First, so that a run on the host's kernel is seen before anything else.
  ProbeSpec id{"guest-own-kernel", "sandbox", "uname -r; cat /proc/sys/kernel/random/boot_id",
               "the command runs on another kernel than the host's: its boot id (and release) differ", true, {}, false,
               false, "", 0, [host_boot, host_release](const Outcome& o) {
                 std::istringstream is(o.out);
                 std::string release, boot;
                 std::getline(is, release);
                 std::getline(is, boot);
                 if (o.status != 0 || boot.size() < 32) return failed("no kernel identity: " + said(o));
                 if (boot == host_boot) return escaped("the host's own kernel: boot id " + boot);
                 return held("guest kernel " + release + ", boot id " + boot + "; the host's: " + host_release + ", " + host_boot);
               }};
  v.insert(v.begin() + (v.empty() ? 0 : 1), std::move(id));
  (void)c;
}

// The catalog on the microVM layer as guest root (--microvm-root, issue 43.7): the command is
// root of the guest's kernel by design (privileged tools: mounts, namespaces, nftables), with
// neither the seccomp filter nor Landlock in the guest. The host must stay as safe as with an
// unprivileged guest user, and that is what is judged: the host's files, sockets, processes and
// network, as for any layer, plus what only root in the guest could try. A kernel probe whose
// call the guest's kernel allows is "not applicable" (it reached the guest's kernel, which
// guest-own-kernel proves is not the host's), never "held"; a refusal stays held.
void adapt_for_guest_root(std::vector<ProbeSpec>& v, Context& c) {
  const std::string host_boot = first_line(read_whole("/proc/sys/kernel/random/boot_id").value_or(""));
  const std::string by_design = std::string(kNotApplicable) +
                                "guest root (--microvm-root) holds the guest kernel's privileges by design; the call "
                                "reached the guest's own kernel (guest-own-kernel), not the host's; seen: ";
  for (auto& p : v) {
    if (p.id == "sandbox-in-place") {
      p.command = "hostname; id -u; grep '^CapEff:' /proc/self/status; cat /proc/sys/kernel/random/boot_id";
      p.expectation = "root of the guest's own kernel (--microvm-root): hostname exguardian, uid 0, a boot id that is "
                      "not the host's";
      p.judge = [host_boot](const Outcome& o) {
        std::istringstream is(o.out);
        std::string host, uid, caps, boot;
        std::getline(is, host);
        std::getline(is, uid);
        std::getline(is, caps);
        std::getline(is, boot);
        std::replace(caps.begin(), caps.end(), '\t', ' ');
        if (o.status == 0 && host == "exguardian" && uid == "0" && boot.size() >= 32 && boot != host_boot)
          return held("guest root (uid 0, " + caps + ") on the guest's own kernel, boot id " + boot + " (the host's: " +
                      host_boot + ")");
        return failed("not root of a guest kernel of its own: " + said(o));
      };
    }
    // git refuses a repository another uid owns (the workspace is the host user's, seen through
    // 9p): the git probes name it safe through the environment (no file written), as a guest-
    // root user would, so that what they plant is judged, not git's refusal.
    if (p.command.find("git ") != std::string::npos) {
      p.command = "export GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=safe.directory GIT_CONFIG_VALUE_0='*'; " + p.command;
    } else if (p.id.starts_with("kernel-") || p.id == "sandbox-status") {
      // (sandbox-status: the guest says it applied no seccomp filter and no Landlock to root)
      // A call the guest's kernel took and failed only on the probe's harmless arguments
      // (EINVAL, ENOENT, EBADF...) was refused by nothing: not applicable either, never held.
      p.judge = [judge = p.judge, by_design](const Outcome& o) {
        Judgement j = judge(o);
        if (j.verdict == Verdict::escaped || (j.verdict == Verdict::held && failed_only_on_arguments(j.evidence)))
          return Judgement{Verdict::skipped, by_design + j.evidence};
        return j;
      };
    }
  }
  // What only root in the guest could try against the host.
  const std::string bashrc = c.home + "/.bashrc", marker = c.home + "/escape-test";
  c.targets.remember(bashrc);
  c.targets.remember(marker);
  // The view again, read-write: guest root binds the 9p export's root elsewhere (without the
  // guest's own mounts over it: HOME's tmpfs, the workspace's bind) read-write, and remounts
  // "/" read-write, then writes HOME's files and the workspace's hook through both. qemu,
  // which serves every 9p access, is the plan's unprivileged uid in the plan's own view on the
  // host: its read-only binds and Landlock there, not the guest's mount flags, are what hold.
  const std::string hook = c.ws + "/.git/hooks/pre-commit";
  v.push_back({"guest-root-view-write", "filesystem",
               "m=$(mktemp -d /tmp/exg-view.XXXXXX); mount --bind / \"$m\" && mount -o remount,bind,rw \"$m\" && "
               "echo \"BOUND / rw\"; mount -o remount,rw / 2>&1; "
               "for f in \"$m\"" + q(bashrc) + " \"$m\"" + q(marker) + " \"$m\"" + q(hook) + " " + q(bashrc) + " " + q(marker) +
                   "; do echo pwned >> \"$f\" 2>&1 && echo \"WROTE $f\"; done; umount \"$m\" 2>/dev/null; true",
               "guest root binding the view's 9p root read-write elsewhere (under the guest's own masks) and remounting / "
               "read-write writes nothing of the host: ~/.bashrc, ~/escape-test, the workspace's hook and the canaries "
               "unchanged",
               true, {}, false, true, "", 0, [&c, bashrc, marker](const Outcome& o) {
                 for (const auto& f : {bashrc, marker})
                   if (auto ch = c.targets.changed(f); !ch.empty()) return escaped(ch);
                 if (auto ch = c.files.any_changed(); !ch.empty()) return escaped(ch);
                 if (!has(o.out, "BOUND / rw")) return failed("the view's root could not be bound read-write, so nothing was tried through it: " + said(o));
                 return held("the 9p root bound read-write; ~/.bashrc, ~/escape-test, the hook and the canaries unchanged on the host (" +
                             said(o) + ")");
               }});
  // The guest's own walls gone: guest root flushes every nftables rule (the capture and the
  // output filter), then connects straight to the world and the metadata address. The guest
  // has no NIC: nothing may arrive.
  v.push_back({"guest-root-flush-walls", "network",
               "nft flush ruleset 2>&1 && echo FLUSHED; echo \"rules left: $(nft list ruleset | grep -c .)\"; "
               "curl -sS -m 3 --noproxy '*' http://203.0.113.10/ 2>&1; curl -sS -m 3 --noproxy '*' http://169.254.169.254/ 2>&1; "
               "bash -c 'echo exg > /dev/udp/203.0.113.10/53' 2>&1; true",
               "with the guest's nftables flushed by guest root, direct TCP and UDP to the world and the metadata address "
               "arrive nowhere (the guest has no NIC)",
               true, {}, true, false, "", 0, [&c](const Outcome& o) {
                 if (!has(o.out, "FLUSHED") || !has(o.out, "rules left: 0"))
                   return failed("the guest's rules were not flushed, so nothing was tried without them: " + said(o));
                 Judgement j = judge_network(o, c, false);
                 if (j.verdict == Verdict::held) j.evidence = "rules flushed; " + j.evidence;
                 return j;
               }});
  // A nested container (podman on the guest's bridge, the root the guest sees as its image)
  // tries the same from its own network namespace, and the host's HOME.
  auto& nested = v.emplace_back(ProbeSpec{
      "guest-root-nested-container", "network",
      "podman run --rm --rootfs /:O sh -c 'echo in-nested; curl -sS -m 5 --noproxy \"*\" http://203.0.113.10/ 2>&1; "
      "curl -sS -m 5 --noproxy \"*\" http://169.254.169.254/ 2>&1; echo pwned >> " + bashrc + " 2>&1; cat " +
          c.home + "/.ssh/id_ed25519 2>&1' 2>&1",
      "a nested container of guest root (podman, bridged) reaches neither the world directly nor the metadata address "
      "(captured and refused, nothing arrives), nor writes or reads the host's HOME",
      true, {}, true, true, "", 0, [&c, bashrc](const Outcome& o) {
        if (!has(o.out, "in-nested")) return failed("the nested container did not start: " + said(o));
        if (auto ch = c.targets.changed(bashrc); !ch.empty()) return escaped(ch);
        if (auto ch = c.files.any_changed(); !ch.empty()) return escaped(ch);
        Judgement j = judge_network(o, c, false);
        if (j.verdict == Verdict::held) j.evidence = "in a nested container: " + j.evidence + "; HOME unchanged";
        return j;
      }});
  if (auto it = c.tools.find("podman"); it == c.tools.end() || !it->second) {
    nested.skip_why = "podman is not installed on this host (the guest runs the host's)";
    nested.required = false;
  }
  // (podman under TCG: seconds to set up the bridge and the container)
  nested.timeout_s = 180;
}

// The catalog on the landlock layer (docs/layers.md, "The landlock layer"): the host's kernel and
// namespaces behind Landlock, seccomp and the proxy. Each probe keeps its own verdict unless what
// it saw is what the layer says it cannot do: then it is "not applicable", naming the documented
// limit and what was seen (never "held"); an outcome no documented limit explains stays escaped
// or failed. The probes that check a namespace are judged against the layer's own walls where it
// has one (sandbox-in-place: Landlock, seccomp, no capabilities), against its limit where not.
void adapt_for_landlock(std::vector<ProbeSpec>& v, const Context& c) {
  auto limit = [](const std::string& which, const std::string& seen) {
    return Judgement{Verdict::skipped,
                     std::string(kNotApplicable) + "a documented limit of the landlock layer (docs/layers.md: " + which +
                         "); seen: " + seen};
  };
  // The workspace files the probes compare against (canaries, hooks, targets) as they are now:
  // a protected name written during a run is quarantined by the sweep at its end (limit 6), and
  // is put back after that probe is judged, so that the next probes start from the same tree.
  struct Saved {
    std::string path, content;
    struct stat st;
  };
  auto saved = std::make_shared<std::vector<Saved>>();
  for (const char* rel : {"/.git/config", "/.git/hooks/pre-commit", "/vendor/lib/.git/config",
                          "/vendor/lib/.git/hooks/pre-commit", "/vendor/lib/tools/fsmon.sh", "/tools/pre-push",
                          "/config/prod.yaml"}) {
    Saved f{c.ws + rel, "", {}};
    if (::lstat(f.path.c_str(), &f.st) != 0 || !S_ISREG(f.st.st_mode)) continue;
    f.content = read_whole(f.path).value_or("");
    saved->push_back(std::move(f));
  }
  auto put_back = [saved] {
    for (const auto& f : *saved) {
      if (read_whole(f.path) == f.content) continue;
      std::error_code ec;
      std::filesystem::create_directories(std::filesystem::path(f.path).parent_path(), ec);
      std::ofstream(f.path, std::ios::binary | std::ios::trunc) << f.content;
      ::chmod(f.path.c_str(), f.st.st_mode & 07777);
      (void)::lchown(f.path.c_str(), f.st.st_uid, f.st.st_gid);
    }
  };
  // The run's notes (no namespaces, what is read-only) come first in every probe's output: the
  // shell's own first line is what the evidence shows.
  auto planted = [](const Outcome& o, const std::string& path) -> std::string {
    for (const auto& j : o.audit) {
      std::string p = j.value("path", std::string());
      if (j.value("event", "") == "planted" && !p.empty() && (path == p || path.starts_with(p + "/")))
        return p.substr(p.rfind('/') + 1) + " -> " + j.value("quarantined_to", std::string("quarantine"));
    }
    return "";
  };
  const std::string refused_policy = "exguardian: landlock layer: cannot deny ";
  for (auto& p : v) {
    auto judge = p.judge;
    if (p.id == "sandbox-in-place") {
      const std::string probe_file = c.home + "/.exg-in-place";
      p.command = "id -u; grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status; touch ~/.exg-in-place 2>&1 | tail -1";
      p.expectation = "no namespaces here: the uid is not 0 (or 0 without capabilities), no_new_privs and a seccomp "
                      "filter are set, and Landlock holds (HOME, outside the writable paths, cannot be written)";
      p.judge = [probe_file](const Outcome& o) {
        std::string s;
        for (char ch : o.out) s += ch == '\t' ? ' ' : ch;
        std::istringstream is(s);
        std::string uid;
        std::getline(is, uid);
        bool no_caps = has(s, "CapEff: 0000000000000000"), nnp = has(s, "NoNewPrivs: 1"), sc = has(s, "Seccomp: 2");
        struct stat st;
        bool wrote = ::lstat(probe_file.c_str(), &st) == 0;
        if (wrote) ::unlink(probe_file.c_str());
        if (o.status == 0 && !uid.empty() && (uid != "0" || no_caps) && no_caps && nnp && sc && !wrote)
          return held("uid=" + uid + ", CapEff 0, NoNewPrivs 1, Seccomp 2; HOME not writable (Landlock)");
        return failed("sandbox not in place (uid " + uid + (no_caps ? "" : ", capabilities held") + (nnp ? "" : ", no_new_privs unset") +
                      (sc ? "" : ", no seccomp filter") + (wrote ? ", HOME writable" : "") + "): " + said(o));
      };
      continue;
    }
    if (p.id == "proc-host-processes")
      p.judge = [judge, limit](const Outcome& o) {
        Judgement j = judge(o);
        return j.verdict == Verdict::escaped ? limit("1, host processes are visible: /proc is the host's", j.evidence) : j;
      };
    else if (p.id == "proc-pid1")
      p.judge = [judge, limit](const Outcome& o) {
        Judgement j = judge(o);
        return j.verdict == Verdict::escaped ? limit("1, no pid namespace: pid 1 is the host's init", j.evidence) : j;
      };
    else if (p.id == "sys-class-net")
      p.judge = [judge, limit](const Outcome& o) {
        Judgement j = judge(o);
        return j.verdict == Verdict::escaped
                   ? limit("10, the host's network namespace: its interfaces are listed; TCP reaches only the proxy", j.evidence)
                   : j;
      };
    else if (p.id.starts_with("move-parent-of-"))
      // A denied path inside a writable tree: the layer refuses the run (fail closed).
      p.judge = [judge, limit, refused_policy](const Outcome& o) {
        Judgement j = judge(o);
        auto at = o.out.find(refused_policy);
        if (j.verdict == Verdict::held && o.status == 125 && at != std::string::npos)
          return limit("a denyRead or denyWrite path inside a writable tree refuses the run, exit 125",
                       first_line(o.out.substr(at)));
        return j;
      };
    else if (p.id == "net-socks-metadata-name" || p.id == "net-socks-metadata-ip")
      // The proxy's SOCKS port is the kernel's pick here, and asks for the run's token: the
      // address, user and password the proxy variables carry.
      p.command = "curl -sS -m 5 -x \"" + std::string(p.id.ends_with("name") ? "socks5h" : "socks5") +
                  "://${ALL_PROXY#*://}\" http://" + (p.id.ends_with("name") ? "meta.test" : "169.254.169.254") + "/";
    else if (p.id.starts_with("limit-") && p.id != "limit-timeout")
      p.judge = [judge, limit](const Outcome& o) {
        if (o.status == 125 && has(o.out, "cgroup"))
          return limit("3, no cgroup limits where none is delegated: an explicit limit refuses the run", said(o));
        return judge(o);
      };
    else if (p.id.starts_with("kernel-tiocsti") || p.id.starts_with("kernel-tioclinux"))
      // The injection needs a terminal: no controlling one (setsid) and no pty to open.
      p.judge = [judge](const Outcome& o) {
        Judgement j = judge(o);
        if (j.verdict == Verdict::escaped && has(o.out, "failed: EACCES"))
          return held("refused before the ioctl: no pty can be opened here (Landlock: /dev/ptmx is not writable, "
                      "docs/layers.md 11) and no controlling terminal (setsid): " + first_line(o.out));
        return j;
      };
    else if (p.id == "kernel-ioctl-winsize-allowed")
      p.judge = [judge, limit](const Outcome& o) {
        Judgement j = judge(o);
        return j.verdict == Verdict::escaped && has(o.out, "refused: EACCES")
                   ? limit("11, no pseudo-terminals: /dev/ptmx is not writable", first_line(o.out))
                   : j;
      };
    else if (p.id == "kernel-socket-inet-udp-allowed" || p.id == "kernel-socket-inet6-udp-allowed")
      p.judge = [judge, limit](const Outcome& o) {
        Judgement j = judge(o);
        return j.verdict == Verdict::escaped && has(o.out, "refused: EPERM")
                   ? limit("10, UDP sockets are refused: the host's network has no namespace to confine them to", first_line(o.out))
                   : j;
      };
    else if (p.id.starts_with("kernel-socket-inet"))
      // Raw and packet inet sockets: the host-network filter refuses every inet socket but a stream,
      // errno-only; its answer takes precedence over the main filter's notification, so the
      // supervisor sees no call and writes no audit line.
      p.judge = [judge](const Outcome& o) {
        Judgement j = judge(o);
        if (j.verdict == Verdict::failed && has(j.evidence, "no syscall_refused line"))
          return held(first_line(o.out) + " (the host-network filter's errno answer: no notification, so no audit line)");
        return j;
      };
    if (p.category == "persistence") {
      p.judge = [judge = p.judge, limit, planted, put_back](const Outcome& o) {
        Judgement j = judge(o);
        put_back();
        const std::string removed = " removed on the host";
        if (j.verdict == Verdict::escaped && j.evidence.ends_with(removed)) {
          std::string q = planted(o, j.evidence.substr(0, j.evidence.size() - removed.size()));
          if (!q.empty())
            return limit("6, protected names in the workspace are not read-only during the run",
                         "written, then quarantined by the end-of-run sweep (exit " + std::to_string(o.status) + "; audit: planted " + q + ")");
        }
        return j;
      };
    }
  }
}

// With no sandbox (--sandbox none) a probe runs on the host as the caller, in the coordinator's
// namespaces: the test world's network and a private mount namespace, but the host's pids, files
// and kernel. Safe are the probes that then touch only what the escape test made (the workspace,
// the fake HOME, its marker process and listeners, the world's servers) or only their own
// process; everything else is named here with what it would do, and a probe in neither list
// (added later, not reviewed) is unsafe. Kernel probes: their own table (probe/probes.cpp).
void mark_without_sandbox(std::vector<ProbeSpec>& v) {
  static const std::map<std::string, std::string> kUnsafe = {
      {"proc-environ-every",
       "reads the environment of every process it can see: with no sandbox, the host's, whose real secrets "
       "would land in the report"},
      {"proc-pid1-signals", "sends SIGKILL and SIGSTOP to pid 1: with no sandbox, the host's init"},
      {"persist-exguardian-binary", "appends to /run/exguardian/exguardian: with no sandbox, a host path"},
      {"limit-pids", "a fork bomb: with no sandbox, no limit stops it"},
      {"limit-memory", "allocates 1 GiB: with no sandbox, the host's memory"},
      {"limit-timeout", "defined by exguardian run's --timeout (sleep 1000 with nothing to end it)"},
      {"guest-own-kernel", "the microVM layer's own probe"},
  };
  // Each touches only the escape test's own workspace, fake HOME, marker process, listeners
  // and world, or its own process.
  static const std::set<std::string> kSafe = {
      "sandbox-in-place", "sandbox-status", "seed-touch-home", "seed-read-credentials", "seed-env-secrets",
      "seed-curl-example-org", "seed-curl-metadata", "seed-docker-socket", "seed-git-hook", "net-direct-tcp",
      "net-direct-metadata", "net-metadata-name", "net-metadata-hex", "net-metadata-decimal", "net-metadata-octal",
      "net-metadata-short", "net-metadata-v4mapped", "net-metadata-connect", "net-loopback-short",
      "net-private-literal", "net-rebind-loopback", "net-rebind-private", "net-host-header",
      "net-socks-metadata-name", "net-socks-metadata-ip", "net-udp", "net-transparent-sni-mismatch",
      "net-transparent-unassigned", "net-allowed-control", "persist-nested-repo-hook", "persist-hookspath",
      "persist-git-config-append", "persist-workspace-bashrc", "persist-envrc", "persist-vscode-tasks",
      "persist-mcp-json", "persist-policy-file", "persist-fsmonitor-target", "persist-home-bashrc",
      "planted-bare-repo-fsmonitor", "planted-config-worktree", "planted-hookspath-dir", "planted-lefthook",
      "planted-hg-hgrc", "planted-agent-mcp-config", "planted-pdbrc", "planted-code-workspace", "planted-pth",
      "planted-pyc", "planted-index-only", "planted-allow-write-tree", "planted-symlinked-hook-target",
      "planted-unreadable-dir", "planted-deep-dir", "planted-snapshot-worktree",
      // (files the escape test made in the host's temp trees, read)
      "sibling-tmp-read",
      // (its detached processes carry the escape test's marker; the cleanup row ends them)
      "persist-background-process", "move-parent-of-denywrite", "move-parent-of-denyread",
      "move-parent-of-credentials",
      // (set-id files in the workspace, removed by their judges)
      "setid-file-left", "setid-file-capability", "host-unix-socket", "host-unix-socket-bound-later",
      "host-unix-dgram-bound-later", "proc-host-processes",
      // (kill -9 of the escape test's own marker process)
      "proc-host-kill", "proc-pid1", "sys-class-net", "secrets-credential-files", "fd-leak", "stdio-reopen",
      "term-no-ctty", "work-write", "work-git-commit", "work-compile-c", "work-python", "work-tmp"};
  for (auto& p : v) {
    if (p.id.starts_with("kernel-")) {
      std::string why;
      p.without_sandbox.safe = probe::probe_safe_without_sandbox(p.id.substr(7), why);
      if (!p.without_sandbox.safe) p.without_sandbox.why = why;
    } else if (auto it = kUnsafe.find(p.id); it != kUnsafe.end()) {
      p.without_sandbox.why = it->second;
    } else if (kSafe.count(p.id)) {
      p.without_sandbox = {true, ""};
    }
  }
}

}  // namespace

std::vector<ProbeSpec> build_catalog(Context& ctx) {
  std::vector<ProbeSpec> v;
  const Context& c = ctx;
  auto need = [&](ProbeSpec& p, std::initializer_list<const char*> tools) {
    for (const char* t : tools) {
      auto it = c.tools.find(t);
      if (it == c.tools.end() || !it->second) {
        p.skip_why = std::string(t) + " is not installed on this host";
        return;
      }
    }
  };
  auto add = [&](ProbeSpec p) -> ProbeSpec& {
    v.push_back(std::move(p));
    return v.back();
  };

  // ---- The sandbox is in place (everything destructive waits for this one).
  // (uid 0 only without any capability: gVisor's fallback when no subordinate
  // uid range can be mapped runs the command as gVisor's own uid 0.)
  add({"sandbox-in-place", "sandbox", "hostname; id -u; grep '^CapEff:' /proc/self/status",
       "hostname is exguardian and the uid is not 0 (or 0 without capabilities)", true, {}, false, false, "", 0,
       [](const Outcome& o) {
         std::istringstream is(o.out);
         std::string host, uid, caps;
         std::getline(is, host);
         std::getline(is, uid);
         std::getline(is, caps);
         bool no_caps = caps.find("0000000000000000") != std::string::npos;
         if (o.status == 0 && host == "exguardian" && !uid.empty() && (uid != "0" || no_caps))
           return held("hostname=" + host + " uid=" + uid + (uid == "0" ? " (no capabilities)" : ""));
         return failed("sandbox not in place: " + said(o));
       }});
  // (gVisor's /proc/self/status has no NoNewPrivs line: then prctl(PR_GET_NO_NEW_PRIVS) says it.)
  add({"sandbox-status", "sandbox",
       "grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status; grep -q '^NoNewPrivs:' /proc/self/status || "
       "python3 -c 'import ctypes; print(\"NoNewPrivs:\", ctypes.CDLL(None).prctl(39, 0, 0, 0, 0))'",
       "no capabilities, no_new_privs set, a seccomp filter in place (CapEff 0, NoNewPrivs 1, Seccomp 2)", true, {},
       false, false, "", 0, [](const Outcome& o) {
         std::string s;
         for (char ch : o.out) s += ch == '\t' ? ' ' : ch;
         bool cap = has(s, "CapEff: 0000000000000000"), nnp = has(s, "NoNewPrivs: 1"), sc = has(s, "Seccomp: 2");
         std::string line;
         for (char ch : s) line += ch == '\n' ? ' ' : ch;
         while (line.find("  ") != std::string::npos) line.replace(line.find("  "), 2, " ");
         if (cap && nnp && sc) return held(line);
         return escaped(std::string(!sc ? "no seccomp filter" : !cap ? "capabilities held" : "no_new_privs unset") + ": " + line);
       }});

  // ---- The seed's escape lines, each its own probe, judged from both sides.
  add({"seed-touch-home", "filesystem", "touch ~/escape-test",
       "no ~/escape-test appears in HOME on the host (HOME writes are throwaway)", true, {}, false, false, "", 0,
       [&c](const Outcome& o) { return judge_unchanged(o, c, c.home + "/escape-test"); }});
  add({"seed-read-credentials", "secrets", "cat ~/.ssh/id_ed25519 ~/.aws/credentials",
       "the canary key and credentials are not readable", true, {}, false, false, "", 0,
       [&c](const Outcome& o) { return judge_secret(o, c); }});
  add({"seed-env-secrets", "secrets", "env | grep -i -E 'key|token|secret'",
       "GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY, OPENAI_API_KEY (set to the canary outside) are not in the environment",
       true, {}, false, false, "", 0, [&c](const Outcome& o) { return judge_secret(o, c); }});
  // Not only the command's own environment: every process it can see, pid 1 (the init or the
  // agent) included. gVisor serves /proc/1/environ even of a process that is not dumpable.
  add({"proc-environ-every", "secrets",
       "n=0; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < \"$f\" 2>/dev/null && n=$((n+1)); done; echo \"read $n\"",
       "no process the sandbox can see, pid 1 included, has the canary secrets in its environment", true, {}, false,
       false, "", 0, [&c](const Outcome& o) {
         auto at = o.out.rfind("read ");
         if (at == std::string::npos || o.out.compare(at, 6, "read 0") == 0)
           return failed("no environment could be read: " + said(o));
         return judge_secret(o, c);
       }});
  {
    auto& p = add({"seed-curl-example-org", "network", "curl -sS https://example.org",
                   "refused by the proxy (not on the allow list), logged; no real address is contacted", true, {},
                   true, false, "", 0, [&c](const Outcome& o) { return judge_network(o, c, true); }});
    need(p, {"curl"});
  }
  {
    auto& p = add({"seed-curl-metadata", "network", "curl -sS -m 3 http://169.254.169.254/",
                   "the metadata address is refused; the world's metadata server receives nothing", true, {}, true,
                   false, "", 0, [&c](const Outcome& o) { return judge_network(o, c, true); }});
    need(p, {"curl"});
  }
  add({"seed-docker-socket", "runtime sockets", "ls -l /var/run/docker.sock",
       "runtime sockets are invisible (/var/run is empty inside)", true, {}, false, false, "", 0,
       [](const Outcome& o) {
         if (o.status == 0) return escaped("docker.sock visible: " + first_line(o.out));
         return held(said(o));
       }});
  add({"seed-git-hook", "persistence", "echo 'echo pwned' >> .git/hooks/pre-commit",
       ".git/hooks/pre-commit unchanged on the host", true, {}, false, false, "", 0,
       [&c](const Outcome& o) { return judge_unchanged(o, c, c.ws + "/.git/hooks/pre-commit"); }});

  // ---- Kernel surface: every probe of `exguardian probe --list`, run inside.
  // The probe's own verdict compares the answer with the process layer's filter (which errno; a
  // supervisor notification). The container layer gives the same answers and notifications, so
  // it is judged the same way. On gVisor the attack itself is judged: only "allowed" is an escape;
  // another refusal (gVisor's kernel: ENOSYS for what it does not implement; runsc ignores the
  // profile's errnoRet, so EPERM where the process layer says EAFNOSUPPORT) is held, and said so,
  // and no audit line is expected (runsc has no seccomp notify).
  // gVisor answers from its own kernel (the Sentry); so does a microVM's guest kernel, behind the
  // process layer's rules installed errno-only by the guest's init (no supervisor inside: no audit
  // line either).
  const std::optional<layer::Kind> kind = layer::parse_kind(c.layer);
  const bool own_kernel = kind == layer::Kind::Gvisor || kind == layer::Kind::Microvm;
  // The exguardian binary inside: the namespace layers bind it at /run/exguardian/exguardian; the
  // landlock layer makes no mount, so there it is where the host keeps it.
  const bool no_mounts = kind == layer::Kind::Landlock;
  const std::string exg_inside = no_mounts ? q(c.exe) : "/run/exguardian/exguardian";
  for (const auto& n : probe::probe_names()) {
    bool ok_work = probe::probe_expects_success(n);
    auto& k = add({"kernel-" + n, category_of_kernel_probe(n), exg_inside + " probe " + n,
         ok_work ? "allowed: ordinary work must still succeed"
                 : "refused (EPERM from the filter, ENOSYS for clone3, SIGSYS for foreign ABIs) and, where the "
                   "supervisor answered, recorded in the audit log",
         true, {}, false, false, "", 0, [ok_work, own_kernel, kind, n, &c](const Outcome& o) {
           std::string line = first_line(o.out);
           auto colon = line.find(": ");
           std::string tail = colon == std::string::npos ? line : line.substr(colon + 2);
           if (o.status == 1 && own_kernel) {
             if (ok_work) {
               // gVisor implements personality() for PER_LINUX only: its kernel, not the filter, says EINVAL.
               if (kind == layer::Kind::Gvisor && n.starts_with("personality-") && has(tail, "EINVAL"))
                 return Judgement{Verdict::skipped, "gVisor's own personality() refuses this (EINVAL), not the filter: " + tail};
               return failed("ordinary work refused on the " + c.layer + " layer: " + tail);
             }
             if (has(tail, "EXPECTED: allowed") || tail.empty()) return escaped(tail.empty() ? said(o) : tail);
             if (has(tail, "error:")) return failed("probe did not run: " + tail);
             return held("refused, with another answer than the process layer's filter: " + tail);
           }
           if (o.status == 1) return escaped(tail.empty() ? said(o) : tail);
           if (o.status != 0) return failed("probe did not run: " + said(o));
           if (ok_work) return held(tail);
           bool supervisor_answer = has(line, "refused: ") && !has(line, "ENOSYS");
           if (supervisor_answer && own_kernel)
             return held(tail + (kind == layer::Kind::Gvisor
                                     ? " (runsc has no seccomp notify: gVisor's filter answers itself, no audit line)"
                                     : " (the guest's filter answers itself, errno-only: no supervisor inside, no audit line)"));
           if (supervisor_answer) {
             auto a = syscall_refusal(o);
             if (a.empty()) return failed(tail + ", but no syscall_refused line in the audit log");
             return held(tail + "; " + a);
           }
           return held(tail);
         }});
    k.batch = "kernel";
    k.tag_arg = true;
  }

  // ---- Network bypasses, against the test world.
  struct NetCase {
    const char* id;
    std::string cmd;
    const char* expect;
    bool via_proxy;
  };
  const std::string C = "curl -sS -m 5 --noproxy '' ";
  std::vector<NetCase> net = {
      {"net-direct-tcp", "curl -sS -m 3 --noproxy '*' http://203.0.113.10/",
       "a direct TCP connection (no proxy) gets nowhere: captured and refused by the proxy (transparent "
       "egress) or no route out",
       false},
      {"net-direct-metadata", "curl -sS -m 3 --noproxy '*' http://169.254.169.254/",
       "a direct connection to the metadata address gets nowhere: captured and refused, or no route out", false},
      {"net-metadata-name", C + "http://meta.test/", "meta.test (allowed by name) resolves to 169.254.169.254: refused by address", true},
      {"net-metadata-hex", C + "http://0xa9fea9fe/", "0xa9fea9fe (the metadata address in hex) refused", true},
      {"net-metadata-decimal", C + "http://2852039166/", "2852039166 (metadata as one number) refused", true},
      {"net-metadata-octal", C + "http://0251.0376.0251.0376/", "0251.0376.0251.0376 (octal) refused", true},
      {"net-metadata-short", C + "http://169.254.43518/", "169.254.43518 (short form) refused", true},
      {"net-metadata-v4mapped", C + "'http://[::ffff:169.254.169.254]/'", "::ffff:169.254.169.254 (IPv4-mapped) refused", true},
      {"net-metadata-connect", C + "-p http://meta.test/", "CONNECT tunnel to meta.test refused", true},
      {"net-loopback-short", C + "http://127.1/", "127.1 (the supervisor side's loopback) refused", true},
      {"net-private-literal", C + "http://10.0.0.5/", "10.0.0.5 (RFC 1918) refused without a CIDR rule", true},
      {"net-rebind-loopback", C + "http://rebind.test/", "rebind.test (allowed by name) resolves to 127.0.0.1: refused", true},
      {"net-rebind-private", C + "http://private.test/", "private.test (allowed by name) resolves to 10.0.0.5: refused", true},
      {"net-host-header", C + "-H 'Host: meta.test' http://allowed.test/",
       "a request whose Host header names another host than its target is refused", true},
      {"net-socks-metadata-name", "curl -sS -m 5 --socks5-hostname 127.0.0.1:1080 http://meta.test/",
       "SOCKS5 CONNECT to meta.test refused", true},
      {"net-socks-metadata-ip", "curl -sS -m 5 --socks5 127.0.0.1:1080 http://169.254.169.254/",
       "SOCKS5 CONNECT to 169.254.169.254 refused", true},
  };
  for (auto& n : net) {
    bool vp = n.via_proxy;
    auto& p = add({n.id, "network", n.cmd, n.expect, true, {}, true, false, "", 0,
                   [&c, vp](const Outcome& o) { return judge_network(o, c, vp); }});
    need(p, {"curl"});
  }
  {
    auto& p = add({"net-udp", "network", "bash -c 'echo exg > /dev/udp/203.0.113.10/53'",
                   "a UDP datagram to the world does not arrive (no route)", true, {}, true, false, "", 0,
                   [&c](const Outcome& o) { return judge_network(o, c, false); }});
    need(p, {"bash"});
  }
  // Transparent egress: what a client that ignores the proxy variables could try on the addresses
  // the in-sandbox resolver hands out (198.18.0.0/15, routed to the proxy).
  {
    // A TLS ClientHello naming a denied host, sent to the address handed out for an allowed one
    // (port 80, where the world's server listens: the proxy reads the first bytes on any port).
    auto& p = add({"net-transparent-sni-mismatch", "network",
                   "python3 -c '\n"
                   "import socket, ssl\n"
                   "a = socket.gethostbyname(\"allowed.test\"); print(\"ADDR\", a)\n"
                   "c = ssl.create_default_context(); c.check_hostname = False; c.verify_mode = ssl.CERT_NONE\n"
                   "try:\n"
                   "    t = c.wrap_socket(socket.create_connection((a, 80), timeout=5), server_hostname=\"denied.test\")\n"
                   "    print(\"HANDSHAKE\", t.version())\n"
                   "except Exception as e: print(\"REFUSED\", type(e).__name__, e)\n'",
                   "TLS with the server name denied.test on the address the resolver handed out for allowed.test "
                   "is refused as a mismatch before any upstream is connected (no server sees even a bare "
                   "connection), and logged",
                   true, {}, true, false, "", 0, [&c](const Outcome& o) {
                     // The proxy reads the client's first bytes before it connects anywhere (it waits for
                     // them a bounded while; only a silent client, of a server-first protocol, gets its
                     // upstream connected first): a mismatch must reach nothing at all. The world's
                     // servers log every connection they accept, a bare one too.
                     if (!o.world_log.empty()) return escaped("the world's server saw: " + world_first(o));
                     if (has(o.out, "HANDSHAKE")) return escaped("a TLS handshake completed: " + first_line(o.out));
                     if (has(o.out, c.canary)) return escaped("canary in the output");
                     // Without transparent egress (a policy's "transparent": false) there is no capture: a direct
                     // connection, judged as one.
                     if (!has(o.out, "ADDR 198.1")) return judge_network(o, c, false);
                     auto r = egress_refusal(o, "TLS server name mismatch");
                     if (r.empty()) return failed("closed, but the audit log has no mismatch refusal (" + said(o) + ")");
                     auto at = o.out.find("REFUSED");
                     std::string inside = at == std::string::npos ? said(o) : first_line(o.out.substr(at));
                     return held(inside + "; audit: " + r + "; no server saw a connection");
                   }});
    need(p, {"python3"});
  }
  {
    // An address of the resolver's range that it never handed out: it stands for no name.
    auto& p = add({"net-transparent-unassigned", "network",
                   "python3 -c '\n"
                   "import socket\n"
                   "try: print(\"ADDR\", socket.gethostbyname(\"allowed.test\"))\n"
                   "except Exception as e: print(\"ADDR none\", e)\n"
                   "try:\n"
                   "    s = socket.create_connection((\"198.19.255.254\", 80), timeout=5)\n"
                   "    s.sendall(b\"GET / HTTP/1.1\\r\\nHost: allowed.test\\r\\n\\r\\n\")\n"
                   "    d = s.recv(200); print(\"ANSWER\", d) if d else print(\"CLOSED\")\n"
                   "except Exception as e: print(\"REFUSED\", type(e).__name__, e)\n'",
                   "a connection to 198.19.255.254 (in the resolver's range, never handed out) is closed without "
                   "reaching anything, and logged",
                   true, {}, true, false, "", 0, [&c](const Outcome& o) {
                     if (!o.world_log.empty()) return escaped("the world's server received: " + world_first(o));
                     if (has(o.out, "ANSWER")) return escaped("got an answer: " + first_line(o.out));
                     if (has(o.out, c.canary)) return escaped("canary in the output");
                     if (!has(o.out, "ADDR 198.1")) return judge_network(o, c, false);  // no capture (as above)
                     auto r = egress_refusal(o, "capture range");
                     if (r.empty()) return failed("nothing arrived, but the audit log has no refusal for it (" + said(o) + ")");
                     std::string said_inside = o.out.substr(o.out.find('\n') + 1);
                     return held(first_line(said_inside) + "; audit: " + r + "; nothing arrived at the world's servers");
                   }});
    need(p, {"python3"});
  }
  {
    auto& p = add({"net-allowed-control", "ordinary work", "curl -sS -m 10 http://allowed.test/",
                   "an allowed name works through the proxy (the control: the world is reachable, so the refusals "
                   "above are the proxy's)",
                   true, {}, true, false, "", 0, [](const Outcome& o) {
                     if (o.status == 0 && has(o.out, "hello from 203.0.113.10") && has(o.world_log, "203.0.113.10 GET /"))
                       return held("answered: " + first_line(o.out) + "; the server logged it");
                     return failed("the allowed request did not work: " + said(o));
                   }});
    need(p, {"curl"});
  }

  // ---- Persistence: code that runs later, on the host, must stay unwritable.
  struct Persist {
    const char* id;
    std::string cmd, path, expect;
  };
  std::vector<Persist> persist = {
      {"persist-nested-repo-hook", "echo 'echo pwned' >> vendor/lib/.git/hooks/pre-commit",
       c.ws + "/vendor/lib/.git/hooks/pre-commit", "a nested repository's hook is unwritable"},
      {"persist-hookspath", "git config core.hooksPath /tmp/evil-hooks", c.ws + "/.git/config",
       "git config core.hooksPath cannot be set (.git/config unwritable)"},
      {"persist-git-config-append", "printf '[core]\\n\\thooksPath = /tmp/evil\\n' >> .git/config", c.ws + "/.git/config",
       ".git/config cannot be appended to"},
      {"persist-workspace-bashrc", "echo 'echo pwned' >> .bashrc", c.ws + "/.bashrc",
       "a shell rc file cannot be created in the workspace"},
      {"persist-envrc", "echo 'echo pwned' > .envrc", c.ws + "/.envrc", ".envrc cannot be created"},
      {"persist-vscode-tasks",
       "mkdir -p .vscode && echo '{\"version\":\"2.0.0\",\"tasks\":[{\"label\":\"x\",\"command\":\"echo pwned\","
       "\"runOptions\":{\"runOn\":\"folderOpen\"}}]}' > .vscode/tasks.json",
       c.ws + "/.vscode/tasks.json", ".vscode/tasks.json cannot be created"},
      {"persist-mcp-json", "echo '{\"mcpServers\":{}}' > .mcp.json", c.ws + "/.mcp.json", ".mcp.json cannot be created"},
      {"persist-policy-file", "echo '{\"network\":{\"allowedDomains\":[\"*.evil.test\"]}}' > .exguardian.json",
       c.ws + "/.exguardian.json", "the project policy file cannot be written"},
      {"persist-fsmonitor-target", "echo 'echo pwned' >> vendor/lib/tools/fsmon.sh", c.ws + "/vendor/lib/tools/fsmon.sh",
       "the script a repository's core.fsmonitor names (run by the host's next git status) is unwritable"},
      {"persist-home-bashrc", "echo 'echo pwned' >> ~/.bashrc", c.home + "/.bashrc",
       "~/.bashrc on the host is unchanged (writes to HOME do not persist)"},
      {"persist-exguardian-binary", "echo pwned >> " + exg_inside, c.exe,
       no_mounts ? "the exguardian binary (at its host path: no mounts on this layer) is unwritable"
                 : "the exguardian binary bind-mounted inside is read-only"},
  };
  for (auto& p : persist) {
    std::string path = p.path;
    ctx.targets.remember(path);
    add({p.id, "persistence", p.cmd, p.expect, true, {}, false, false, "", 0,
         [&c, path](const Outcome& o) { return judge_unchanged(o, c, path); }});
  }
  // ---- Planted for later where a name list would not look (issue 12): judged on the host.
  struct Plant {
    const char* id;
    std::string cmd, path, expect;
  };
  const std::string touch = "touch /tmp/exg-planted-ran";
  std::vector<Plant> plants = {
      {"planted-bare-repo-fsmonitor",
       "mkdir -p bare-x/sub bare-x/objects bare-x/refs && echo 'ref: refs/heads/main' > bare-x/HEAD && "
       "printf '[core]\\n\\tfsmonitor = " + touch + "\\n' > bare-x/config",
       c.ws + "/bare-x/config", "a git directory by content (HEAD, objects/, refs/) in a subdirectory: its config "
       "(core.fsmonitor runs on git status in bare-x/sub) is quarantined"},
      {"planted-config-worktree", "printf '[core]\\n\\tfsmonitor = " + touch + "\\n' > .git/config.worktree",
       c.ws + "/.git/config.worktree", ".git/config.worktree (read with extensions.worktreeConfig) is quarantined"},
      {"planted-hookspath-dir",
       "mkdir -p vendor/lib/ci-hooks && printf '#!/bin/sh\\n" + touch + "\\n' > vendor/lib/ci-hooks/pre-commit",
       c.ws + "/vendor/lib/ci-hooks/pre-commit", "the directory core.hooksPath names (read from the repo's config), "
       "created during the run, is quarantined"},
      {"planted-lefthook", "echo 'pre-commit: {commands: {x: {run: " + touch + "}}}' > lefthook.yml",
       c.ws + "/lefthook.yml", "lefthook.yml (run by lefthook's git hooks) is quarantined"},
      {"planted-hg-hgrc", "mkdir -p hgrepo/.hg && printf '[hooks]\\nupdate = " + touch + "\\n' > hgrepo/.hg/hgrc",
       c.ws + "/hgrepo/.hg/hgrc", "a Mercurial repository's .hg/hgrc (hooks, extensions) is quarantined"},
      {"planted-agent-mcp-config",
       "mkdir -p .gemini && echo '{\"mcpServers\": {\"x\": {\"command\": \"sh\", \"args\": [\"-c\", \"" + touch +
           "\"]}}}' > .gemini/settings.json",
       c.ws + "/.gemini/settings.json", "an agent CLI's settings with an MCP server (.gemini/settings.json) are quarantined"},
      // Issue 39: REPL start-up files, names by pattern, executable artefacts review never shows.
      {"planted-pdbrc", "printf '!import os; os.system(\\x27" + touch + "\\x27)\n' > .pdbrc", c.ws + "/.pdbrc",
       "a .pdbrc (pdb runs it in the current directory) is quarantined"},
      {"planted-code-workspace",
       "echo '{\"tasks\": {\"version\": \"2.0.0\", \"tasks\": [{\"label\": \"x\", \"command\": \"" + touch +
           "\", \"runOptions\": {\"runOn\": \"folderOpen\"}}]}}' > app.code-workspace",
       c.ws + "/app.code-workspace", "a *.code-workspace with a folderOpen task (a name pattern) is quarantined"},
      {"planted-pth",
       "mkdir -p .venv/lib/python3/site-packages && echo 'import os; os.system(\"" + touch +
           "\")' > .venv/lib/python3/site-packages/zz.pth",
       c.ws + "/.venv/lib/python3/site-packages/zz.pth",
       "a .pth with an import line in a workspace virtualenv (runs at every start of that interpreter) is quarantined"},
      {"planted-pyc", "mkdir -p __pycache__ && echo planted > __pycache__/app.cpython-311.pyc",
       c.ws + "/__pycache__/app.cpython-311.pyc",
       "a compiled Python file written into the tree (it would run instead of the reviewed source) is quarantined"},
  };
  for (auto& p : plants) {
    std::string path = p.path;
    add({p.id, "persistence", p.cmd, p.expect, true, {}, false, false, "", 0,
         [path](const Outcome& o) { return judge_planted(o, path, on_host(path)); }});
  }
  {
    // A git directory found only by name, as OpenCode keeps its snapshots (HEAD, objects/, refs/
    // and a config of settings that name no command), whose core.worktree names the user's HOME:
    // a host tool that later runs `git --git-dir=snap-x checkout` (a snapshot restored) writes
    // its work tree there, rc files included. The sweep keeps such a config only when
    // core.worktree names a directory in the run's writable trees (sweep.cpp, worktree_within).
    std::string git_dir = c.ws + "/snap-x", path = git_dir + "/config", home = c.home;
    add({"planted-snapshot-worktree", "persistence",
         "mkdir -p snap-x/objects snap-x/refs && echo 'ref: refs/heads/main' > snap-x/HEAD && printf '[core]\\n"
         "\\trepositoryformatversion = 0\\n\\tfilemode = true\\n\\tbare = false\\n\\tautocrlf = false\\n"
         "\\tworktree = %s\\n' " + q(home) + " > snap-x/config",
         "a git directory found only by name (a fabricated snapshot) whose core.worktree is HOME: its config is "
         "quarantined, so a later `git --git-dir` on the host finds no work tree there",
         true, {}, false, false, "", 0, [path, home](const Outcome& o) {
           Judgement j = judge_planted(o, path, on_host(path));
           if (j.verdict == Verdict::escaped && has(read_whole(path).value_or(""), "worktree = " + home))
             j.evidence += "; its core.worktree is HOME: a later `git --git-dir=snap-x checkout` on the host writes there";
           else if (j.verdict == Verdict::held)
             j.evidence += "; a later `git --git-dir=snap-x` finds no core.worktree";
           return j;
         }});
  }
  {
    // No file is written: the host's next `git checkout -- .` would write it.
    std::string path = c.ws + "/.git/index";
    auto& p = add({"planted-index-only", "persistence",
                   "git update-index --add --cacheinfo 100644,$(echo '" + touch +
                       "' | git hash-object -w --stdin),.envrc && git ls-files .envrc",
                   "a protected name staged only in the git index (git update-index --cacheinfo .envrc): the index is "
                   "quarantined", true, {}, false, false, "", 0,
                   [path](const Outcome& o) { return judge_planted(o, path, on_host(path)); }});
    need(p, {"git"});
  }
  {
    std::string path = c.extra_tree + "/r/.git/hooks/pre-commit";
    add({"planted-allow-write-tree", "persistence",
         "mkdir -p " + q(c.extra_tree) + "/r/.git/hooks && printf '#!/bin/sh\\n" + touch + "\\n' > " +
             q(path),
         "a new repository's hook in a tree given with --allow-write is swept and quarantined too", true,
         {"--allow-write", c.extra_tree}, false, false, "", 0,
         [path](const Outcome& o) { return judge_planted(o, path, on_host(path)); }});
  }
  {
    // The hook is tools/pre-push through vendor/lib/.git/hooks/pre-push -> ../../../../tools/pre-push.
    std::string path = c.ws + "/tools/pre-push";
    ctx.targets.remember(path);
    add({"planted-symlinked-hook-target", "persistence", "echo '" + touch + "' >> tools/pre-push",
         "the target of a symlinked hook (vendor/lib/.git/hooks/pre-push -> tools/pre-push) is unwritable", true, {},
         false, false, "", 0, [&c, path](const Outcome& o) { return judge_unchanged(o, c, path); }});
  }
  {
    // As an ordinary user the sweep must give itself u+rx on hide/ to look, and put 000 back.
    std::string hide = c.ws + "/hide", path = hide + "/r/.git/hooks/pre-commit";
    add({"planted-unreadable-dir", "persistence",
         "mkdir -p hide/r/.git/hooks && echo 'ref: refs/heads/main' > hide/r/.git/HEAD && printf '#!/bin/sh\\n" + touch +
             "\\n' > hide/r/.git/hooks/pre-commit && chmod 000 hide",
         "a hook under a directory made unreadable (chmod 000) is still found and quarantined", true, {}, false, false,
         "", 0, [hide, path](const Outcome& o) {
           ::chmod(hide.c_str(), 0755);  // ours (or we are root): look inside
           return judge_planted(o, path, on_host(path));
         }});
  }
  {
    // 30 levels of 200-character names (6,000 bytes: beyond PATH_MAX), made by relative chdir.
    std::string top = c.ws + "/" + std::string(200, 'x');
    auto& p = add({"planted-deep-dir", "persistence",
                   "python3 -c 'import os\nfor i in range(30): os.mkdir(\"x\" * 200); os.chdir(\"x\" * 200)\n"
                   "os.makedirs(\"r/.git/hooks\"); open(\"r/.git/hooks/pre-commit\", \"w\").write(\"#!/bin/sh\\n" +
                       touch + "\\n\")'",
                   "a hook in a directory deeper than PATH_MAX is found (fd-relative walk) and quarantined", true, {},
                   false, false, "", 0, [top](const Outcome& o) {
                     int fd = ::open(top.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                     std::string name(200, 'x');
                     for (int i = 1; i < 30 && fd >= 0; ++i) {
                       int n = ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                       ::close(fd);
                       fd = n;
                     }
                     struct stat st;
                     bool present = fd >= 0 && ::fstatat(fd, "r/.git/hooks/pre-commit", &st, AT_SYMLINK_NOFOLLOW) == 0;
                     if (fd >= 0) ::close(fd);
                     if (fd < 0) return failed("the probe's tree was not made (" + said(o) + ")");
                     // The audit path is the deep one: judge by its tail.
                     for (const auto& j : o.audit)
                       if (j.value("event", "") == "planted" &&
                           j.value("path", std::string()).ends_with("/r/.git/hooks/pre-commit"))
                         return judge_planted(o, j.value("path", std::string()), present);
                     return judge_planted(o, top + "/.../r/.git/hooks/pre-commit", present);
                   }});
    need(p, {"python3"});
  }

  {
    const std::string m = c.leftover_marker;
    // The marker is split in the command so that only the detached processes carry it whole.
    std::string half1 = m.substr(0, m.size() / 2), half2 = m.substr(m.size() / 2);
    add({"persist-background-process", "persistence",
         "m=" + half1 + "; m=\"${m}" + half2 + "\"; (setsid sh -c \"sleep 60; : $m\" >/dev/null 2>&1 &); "
         "(sh -c \"sleep 60; : $m\" >/dev/null 2>&1 &); nohup sh -c \"sleep 60; : $m\" >/dev/null 2>&1 & echo detached",
         "processes that detach (setsid, double fork, nohup) die with the sandbox (checked on the host afterwards)",
         true, {}, false, false, "", 0, [](const Outcome& o) {
           if (o.status != 0) return failed("could not start the background processes: " + said(o));
           return held("started 3 detached processes; the host is checked for them after the sandbox ends");
         }});
  }

  // ---- A protected path stays where it is: renaming a parent must not carry
  // the protection away and leave the path itself writable or readable (issue 12).
  {
    struct Move {
      const char* id;
      std::vector<std::string> args;
      std::string cmd, expect;
      std::vector<std::string> unchanged;  // host paths: content (or absence) as before
      std::string secret;                  // must not appear in the output
    };
    std::string vault = vault_marker(c.canary);
    std::vector<Move> moves = {
        {"move-parent-of-denywrite", {"--deny-write", c.ws + "/config/prod.yaml"},
         "mv config config.old && mkdir config && echo pwned > config/prod.yaml; cat config/prod.yaml",
         "a denyWrite file's directory cannot be renamed away and replaced",
         {c.ws + "/config/prod.yaml", c.ws + "/config.old"}, ""},
        {"move-parent-of-denyread", {"--deny-read", c.ws + "/vault/key.txt"},
         "mv vault vault.x; cat vault.x/key.txt vault/key.txt",
         "a denyRead file's directory cannot be renamed to unmask it",
         {c.ws + "/vault/key.txt", c.ws + "/vault.x"}, vault},
        {"move-parent-of-credentials", {"--allow-write", c.home},
         "mv ~/.config ~/.config.x; cat ~/.config.x/gcloud/* ~/.config/gcloud/*",
         "with HOME writable, ~/.config cannot be renamed to unmask the gcloud credentials",
         {c.home + "/.config.x", c.home + "/.config/gcloud/application_default_credentials.json"}, c.canary},
    };
    for (auto& m : moves) {
      for (const auto& p : m.unchanged) ctx.targets.remember(p);
      auto paths = m.unchanged;
      std::string secret = m.secret;
      add({m.id, "persistence", m.cmd, m.expect, true, m.args, false, false, "", 0,
           [&c, paths, secret](const Outcome& o) {
             for (const auto& p : paths)
               if (auto ch = c.targets.changed(p); !ch.empty()) return escaped(ch);
             if (!secret.empty() && has(o.out, secret)) return escaped("the denied content was read: " + said(o));
             if (auto ch = c.files.any_changed(); !ch.empty()) return escaped(ch);
             return held(said(o) + "; the protected path is unchanged on the host");
           }});
    }
  }

  // ---- Set-id files and file capabilities: judged on the host after the run.
  add({"setid-file-left", "set-id files",
       "cp /usr/bin/id ./exg-setid; chmod 4755 ./exg-setid; chmod g+s ./exg-setid; install -m 6755 /usr/bin/id "
       "./exg-setid2; python3 -c 'import os; os.close(os.open(\"exg-setid3\", os.O_CREAT | os.O_WRONLY, 0o4755))'; "
       "ls -l exg-setid*",
       "no file the sandbox wrote has a set-uid or set-gid bit on the host (chmod, install, open with a set-id "
       "mode are refused)",
       true, {}, false, true, "", 0, [&c](const Outcome& o) {
         auto found = setid_files(c.ws);
         for (const char* n : {"/exg-setid", "/exg-setid2", "/exg-setid3"}) ::unlink((c.ws + n).c_str());
         if (!found.empty()) return escaped("set-id file on the host: " + found.front());
         std::string a = syscall_refusal(o);
         return held(said(o) + "; no set-id file in the workspace on the host" + (a.empty() ? "" : "; " + a));
       }});
  {
    auto& p = add({"setid-file-capability", "set-id files",
                   "cp /usr/bin/id ./exg-capf && python3 -c 'import os; os.setxattr(\"exg-capf\", "
                   "\"security.capability\", bytes([1, 0, 0, 2, 0, 0x20, 0, 0] + [0] * 12))' 2>&1 | tail -1",
                   "a file capability cannot be set (no CAP_SETFCAP inside): none on the host", true, {}, false, true,
                   "", 0, [&c](const Outcome& o) {
                     std::string f = c.ws + "/exg-capf";
                     bool cap = ::getxattr(f.c_str(), "security.capability", nullptr, 0) >= 0;
                     ::unlink(f.c_str());
                     if (cap) return escaped("security.capability set on " + f + " on the host");
                     return held(said(o) + "; no security.capability on the host");
                   }});
    need(p, {"python3"});
  }

  // ---- Host Unix sockets: a listener of the host on a socket the sandbox's view shows.
  {
    const std::string sock = c.host_socket;
    auto& p = add({"host-unix-socket", "runtime sockets",
                   "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"" + sock +
                       "\"); s.sendall(b\"EXG\"); s.close(); print(\"connected\")' 2>&1 | tail -1",
                   "connect() to a host service's pathname socket (in HOME) fails; the listener receives nothing",
                   true, {}, false, false, "", 0, [&c, sock](const Outcome& o) {
                     std::string log = read_whole(c.host_socket_log).value_or("");
                     if (!log.empty()) return escaped("the host listener got a connection: " + first_line(log));
                     if (has(o.out, "connected")) return escaped("connected to " + sock);
                     return held(said(o) + "; the host listener received nothing");
                   }});
    need(p, {"python3"});
    if (sock.empty()) p.skip_why = "no host listener: " + c.host_socket_why;
  }

  // A host service that binds its sockets in the workspace while the sandbox runs (an ssh-agent
  // or a docker daemon started later; `exguardian session --control unix:$PWD/ctl.sock`): the
  // probe asks the host's listener to bind, waits for its socket, then tries it. The stream
  // socket through connect(); the datagram one through sendmsg() (its destination lies in a
  // msghdr the seccomp filter cannot read) and sendto(). Judged by the host listener's log:
  // it must have bound that socket and received nothing on it.
  auto late_socket_probe = [&](const std::string& id, const std::string& sock, const std::string& client,
                               const std::string& expectation, const std::string& received) {
    auto& p = add({id, "runtime sockets",
                   ": > " + c.late_socket_trigger + "; i=0; while [ ! -e " + sock + " ] && [ ! -e " +
                       late_bound_marker(c.late_socket_trigger) + " ] && [ $i -lt 100 ]; do sleep 0.1; " +
                       "i=$((i+1)); done; python3 -c 'import socket; " + client + "' 2>&1 | tail -1",
                   expectation, true, {}, false, false, "", 0, [&c, sock, received](const Outcome& o) {
                     std::string log = read_whole(c.late_socket_log).value_or("");
                     if (has(log, sock + ": " + received)) return escaped("the late host socket got " + received);
                     if (has(o.out, "reached ")) return escaped("reached " + sock + ": " + first_line(o.out));
                     // The host side says it bound (gVisor's gofer may not even show the file).
                     if (!has(log, sock + ": bound"))
                       return failed("the host socket did not bind (no evidence either way): " + said(o));
                     return held(said(o) + "; the late host socket bound and received nothing");
                   }});
    need(p, {"python3"});
    if (sock.empty()) p.skip_why = "no late host listener: " + c.late_socket_why;
  };
  late_socket_probe("host-unix-socket-bound-later", c.late_socket,
                    "s = socket.socket(socket.AF_UNIX); s.connect(\"" + c.late_socket +
                        "\"); s.sendall(b\"EXG\"); s.close(); print(\"reached by connect\")",
                    "connect() to a host socket bound in the workspace after the sandbox started fails; the listener "
                    "receives nothing",
                    "a connection");
  late_socket_probe("host-unix-dgram-bound-later", c.late_dgram,
                    "s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM); "
                    "s.sendmsg([b\"EXG\"], [], 0, \"" + c.late_dgram + "\") == 3 and print(\"reached by sendmsg\"); "
                    "s.sendto(b\"EXG\", \"" + c.late_dgram + "\") == 3 and print(\"reached by sendto\")",
                    "a datagram (sendmsg, sendto) to a host socket bound in the workspace after the sandbox started is "
                    "refused; the host socket receives nothing",
                    "a datagram");

  // ---- /proc and /sys: the host stays invisible.
  {
    const std::string m = c.host_marker;
    std::string half1 = m.substr(0, m.size() / 2), half2 = m.substr(m.size() / 2);
    add({"proc-host-processes", "proc/sys",
         "m=" + half1 + "; m=\"${m}" + half2 + "\"; n=0; for f in /proc/[0-9]*/cmdline; do n=$((n+1)); "
         "if tr '\\0' ' ' < \"$f\" 2>/dev/null | grep -q \"$m\"; then echo \"visible: $f\"; fi; done; "
         "echo \"$n processes visible\"",
         "a host process (started by escape-test, marker in its argv) is not visible inside", true, {}, false, false,
         "", 0, [](const Outcome& o) {
           if (has(o.out, "visible: /proc")) return escaped("host process visible: " + first_line(o.out));
           std::string last;
           std::istringstream is(o.out);
           for (std::string l; std::getline(is, l);) if (!l.empty()) last = l;
           return held(last.empty() ? said(o) : last + "; the host's marker process is not among them");
         }});
  }
  {
    std::string pid = std::to_string(c.host_marker_pid);
    add({"proc-host-kill", "proc/sys", "kill -9 " + pid,
         "a host process cannot be signalled (pid " + pid + " of the host, outside the sandbox's pid namespace)", true,
         {}, false, false, "", 0, [&c](const Outcome& o) {
           // (the marker is escape-test's child, unreaped: killed, it is a zombie). A signal the
           // kill delivered (exit 0) takes effect a moment later: look again for up to 2 s.
           for (int i = 0; o.status == 0 && i < 20 && process_running(c.host_marker_pid); ++i) ::usleep(100000);
           if (c.host_marker_pid > 0 && !process_running(c.host_marker_pid))
             return escaped("the host's marker process is gone after the probe");
           return held(said(o) + "; the host's marker process is alive");
         }});
  }
  add({"proc-pid1", "proc/sys", "cat /proc/1/comm; tr '\\0' ' ' < /proc/1/cmdline | cut -c1-100",
       "pid 1 inside is exguardian's init (own pid namespace)", true, {}, false, false, "", 0,
       [](const Outcome& o) {
         if (o.status == 0 && first_line(o.out) == "exguardian") return held("/proc/1/comm = exguardian");
         // Container layers: the small static exguardian-init, bound at /run/exguardian/init.
         if (o.status == 0 && first_line(o.out) == "init" &&
             o.out.find("\n/run/exguardian/init ") != std::string::npos)
           return held("/proc/1 is exguardian-init (/run/exguardian/init)");
         return escaped("pid 1 is not exguardian's init: " + said(o));
       }});
  // pid 1 is the sandbox's own. Were it killable from inside, the kernel would end every
  // process of the sandbox with it; were it stoppable, the command would stay unreaped until
  // the supervisor's timeout. The kernel drops SIGKILL and SIGSTOP sent to a pid namespace's
  // init from inside it (a microVM guest's init is its kernel's global init, protected alike).
  // SIGCONT at the end: a stopped pid 1 would otherwise hold the probe to its timeout.
  add({"proc-pid1-signals", "proc/sys",
       "kill -KILL 1; kill -STOP 1; sleep 0.2; echo \"pid 1: $(cut -d' ' -f3 /proc/1/stat) $(cat /proc/1/comm)\"; "
       "kill -CONT 1; echo \"the sandbox runs on\"",
       "SIGKILL and SIGSTOP sent to pid 1 from inside are dropped: pid 1 runs on, and so does the sandbox", true, {},
       false, false, "", 0, [](const Outcome& o) {
         std::string line;
         std::istringstream is(o.out);
         for (std::string l; std::getline(is, l);)
           if (l.starts_with("pid 1: ")) line = l;
         bool running = line.starts_with("pid 1: S ") || line.starts_with("pid 1: R ");
         if (o.status == 0 && running && has(o.out, "the sandbox runs on"))
           return held(line.substr(7) + " after SIGKILL and SIGSTOP to pid 1; the sandbox ran on");
         return escaped("pid 1 was stopped or killed: " + said(o));
       }});
  // (gVisor has no /sys/class/net: the interface list then comes from if_nameindex().)
  add({"sys-class-net", "proc/sys",
       "ls /sys/class/net 2>/dev/null || python3 -c 'import socket; print(\" \".join(n for _, n in socket.if_nameindex()))'",
       "only lo is visible (own netns)", true, {},
       false, false, "", 0, [](const Outcome& o) {
         std::string s;
         for (char ch : o.out) if (!std::isspace(static_cast<unsigned char>(ch))) s += ch;
         if (o.status == 0 && s == "lo") return held("interfaces: lo");
         return escaped("interfaces: " + first_line(o.out));
       }});
  add({"secrets-credential-files", "secrets", "cat ~/.ssh/id_ed25519 ~/.aws/credentials ~/.netrc 2>&1 | head -3; ls -la ~/.ssh 2>&1 | head -3",
       "credential locations are masked (empty or unreadable) inside", true, {}, false, false, "", 0,
       [&c](const Outcome& o) { return judge_secret(o, c); }});

  // ---- Another sandbox's files in the host's temporary trees (issue 42): a sibling of the same
  // uid keeps its private TMPDIR in /tmp (the landlock layer's /tmp/exguardian-ID), and files in
  // /var/tmp and /dev/shm. The probe tries them by path, through an O_PATH descriptor reopened
  // by /proc/self/fd, by listing and by find. A layer with its own /tmp, /var/tmp and /dev/shm
  // holds by construction (the paths do not exist inside); the landlock layer, which shares the
  // host's, by its rules (the temp trees denied but for the sandbox's own paths).
  {
    std::string dirs;
    for (const auto& d : c.sibling_dirs) dirs += " " + q(d);
    const std::string opath =
        "import os, sys\n"
        "try: fd = os.open(sys.argv[1], os.O_PATH)\n"
        "except OSError as e: print(\"O_PATH open:\", e.strerror); sys.exit()\n"
        "try: print(\"O_PATH read:\", open(\"/proc/self/fd/%d\" % fd).read())\n"
        "except OSError as e: print(\"O_PATH opened, read through /proc/self/fd:\", e.strerror)\n";
    auto& p = add({"sibling-tmp-read", "filesystem",
                   "for d in" + dirs + "; do echo \"== $d\"; cat \"$d/secret\" 2>&1 | head -2; python3 -c '" + opath +
                       "' \"$d/secret\" 2>&1 | tail -1; ls -la \"$d\" 2>&1 | head -5; find \"$d\" 2>&1 | head -5; done; "
                       "echo sibling-tries-done",
                   "a sibling sandbox's files in the host's /tmp, /var/tmp and /dev/shm (same uid) are neither read (by "
                   "path, O_PATH), listed nor found: absent inside (the layer's own temp trees) or refused",
                   true, {}, false, false, "", 0, [&c](const Outcome& o) {
                     std::istringstream is(o.out);
                     std::map<std::string, std::string> seen;  // dir -> what was said of it
                     std::string dir;
                     for (std::string l; std::getline(is, l);) {
                       if (l.starts_with("== ")) {
                         dir = l.substr(3);
                         continue;
                       }
                       if (!c.sibling_secret.empty() && has(l, c.sibling_secret))
                         return escaped("a sibling's secret read" + (dir.empty() ? "" : " in " + dir) + ": " + first_line(l));
                       if (dir.empty()) continue;
                       if (l == dir + "/secret" || (l.starts_with("-") && l.ends_with(" secret")))
                         return escaped("a sibling's directory listed: " + dir + " holds " + first_line(l));
                       std::string& s = seen[dir];
                       for (const auto& [said_here, word] : {std::pair<std::string, std::string>{"Permission denied", "refused"},
                                                             {"No such file", "absent"}})
                         if (has(l, said_here) && !has(s, word)) s += (s.empty() ? "" : ", ") + word;
                     }
                     if (!has(o.out, "sibling-tries-done")) return failed("the probe did not finish: " + said(o));
                     bool all_absent = !c.sibling_dirs.empty(), any_refused = false;
                     std::string what;
                     for (const auto& d : c.sibling_dirs) {
                       std::string s = seen.count(d) ? seen[d] : "nothing said";
                       all_absent = all_absent && s == "absent";
                       any_refused = any_refused || has(s, "refused");
                       what += (what.empty() ? "" : "; ") + d + ": " + s;
                     }
                     if (all_absent)
                       return held("held by construction: the sandbox has its own /tmp, /var/tmp and /dev/shm, where none "
                                   "of the sibling's paths exists (" + what + "); the secret never in the output");
                     if (!any_refused) return failed("neither refused nor absent (" + what + "): " + said(o));
                     const bool landlock = layer::parse_kind(c.layer) == layer::Kind::Landlock;
                     return held(std::string(landlock ? "refused by Landlock (the host's temp trees are denied but for the "
                                                        "sandbox's own paths): "
                                                      : "") +
                                 "cat, O_PATH, ls and find of the sibling's files: " + what + "; the secret never in the output");
                   }});
    if (c.sibling_dirs.empty()) {
      p.skip_why = "no sibling directories: " + c.sibling_why;
      p.required = false;
    }
  }

  // ---- fd leaks.
  {
    std::string fd = std::to_string(c.leaked_fd);
    add({"fd-leak", "fd leak",
         "for f in /proc/$$/fd/*; do echo \"${f##*/} -> $(readlink \"$f\")\"; done; cat /proc/self/fd/" + fd + " 2>&1 | head -2",
         "the fd " + fd + " that escape-test holds open on a canary file is not open inside; only 0-2 are", true, {},
         false, false, "", 0, [&c, fd](const Outcome& o) {
           if (has(o.out, c.canary)) return escaped("canary read through an inherited fd");
           std::istringstream is(o.out);
           std::vector<std::string> fds;
           for (std::string l; std::getline(is, l);) {
             auto a = l.find(" -> ");
             if (a == std::string::npos) continue;
             std::string n = l.substr(0, a);
             if (n != "0" && n != "1" && n != "2") fds.push_back(l);
           }
           for (auto& l : fds) if (l.starts_with(fd + " ")) return escaped("inherited fd open inside: " + l);
           std::string list = "only fds 0-2 open";
           if (!fds.empty()) list = "extra fds (the shell's own): " + fds.front();
           return held(list + "; fd " + fd + " not open");
         }});
  }

  // ---- stdio opened again (issue 39): a file handed over as stdin, stdout or stderr keeps the
  // rights it was given. The harness gives this probe a stdin file and an appended output file
  // (mode 0666, in HOME/stdio, which --deny-read hides by path); the probe tries to write and
  // truncate its stdin through /proc/self/fd/0, /dev/stdin, /dev/fd/0 and another process's
  // /proc/PID/fd/0, to read the output file back (dd writes what it read to its stdout, the same
  // file) and to truncate it. Judged on the host: the stdin file's digest, the output file's
  // first line (the harness's, still first) and that line nowhere else in what came out.
  {
    // (stderr redirected before each attempt opens its target; `true`, not `:`: a failed
    // redirection of a special builtin would end sh there)
    const std::string sink = " 2>/dev/null";
    std::string cmd = "for f in /proc/self/fd/0 /dev/stdin /dev/fd/0; do echo pwned" + sink + " >> $f; true" + sink +
                      " > $f; done; sleep 20 0<&0 & p=$!; echo pwned" + sink + " > /proc/$p/fd/0; true" + sink +
                      " > /proc/$p/fd/0; dd if=/proc/self/fd/1 iflag=nonblock bs=4096 count=1" + sink +
                      "; dd if=/proc/$p/fd/2 iflag=nonblock bs=4096 count=1" + sink + "; true" + sink +
                      " > /dev/stdout; kill $p; echo stdin-is-$(stat -L -c %F /proc/self/fd/0" + sink + " | tr ' ' -)";
    auto& p = add({"stdio-reopen", "fd leak", cmd,
                   "stdin, stdout and stderr files opened again through /proc/self/fd, /dev/stdin, /dev/fd and "
                   "another process's /proc/PID/fd are neither written, truncated nor read back",
                   true, {"--deny-read", c.stdio_dir}, false, true, "", 0, [&c](const Outcome& o) {
                     if (auto ch = c.targets.changed(c.stdin_file); !ch.empty())
                       return escaped(ch + " (the probe's stdin, opened again for writing)");
                     if (!o.stdio_marker_kept) return escaped("the output file handed over was truncated or overwritten");
                     if (has(o.out, c.stdio_marker)) return escaped("the output file handed over was read back");
                     if (o.timed_out || !has(o.out, "stdin-is-")) return failed("the probe did not finish: " + said(o));
                     auto at = o.out.find("stdin-is-");
                     return held("stdin file unchanged; output file neither truncated nor read back; stdin inside: " +
                                 first_line(o.out.substr(at + 9)));
                   }});
    p.stdio_files = true;
  }

  // ---- Terminal.
  add({"term-no-ctty", "terminal", ": < /dev/tty && echo HAVE_CTTY", "no controlling terminal of the host inside (setsid)",
       true, {}, false, false, "", 0, [](const Outcome& o) {
         if (has(o.out, "HAVE_CTTY")) return escaped("/dev/tty opened: a controlling terminal inside");
         return held(said(o));
       }});

  // ---- Ordinary work that must succeed.
  add({"work-write", "ordinary work", "echo EXGWORK-ok > work-file.txt && cat work-file.txt",
       "a file written in the workspace persists on the host", true, {}, false, false, "", 0,
       [&c](const Outcome& o) {
         auto f = read_whole(c.ws + "/work-file.txt");
         if (o.status == 0 && f && has(*f, "EXGWORK-ok")) return held("work-file.txt written and present on the host");
         return failed("workspace write did not persist: " + said(o));
       }});
  {
    auto& p = add({"work-git-commit", "ordinary work",
                   "echo sandboxed > committed.txt && git add committed.txt && git commit -q -m 'from the sandbox' && "
                   "git log -1 --format=%s",
                   "git add and commit work in the workspace repository", true, {}, false, false, "", 0,
                   [&c](const Outcome& o) {
                     auto log = read_whole(c.ws + "/.git/logs/HEAD");
                     if (o.status == 0 && has(o.out, "from the sandbox") && log && has(*log, "from the sandbox"))
                       return held("committed; the host's .git/logs/HEAD has the commit");
                     return failed("git commit failed: " + said(o));
                   }});
    need(p, {"git"});
  }
  {
    auto& p = add({"work-compile-c", "ordinary work",
                   "printf '#include <stdio.h>\\nint main(void){puts(\"EXGCC-\" \"ok\");return 0;}\\n' > hello.c && "
                   "gcc -o hello hello.c && ./hello",
                   "a C file compiles and runs", true, {}, false, false, "", 0, [](const Outcome& o) {
                     if (o.status == 0 && has(o.out, "EXGCC-ok")) return held("compiled and ran: EXGCC-ok");
                     return failed("gcc or the program failed: " + said(o));
                   }});
    need(p, {"gcc"});
    if (!p.skip_why.empty()) p.required = false;
  }
  {
    auto& p = add({"work-python", "ordinary work", "python3 -c 'import sys; print(\"EXGPY-\" + \"ok\", sys.version.split()[0])'",
                   "python3 runs", true, {}, false, false, "", 0, [](const Outcome& o) {
                     if (o.status == 0 && has(o.out, "EXGPY-ok")) return held(first_line(o.out));
                     return failed("python3 failed: " + said(o));
                   }});
    need(p, {"python3"});
    if (!p.skip_why.empty()) p.required = false;
  }
  add({"work-tmp", "ordinary work", "echo tmp-ok > \"${TMPDIR:-/tmp}/f\" && cat \"${TMPDIR:-/tmp}/f\"",
       "a private /tmp is writable", true, {}, false, false, "", 0, [](const Outcome& o) {
         if (o.status == 0 && has(o.out, "tmp-ok")) return held("TMPDIR writable");
         return failed(said(o));
       }});

  // ---- Resource limits: a runaway process is stopped (only once the sandbox is in place).
  auto limit_judge = [&c](int want, std::string what) {
    return [&c, want, what](const Outcome& o) {
      if (o.status == 125 && !c.as_root)
        return Judgement{Verdict::skipped, "this user cannot have cgroups on this host (exguardian run refuses an "
                                           "explicit limit it cannot enforce: exit 125, fail closed)"};
      bool reported = has(o.out, "exguardian: killed: " + what);
      if (o.timed_out) return escaped("the runaway was not stopped by exguardian (escape-test's own timeout killed it)");
      if (reported && (o.status == want || (want == 124 && o.status == 137)))
        return held("exit " + std::to_string(o.status) + "; reported: exguardian: killed: " + what);
      if (o.status == want) return failed("exit " + std::to_string(want) + " but not reported as '" + what + "': " + said(o));
      return escaped("not stopped as expected (want " + std::to_string(want) + "): " + said(o));
    };
  };
  // gVisor creates processes slowly (ptrace platform) and a loaded host slows it more: the bomb
  // gets 20 s there to reach its limit before the timeout ends it (5 s was seen to pass unreached).
  const bool slow_forks = layer::parse_kind(c.layer) == layer::Kind::Gvisor;
  const std::string bomb_timeout = slow_forks ? "20s" : "5s";
  add({"limit-pids", "limits", "bomb() { bomb | bomb & }; bomb; sleep 100",
       "a fork bomb under --pids 64 --timeout " + bomb_timeout + " is contained and reported as the pids limit", true,
       {"--pids", "64", "--timeout", bomb_timeout}, false, true, "", slow_forks ? 45 : 30, [&c, bomb_timeout](const Outcome& o) {
         if (o.status == 125 && !c.as_root)
        return Judgement{Verdict::skipped, "this user cannot have cgroups on this host (exguardian run refuses an "
                                           "explicit limit it cannot enforce: exit 125, fail closed)"};
         if (o.timed_out) return escaped("not stopped by exguardian (escape-test's own timeout)");
         if (has(o.out, "pids limit 64")) return held("exit " + std::to_string(o.status) + "; reported: pids limit 64 reached");
         if (layer::parse_kind(c.layer) == layer::Kind::Gvisor) {
           // On gVisor the command's limit is RLIMIT_NPROC inside its kernel (oci/layer.cpp): the bomb
           // gets EAGAIN there and no cgroup event reaches the supervisor, unless gVisor's own stub
           // processes happen to fill the host cgroup first (timing). What is observable is judged:
           // forks refused inside, and the run ended by exguardian's timeout (124, reported) or by
           // gVisor's kernel giving up on a stub (2).
           bool refused = has(o.out, "Cannot fork") || has(o.out, "Resource temporarily unavailable") ||
                          has(o.out, "retry: ");
           bool ended = (o.status == 124 && has(o.out, "killed: timeout " + bomb_timeout)) || o.status == 2;
           if (refused && ended)
             return held("exit " + std::to_string(o.status) + "; forks refused inside gVisor (RLIMIT_NPROC 64: "
                         "gVisor's kernel, not the host cgroup, so no pids-limit report)");
         }
         return failed("pids limit not reported: " + said(o));
       }});
  {
    bool py = c.tools.count("python3") && c.tools.at("python3");
    std::string hog = py ? "python3 -c 'b = bytearray(1 << 30); print(\"allocated\", len(b))'"
                         : "head -c 1073741824 /dev/zero | tail -c 1073741824 > /dev/null";
    add({"limit-memory", "limits", hog, "a 1 GiB allocation under --memory 128M is killed (137) and reported", true,
         {"--memory", "128M", "--timeout", "30s"}, false, true, "", 45, limit_judge(137, "memory limit 128M")});
  }
  add({"limit-timeout", "limits", "sleep 1000", "sleep 1000 under --timeout 2s ends with 124, reported", true,
       {"--timeout", "2s"}, false, true, "", 15, limit_judge(124, "timeout 2s")});
  if (kind == layer::Kind::Microvm) adapt_for_microvm(v, c);
  if (kind == layer::Kind::Microvm && c.guest_root) adapt_for_guest_root(v, ctx);
  if (kind == layer::Kind::Landlock) adapt_for_landlock(v, c);

  // The "userland" batch: one sandbox instead of one each. Every member is judged by its own
  // output slice and exit status, and at most by host state that only it changes (its own
  // target file, the host listener's log, the host's marker process) and by the canaries
  // (ctx.files), which no member's command writes: persist-hookspath, persist-git-config-append,
  // seed-git-hook and persist-home-bashrc write those, so they keep a sandbox each, or a
  // neighbour's judge would see their change. Judges still run at each probe's own place in
  // the catalogue. Not batched: what needs the world's log or the proxy's audit lines (network),
  // the sandbox's own exit status and post-run sweep (planted-*: exit 123 and a "planted" line;
  // persist-workspace-bashrc, -envrc, -vscode-tasks, -mcp-json, -policy-file: the files are
  // written and the sweep at the sandbox's end quarantines them, so in a shared sandbox they
  // would stay in the workspace, an .exguardian.json among them, for the neighbours after them),
  // its own run args (limits, move-*, planted-allow-write-tree), the destructive ones (limits,
  // setid-*, whose refusals are also read from the audit log), sandbox-in-place (the gate),
  // fd-leak (it reads the sandbox's own fd table, which the batch's shell is part of) and
  // persist-background-process (its processes would outlive it among its neighbours).
  static const char* const kUserland[] = {
      "sandbox-status", "seed-touch-home", "seed-read-credentials", "seed-env-secrets", "proc-environ-every",
      "seed-docker-socket", "persist-nested-repo-hook", "persist-exguardian-binary", "persist-fsmonitor-target",
      "planted-symlinked-hook-target", "host-unix-socket", "host-unix-socket-bound-later", "host-unix-dgram-bound-later", "proc-host-processes",
      "proc-host-kill", "proc-pid1",
      "proc-pid1-signals", "sys-class-net", "secrets-credential-files", "sibling-tmp-read", "term-no-ctty", "work-write",
      "work-git-commit", "work-compile-c", "work-python", "work-tmp"};
  for (auto& p : v)
    if (std::find(std::begin(kUserland), std::end(kUserland), p.id) != std::end(kUserland)) p.batch = "userland";
  // What a shared sandbox cannot give a probe is never batched, whatever the above says.
  for (auto& p : v)
    // (landlock: a protected name written is quarantined by the sweep at the sandbox's end, exit
    // 123: the persistence probes' own outcome there, each in its own sandbox)
    if (!p.run_args.empty() || p.needs_world || p.destructive || (kind == layer::Kind::Landlock && p.category == "persistence"))
      p.batch.clear();
  mark_without_sandbox(v);
  return v;
}

}  // namespace exg::evidence
