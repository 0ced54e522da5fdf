#include "microvm/accel_probe.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <vector>

#include "microvm/guest/guest_abi.hpp"
#include "microvm/guest_image.hpp"
#include "microvm/snapshot.hpp"
#include "util/unique_fd.hpp"

namespace exg::microvm {

namespace {

constexpr char kProofFile[] = "kvm-proof";

std::string first_line_of(const std::string& path) {
  std::ifstream f(path);
  std::string l;
  std::getline(f, l);
  return l;
}

// What the proof depends on: this host boot, /dev/kvm, qemu and the kernel.
std::string proof_context(const GuestImage& img) {
  auto id = [](const std::string& p) {
    struct stat st;
    if (::stat(p.c_str(), &st) != 0) return std::string("-");
    return std::to_string(st.st_rdev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
           std::to_string(st.st_mtim.tv_sec);
  };
  return first_line_of("/proc/sys/kernel/random/boot_id") + "|" + id("/dev/kvm") + "|" + id(kQemuBinary) + "|" +
         id(img.kernel) + "|" + id(img.initramfs);
}

// "CONTEXT\tok|fails\tDETAIL" from the first readable, safe proof file.
bool cached(const std::string& context, AccelProof& out) {
  for (const auto& d : template_read_dirs()) {
    struct stat st;
    std::string p = d + "/" + kProofFile;
    if (::lstat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || (st.st_uid != 0 && st.st_uid != ::geteuid()) ||
        (st.st_mode & 022))
      continue;
    std::string l = first_line_of(p);
    size_t t1 = l.find('\t'), t2 = t1 == std::string::npos ? t1 : l.find('\t', t1 + 1);
    if (t2 == std::string::npos || l.substr(0, t1) != context) continue;
    out.kvm_boots = l.substr(t1 + 1, t2 - t1 - 1) == "ok";
    out.detail = l.substr(t2 + 1);
    out.from_cache = true;
    return true;
  }
  return false;
}

void keep(const std::string& context, const AccelProof& p) {
  std::string d = template_write_dir();
  if (d.empty()) return;
  std::string cmd = d;  // mkdir -p
  for (size_t at = 1; at <= cmd.size(); ++at)
    if (at == cmd.size() || cmd[at] == '/') ::mkdir(cmd.substr(0, at).c_str(), 0755);
  std::string tmp = d + "/." + kProofFile + "." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << context << "\t" << (p.kvm_boots ? "ok" : "fails") << "\t" << p.detail << "\n";
    if (!f) return;
  }
  ::chmod(tmp.c_str(), 0644);
  if (::rename(tmp.c_str(), (d + "/" + kProofFile).c_str()) != 0) ::unlink(tmp.c_str());
}

AccelProof boot_under_kvm(const GuestImage& img, int timeout_ms) {
  AccelProof r;
  UniqueFd kvm(::open("/dev/kvm", O_RDWR | O_CLOEXEC));
  if (!kvm) {
    r.detail = std::string("/dev/kvm: ") + std::strerror(errno);
    return r;
  }
  kvm.reset();
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    r.detail = "pipe failed";
    return r;
  }
  std::vector<std::string> argv = {kQemuBinary, "-M", "microvm,acpi=on", "-nodefaults", "-no-user-config",
                                   "-display", "none", "-no-reboot",
                                   "-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
                                   "-m", "128M", "-smp", "1", "-accel", "kvm", "-cpu", "host",
                                   "-kernel", img.kernel, "-initrd", img.initramfs,
                                   "-append", std::string("console=ttyS0 reboot=t panic=-1 quiet loglevel=0 ") + guest::kBootProbeArg,
                                   "-serial", "stdio"};
  auto t0 = std::chrono::steady_clock::now();
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(out[0]), ::close(out[1]);
    r.detail = "fork failed";
    return r;
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    int nul = ::open("/dev/null", O_RDWR);
    ::dup2(nul, 0);
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    std::vector<char*> a;
    for (auto& s : argv) a.push_back(s.data());
    a.push_back(nullptr);
    ::execv(a[0], a.data());
    ::_exit(127);
  }
  ::close(out[1]);
  std::string seen;
  bool ok = false, ended = false;
  for (;;) {
    int left = timeout_ms - static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                 std::chrono::steady_clock::now() - t0).count());
    if (left <= 0) break;
    pollfd p{out[0], POLLIN, 0};
    int n = ::poll(&p, 1, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    char b[4096];
    ssize_t got = ::read(out[0], b, sizeof b);
    if (got <= 0) {
      ended = true;
      break;
    }
    if (seen.size() < 65536) seen.append(b, static_cast<size_t>(got));
    if (seen.find(guest::kBootProbeLine) != std::string::npos) {
      ok = true;
      break;
    }
  }
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  ::close(out[0]);
  char when[64];
  std::snprintf(when, sizeof when, "%.0f ms", ms);
  r.kvm_boots = ok;
  if (ok) {
    r.detail = std::string("a guest booted to its init under KVM in ") + when;
  } else {
    // qemu's own complaint when it said one (its last line), else the timeout.
    std::string last;
    for (size_t b = 0, e; b < seen.size(); b = e + 1) {
      e = seen.find('\n', b);
      if (e == std::string::npos) e = seen.size();
      std::string l = seen.substr(b, e - b);
      if (!l.empty() && l.find_first_not_of(" \r\t") != std::string::npos) last = l;
    }
    if (last.size() > 160) last = last.substr(0, 160) + "...";
    r.detail = ended ? "qemu ended without the guest reaching its init" + (last.empty() ? "" : ": " + last)
                     : "the guest did not reach its init within " + std::to_string(timeout_ms / 1000) +
                           " s under KVM (a nested host that runs no ordinary guest?)";
  }
  return r;
}

}  // namespace

AccelProof prove_kvm(int timeout_ms) {
  auto img = find_guest_image();
  if (!img) return {false, img.error().str(), false};
  if (::access(kQemuBinary, X_OK) != 0) return {false, std::string(kQemuBinary) + " not found", false};
  if (::access("/dev/kvm", F_OK) != 0) return {false, "no /dev/kvm", false};
  std::string ctx = proof_context(*img);
  AccelProof p;
  if (cached(ctx, p)) return p;
  p = boot_under_kvm(*img, timeout_ms);
  keep(ctx, p);
  return p;
}

Accel chosen_accel(std::string* why) {
  auto img = find_guest_image();
  AccelProof p;
  bool have = img && ::access("/dev/kvm", F_OK) == 0 && cached(proof_context(*img), p);
  if (have && p.kvm_boots) {
    if (why) *why = "KVM: " + p.detail + " (doctor's proof, this host boot)";
    return Accel::Kvm;
  }
  if (why)
    *why = have ? "TCG (software emulation): KVM was tried and does not boot a guest here: " + p.detail
                : "TCG (software emulation): KVM not proved on this host boot (`exguardian doctor` boots a guest to prove it)";
  return Accel::Tcg;
}

}  // namespace exg::microvm
