#include "sandbox/audit.hpp"

#include <fcntl.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>

namespace exg::sandbox {

std::string utc_now_rfc3339() {
  timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  tm t;
  ::gmtime_r(&ts.tv_sec, &t);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", t.tm_year + 1900, t.tm_mon + 1, t.tm_mday,
                t.tm_hour, t.tm_min, t.tm_sec, ts.tv_nsec / 1000);
  return buf;
}

Result<AuditLog> AuditLog::open(const std::string& path, const std::string& sandbox_id, nlohmann::json tags) {
  AuditLog log;
  log.fd_.reset(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0600));
  if (!log.fd_) return fail(Error::sys("audit log " + path));
  log.sandbox_id_ = sandbox_id;
  log.tags_ = std::move(tags);
  return log;
}

void AuditLog::write(nlohmann::json event) {
  if (!fd_) return;
  nlohmann::json line = {{"time", utc_now_rfc3339()}, {"sandbox", sandbox_id_}};
  std::lock_guard lock(held_->mu);
  line.update(tags_);
  line.update(event);
  if (held_->holding && held_->lines.size() < kMaxHeld) {
    held_->lines.push_back(std::move(line));
    return;
  }
  append(line);
}

void AuditLog::append(const nlohmann::json& line) {
  std::string s = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  // O_APPEND and one write() per line: lines from several sandboxes sharing a
  // log do not interleave.
  (void)::write(fd_.get(), s.data(), s.size());
}

AuditLog::~AuditLog() {
  if (!held_ || !fd_) return;
  for (auto& line : held_->lines) append(line);
}

void AuditLog::hold() {
  if (!held_) return;
  std::lock_guard lock(held_->mu);
  held_->holding = true;
}

bool AuditLog::holding() const {
  if (!held_) return false;
  std::lock_guard lock(held_->mu);
  return held_->holding;
}

Result<void> AuditLog::add_tags(const nlohmann::json& tags) {
  if (!held_) return fail(Error::msg("audit tags", "no audit log"));
  std::lock_guard lock(held_->mu);
  if (!held_->holding) return fail(Error::msg("audit tags", "the log holds no lines for tags (already tagged, or not held)"));
  if (!tags.is_object()) return fail(Error::msg("audit tags", "expected an object"));
  for (auto& [k, v] : tags.items())
    if (k == "time" || k == "sandbox" || tags_.contains(k)) return fail(Error::msg("audit tags", k + ": a field of every line already"));
  tags_.update(tags);
  held_->holding = false;
  for (auto& line : held_->lines) {
    // The line's own fields stay where they were; the new tags join them.
    nlohmann::json out = {{"time", line["time"]}, {"sandbox", sandbox_id_}};
    out.update(tags_);
    out.update(line);
    append(out);
  }
  held_->lines.clear();
  return {};
}

}  // namespace exg::sandbox
