// The audit log: one JSON object per line, appended, for every decision worth
// keeping (refused syscalls now; egress decisions later). Shared by the
// supervisor's event sources; written only from its one thread.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "egress/audit_sink.hpp"
#include "util/error.hpp"
#include "util/unique_fd.hpp"

namespace exg::sandbox {

class AuditLog final : public egress::AuditSink {
 public:
  AuditLog() = default;  // disabled: write() does nothing
  static Result<AuditLog> open(const std::string& path, const std::string& sandbox_id,
                               nlohmann::json tags = nlohmann::json::object());

  bool enabled() const override { return static_cast<bool>(fd_); }
  // Adds "time" (RFC 3339, UTC, microseconds), "sandbox" and the tags, then appends one line.
  void write(nlohmann::json event) override;

 private:
  UniqueFd fd_;
  std::string sandbox_id_;
  nlohmann::json tags_;  // e.g. {"tenant": ..., "e2b_sandbox": ...}: whose sandbox a line is about
};

std::string utc_now_rfc3339();

}  // namespace exg::sandbox
