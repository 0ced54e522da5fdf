#include "mcp/evidence_runs.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>

#include "serve/sandbox_registry.hpp"
#include "util/json_parse.hpp"

namespace exg::mcp {

namespace asio = boost::asio;

std::string EvidenceKey::text() const {
  std::string s = layer + "\n" + policy;
  for (auto& d : allow_domains) s += "\n" + d;
  return s;
}

nlohmann::json evidence_summary(const nlohmann::json& rep, const EvidenceKey& key) {
  nlohmann::json counts = {{"held", 0}, {"escaped", 0}, {"failed", 0}, {"skipped", 0}};
  nlohmann::json probes = nlohmann::json::array();
  for (auto& p : rep.value("probes", nlohmann::json::array())) {
    std::string v = p.value("verdict", "skipped");
    if (counts.contains(v)) counts[v] = counts[v].get<int>() + 1;
    probes.push_back({{"id", p.value("id", "")}, {"category", p.value("category", "")}, {"verdict", v}, {"evidence", p.value("evidence", "")}});
  }
  auto summary = rep.value("summary", nlohmann::json::object());
  bool passed = summary.value("passed", false);
  std::string line = summary.value("line", "");
  return {{"layer", key.layer},
          {"policy", key.policy.empty() ? nlohmann::json(nullptr) : nlohmann::json(key.policy)},
          {"allow_domains", key.allow_domains},
          {"passed", passed},
          {"summary", (passed ? "the sandbox held: " : "the sandbox did NOT hold everywhere: ") + line},
          {"counts", counts},
          {"probes", probes},
          {"warnings", rep.value("warnings", nlohmann::json::array())},
          {"started", rep.value("started", "")},
          {"seconds", rep.value("seconds", 0.0)}};
}

EvidenceRuns::EvidenceRuns(asio::io_context& io, std::string exe, std::string scratch_dir)
    : io_(io), exe_(std::move(exe)), dir_(std::move(scratch_dir)) {}

EvidenceRuns::~EvidenceRuns() {
  for (auto& [k, r] : running_)
    if (r->pid > 0) ::kill(-r->pid, SIGTERM);
}

uint64_t EvidenceRuns::get(const EvidenceKey& key, Done done) {
  std::string k = key.text();
  uint64_t tok = next_++;
  if (auto d = done_.find(k); d != done_.end()) {
    done(d->second, "");
    return tok;
  }
  if (auto r = running_.find(k); r != running_.end()) {
    r->second->waiters[tok] = std::move(done);
    return tok;
  }
  auto run = std::make_shared<Run>();
  run->json_file = dir_ + "/" + serve::random_id(16) + ".json";
  std::vector<std::string> argv = {exe_, "escape-test", "--layer", key.layer, "--json", run->json_file};
  if (!key.policy.empty()) argv.insert(argv.end(), {"--policy", key.policy});
  for (auto& d : key.allow_domains) argv.insert(argv.end(), {"--run-arg", "--allow-domain=" + d});
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) {
    done(nullptr, std::string("pipe: ") + std::strerror(errno));
    return tok;
  }
  std::vector<char*> cargv;
  for (auto& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(pipefd[0]), ::close(pipefd[1]);
    done(nullptr, std::string("fork: ") + std::strerror(errno));
    return tok;
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(125);
    ::setpgid(0, 0);  // cancel() ends the suite and the sandboxes it runs, as a group
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    int devnull = ::open("/dev/null", O_RDWR);
    ::dup2(devnull, 0), ::dup2(pipefd[1], 1), ::dup2(pipefd[1], 2);
    ::close_range(3, ~0U, 0);
    if (::chdir(dir_.c_str()) != 0) ::_exit(125);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  ::close(pipefd[1]);
  run->pid = pid;
  run->out = std::make_unique<asio::posix::stream_descriptor>(io_, pipefd[0]);
  run->waiters[tok] = std::move(done);
  running_[k] = run;
  read(k, run, key);
  return tok;
}

void EvidenceRuns::read(const std::string& k, std::shared_ptr<Run> r, EvidenceKey key) {
  r->out->async_read_some(asio::buffer(r->buf), [this, k, r, key](boost::system::error_code ec, size_t n) {
    if (ec) return finish(k, r, key);  // EOF: the suite has ended
    r->log.append(r->buf, n);
    if (r->log.size() > 16384) r->log.erase(0, r->log.size() - 16384);
    read(k, r, key);
  });
}

void EvidenceRuns::finish(const std::string& k, std::shared_ptr<Run> r, const EvidenceKey& key) {
  if (auto it = running_.find(k); it != running_.end() && it->second == r) running_.erase(it);
  r->pid = -1;
  std::ifstream in(r->json_file, std::ios::binary);
  std::string text(std::istreambuf_iterator<char>(in), {});
  ::unlink(r->json_file.c_str());
  auto rep = parse_json(text);
  nlohmann::json result;
  std::string err;
  if (rep.is_discarded() || !rep.is_object()) {
    std::string why = r->log;
    while (!why.empty() && why.back() == '\n') why.pop_back();
    if (auto nl = why.rfind('\n'); nl != std::string::npos) why = why.substr(nl + 1);
    err = "the escape test wrote no report" + (why.empty() ? std::string() : ": " + why);
  } else {
    result = evidence_summary(rep, key);
    done_[k] = result;
  }
  auto waiters = std::move(r->waiters);
  for (auto& [t, fn] : waiters) fn(result, err);
}

void EvidenceRuns::cancel(uint64_t token) {
  for (auto it = running_.begin(); it != running_.end(); ++it) {
    auto& r = it->second;
    if (!r->waiters.erase(token)) continue;
    if (r->waiters.empty() && r->pid > 0) {
      ::kill(-r->pid, SIGTERM);  // nobody waits for it any more
      r->pid = -1;
    }
    return;
  }
}

}  // namespace exg::mcp
