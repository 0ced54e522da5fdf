// What a sandbox refused, as an agent should see it: the lines of its audit
// log past an offset that record a refusal (egress or DNS refused, a syscall
// refused, a secret's exfiltration blocked, a planted file quarantined, set-id
// bits removed), each with a one-line summary. `exguardian mcp` puts them in
// its tools' results; `exguardian serve` answers them for a sandbox at
// GET /sandboxes/{id}/refusals (what mcp's client mode asks).
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace exg::sandbox {

// The file's size now (0 when it does not exist yet): where a call's window starts.
uint64_t audit_offset(const std::string& audit_log);

// The refusals recorded after `offset`: [{event, summary, detail}], at most
// 100 listed (then one {"event": "more"}). `end`, when given, receives the
// offset after the last complete line read: the next window's start (a line
// the supervisor is still writing is left for it).
nlohmann::json refusals_since(const std::string& audit_log, uint64_t offset, uint64_t* end = nullptr);

// One audit line -> its refusal entry; null when the line records no refusal.
nlohmann::json refusal_of(const nlohmann::json& line);

}  // namespace exg::sandbox
