// The `evidence` tool's work: `exguardian escape-test` for a layer and policy
// (the suite runs its probes in fresh sandboxes of that kind; nothing of it
// runs on the host unsandboxed), its JSON report read back and summarised.
// One run per distinct layer + policy + domains, its result kept for the
// server's life; calls that ask while it runs wait for the same run.
#pragma once
#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <nlohmann/json.hpp>

namespace exg::mcp {

struct EvidenceKey {
  std::string layer, policy;
  std::vector<std::string> allow_domains;
  std::string text() const;
};

// The escape-test report (its JSON) -> the tool's structured result.
nlohmann::json evidence_summary(const nlohmann::json& report, const EvidenceKey& key);

class EvidenceRuns {
 public:
  using Done = std::function<void(const nlohmann::json& result, const std::string& error)>;
  EvidenceRuns(boost::asio::io_context& io, std::string exe, std::string scratch_dir);
  ~EvidenceRuns();
  // Returns a token for cancel().
  uint64_t get(const EvidenceKey& key, Done done);
  void cancel(uint64_t token);

 private:
  struct Run {
    pid_t pid = -1;
    std::string json_file;
    std::unique_ptr<boost::asio::posix::stream_descriptor> out;
    std::string log;
    char buf[4096];
    std::map<uint64_t, Done> waiters;
  };
  boost::asio::io_context& io_;
  std::string exe_, dir_;
  std::map<std::string, nlohmann::json> done_;
  std::map<std::string, std::shared_ptr<Run>> running_;
  uint64_t next_ = 1;
  void read(const std::string& k, std::shared_ptr<Run> r, EvidenceKey key);
  void finish(const std::string& k, std::shared_ptr<Run> r, const EvidenceKey& key);
};

}  // namespace exg::mcp
