// What a sandbox refused, as the agent should see it: the lines of its audit
// log past an offset that record a refusal (egress or DNS refused, a syscall
// refused, a secret's exfiltration blocked, a planted file quarantined, set-id
// bits removed), each with a one-line summary.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace exg::mcp {

// The file's size now (0 when it does not exist yet): where a call's window starts.
uint64_t audit_offset(const std::string& audit_log);
// The refusals recorded after `offset`: [{event, summary, detail}].
nlohmann::json refusals_since(const std::string& audit_log, uint64_t offset);
// One audit line -> its refusal entry; null when the line records no refusal.
nlohmann::json refusal_of(const nlohmann::json& line);

}  // namespace exg::mcp
