#include "sandbox/refusals.hpp"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "util/json_parse.hpp"

namespace exg::sandbox {

uint64_t audit_offset(const std::string& audit_log) {
  struct stat st;
  return ::stat(audit_log.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

nlohmann::json refusal_of(const nlohmann::json& l) {
  if (!l.is_object()) return nullptr;
  std::string ev = l.value("event", "");
  auto s = [&](const char* k) {
    auto it = l.find(k);
    if (it == l.end()) return std::string();
    return it->is_string() ? it->get<std::string>() : it->dump();
  };
  std::string summary;
  if ((ev == "egress" || ev == "dns") && l.value("decision", "") == "refused") {
    summary = (ev == "dns" ? "DNS lookup of " : "egress to ") + s("host") + (l.contains("port") ? ":" + s("port") : "") + " refused";
    if (!s("reason").empty()) summary += ": " + s("reason");
    if (!s("rule").empty()) summary += " (rule: " + s("rule") + ")";
  } else if (ev == "syscall_refused") {
    summary = "syscall " + s("syscall") + " refused (errno " + s("errno") + ")" + (s("command").empty() ? "" : " for " + s("command"));
  } else if (ev == "exfiltration") {
    // Only a host the secret is not meant for gets this event (its own hosts get the placeholder as it is).
    summary = "placeholder of secret " + s("secret") + " on its way to " + (s("host").empty() ? "a host" : s("host")) +
              ", which it is not meant for (" + s("protocol") + ", " + s("where") + "): blocked";
  } else if (ev == "planted") {
    summary = "planted file " + s("path") + " quarantined" + (s("quarantined_to").empty() ? "" : " to " + s("quarantined_to")) +
              (s("why").empty() ? "" : ": " + s("why"));
  } else if (ev == "setid_removed") {
    summary = "set-id bits removed from " + s("path");
  } else if (ev == "sweep_unchecked") {
    summary = "could not check " + s("path") + " for planted files: " + s("why");
  } else {
    return nullptr;
  }
  nlohmann::json detail = l;
  for (const char* k : {"sandbox", "tenant", "e2b_sandbox"}) detail.erase(k);  // the registry's tags: nothing the model needs
  return {{"event", ev}, {"summary", summary}, {"detail", detail}};
}

nlohmann::json refusals_since(const std::string& audit_log, uint64_t offset, uint64_t* end) {
  nlohmann::json out = nlohmann::json::array();
  if (end) *end = offset;
  std::ifstream in(audit_log, std::ios::binary);
  if (!in) return out;
  in.seekg(static_cast<std::streamoff>(offset));
  std::string line;
  size_t kept = 0;
  uint64_t at = offset;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // no newline yet: the supervisor is still writing it
    at += line.size() + 1;
    if (end) *end = at;
    if (kept > 100) continue;  // past the cap only the window's end is wanted: no line is parsed
    auto r = refusal_of(parse_json(line));
    if (r.is_null()) continue;
    if (++kept > 100) {  // a flood (a fork bomb of refused calls) is counted, not listed
      out.push_back({{"event", "more"}, {"summary", "more refusals than 100 in this window: see the audit log"}});
      if (!end) break;  // nobody needs the window's end: stop here
      continue;
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace exg::sandbox
