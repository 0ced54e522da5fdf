// The audit log: one JSON object per line, appended, for every decision worth
// keeping (refused syscalls, egress decisions). Shared by the supervisor's
// event sources: its own thread and the proxy's (one write() per line).
//
// A warm pool's sandbox (exguardian serve) is made before its tenant is
// known: hold() keeps the lines in memory until add_tags() brings the missing
// tags, so every line carries them; add_tags() is once only.
#pragma once
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "egress/audit_sink.hpp"
#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace exg::sandbox {

class AuditLog final : public egress::AuditSink {
 public:
  AuditLog() = default;  // disabled: write() does nothing
  AuditLog(AuditLog&&) = default;
  AuditLog& operator=(AuditLog&&) = default;
  ~AuditLog() override;  // lines still held are written (untagged) rather than lost
  static Result<AuditLog> open(const std::string& path, const std::string& sandbox_id,
                               nlohmann::json tags = nlohmann::json::object());

  bool enabled() const override { return static_cast<bool>(fd_); }
  // Adds "time" (RFC 3339, UTC, microseconds), "sandbox" and the tags, then appends one line.
  void write(nlohmann::json event) override;
  // Lines wait in memory (at most kMaxHeld; past that they are written untagged).
  void hold();
  bool holding() const;
  // The tags a held log waits for, added to every line; the held lines are written now.
  // Fails when the log is not held, or a tag is there already.
  Result<void> add_tags(const nlohmann::json& tags);
  static constexpr size_t kMaxHeld = 256;

 private:
  struct Held {
    std::mutex mu;
    bool holding = false;
    std::vector<nlohmann::json> lines;  // without the missing tags yet
  };
  std::unique_ptr<Held> held_ = std::make_unique<Held>();  // (movable: the lock lives on the heap)
  void append(const nlohmann::json& line);
  UniqueFd fd_;
  std::string sandbox_id_;
  nlohmann::json tags_;  // e.g. {"tenant": ..., "e2b_sandbox": ...}: whose sandbox a line is about
};

std::string utc_now_rfc3339();

}  // namespace exg::sandbox
