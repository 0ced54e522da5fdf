// The escape test's probes: what each runs inside the sandbox, what must
// happen, and how the outcome is judged from both sides (the probe's own
// output and exit status; the host's files, the world's servers, the audit log).
#pragma once
#include <sys/types.h>

#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "evidence/suite.hpp"

namespace exg::evidence {

struct Outcome {
  int status = -1;  // exit status as a shell reports it (128+N for signal N)
  bool timed_out = false;
  std::string out;                     // stdout and stderr, interleaved
  std::vector<nlohmann::json> audit;   // this probe's audit log lines
  std::string world_log;               // what the world's servers logged during the probe
  // ProbeSpec::stdio_files: the output file still began with Context::stdio_marker (taken
  // off `out`), as the harness wrote it before the run.
  bool stdio_marker_kept = true;
};

struct Judgement {
  Verdict verdict;
  std::string evidence;
};

// Files on the host whose content (or absence) a probe must not change.
class HostFiles {
 public:
  void remember(const std::string& path);  // records the content now (its SHA-256), or its absence
  void remember_again();                    // every remembered path's content now, as the new reference
  // "" when unchanged, else "PATH changed" / "PATH created" / "PATH removed".
  std::string changed(const std::string& path) const;
  // The first change among every remembered path, or "".
  std::string any_changed() const;
  void forget(const std::string& path) { files_.erase(path); }

 private:
  std::map<std::string, std::optional<std::string>> files_;
};

std::optional<std::string> read_whole(const std::string& path);

// Whether pid still runs: a zombie (killed, not yet reaped by its parent) does not.
bool process_running(pid_t pid);

struct Context {
  std::string canary;         // the secret planted in files and env
  std::string home, ws;       // fake HOME, workspace (host paths)
  std::string host_marker;    // in argv of a host process (argv[0])
  pid_t host_marker_pid = -1;
  std::string leftover_marker;  // in argv of processes a probe tries to leave behind
  int leaked_fd = -1;           // an fd open to a canary file when the sandboxes start
  std::string exe;              // this exguardian binary (host path)
  std::string extra_tree;       // a directory outside the workspace, given with --allow-write to some probes
  bool world_up = false;
  std::string world_why;
  bool as_root = false;
  std::string layer = "process";      // process | container | gvisor: what the probes run against
  bool guest_root = false;            // microvm with --microvm-root: the command is the guest's root
  std::map<std::string, bool> tools;  // curl, gcc, python3, bash, git
  std::string host_socket, host_socket_log;  // a host listener's pathname socket (in HOME) and what it received
  std::string host_socket_why;                // why there is none (host_socket empty)
  // A host listener that binds in the workspace only once the probe asks (start_late_unix_listener).
  std::string late_socket, late_socket_trigger, late_socket_log, late_socket_why;
  std::string late_dgram;  // its datagram socket, bound at the same time
  // The stdio probe's files, in HOME/stdio (readable by path inside but for --deny-read): its
  // stdin, and the first line the harness writes into its output file before the run.
  std::string stdio_dir, stdin_file, stdio_marker;
  // A sibling sandbox's private directories in the host's temporary trees (a landlock run's
  // TMPDIR in /tmp, one in /var/tmp and one in /dev/shm), each with a file `secret` holding
  // sibling_secret, owned by the uid the probes run as; empty: sibling_why says why none.
  std::vector<std::string> sibling_dirs;
  std::string sibling_secret, sibling_why;
  HostFiles files;    // canaries and the workspace's hook: no probe may change them
  HostFiles targets;  // what one probe tries to change (checked by that probe only)
};

// Whether a probe may run with no sandbox at all (escape-test --sandbox none), on the host as
// the caller. Set for every probe by build_catalog from explicit lists (kernel probes: their
// row in probe/probes.cpp): a probe nobody reviewed stays unsafe.
struct WithoutSandbox {
  bool safe = false;
  std::string why = "not reviewed as safe to run with no sandbox";  // when not safe: what it would do
};

struct ProbeSpec {
  std::string id, category, command, expectation;
  bool required = true;
  std::vector<std::string> run_args;  // extra `exguardian run` args (limits)
  bool needs_world = false;           // network probes: only against the test world
  bool destructive = false;           // only after the sandbox was seen in place
  std::string skip_why;               // set: not run
  int timeout_s = 0;                  // 0: the suite's default
  std::function<Judgement(const Outcome&)> judge;
  // Non-empty: run in one sandbox with the other probes of the same batch, each as its own
  // process between markers, with its own output slice and exit status (evidence/batch.hpp).
  // The kernel probes (`exguardian probe NAME --tag T`: T becomes its comm, which names it in
  // the audit log): ~120 sandbox starts become one, and every answer is still the kernel's or
  // the filter's to that probe alone. The "userland" batch: shell probes judged by their own
  // output and status, and by host files only they write (see catalog.cpp for why each is).
  // A batch whose sandbox does not end cleanly is run again one probe per sandbox.
  std::string batch = {};
  // Batched: `--tag T` is appended (an exguardian probe) and the audit lines of comm T are its
  // own. Otherwise it runs as `sh -c COMMAND` and is credited with no audit lines.
  bool tag_arg = false;
  // Stdin is ctx.stdin_file and stdout/stderr an O_APPEND file in ctx.stdio_dir that begins
  // with ctx.stdio_marker: what a probe that opens its stdio again must leave as it found it.
  bool stdio_files = false;
  WithoutSandbox without_sandbox = {};
};

// What the workspace's vault/key.txt holds (the protected-move probes deny it):
// derived from the canary but not containing it, so that probes which may read
// the workspace never mistake it for a leaked credential.
inline std::string vault_marker(const std::string& canary) {
  return "EXGVAULT-" + std::to_string(std::hash<std::string>{}(canary + "/vault"));
}

// Every probe in the order they run. ctx must outlive the specs.
std::vector<ProbeSpec> build_catalog(Context& ctx);

// The probe named id in v, or null.
inline const ProbeSpec* find_probe(const std::vector<ProbeSpec>& v, const std::string& id) {
  for (const auto& p : v)
    if (p.id == id) return &p;
  return nullptr;
}

}  // namespace exg::evidence
