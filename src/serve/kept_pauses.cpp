#include "serve/kept_pauses.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "util/json_parse.hpp"

namespace exg::serve {

namespace fs = std::filesystem;

uint64_t disk_bytes(const std::string& dir, uint64_t stop_after) {
  uint64_t total = 0;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec), end; !ec && it != end;
       it.increment(ec)) {
    struct stat st;
    if (::lstat(it->path().c_str(), &st) == 0) total += static_cast<uint64_t>(st.st_blocks) * 512;
    if (total > stop_after) break;
  }
  return total;
}

nlohmann::json KeptPause::to_json() const {
  return {{"id", id}, {"tenant", tenant}, {"template", template_name}, {"accessToken", access_token},
          {"trafficToken", traffic_token}, {"maskRequestHost", mask_request_host}, {"metadata", metadata},
          {"envVars", env_vars}, {"allowOut", allow_out}, {"denyOut", deny_out},
          {"startedMs", std::chrono::duration_cast<std::chrono::milliseconds>(started_at.time_since_epoch()).count()},
          {"pausedMs", std::chrono::duration_cast<std::chrono::milliseconds>(paused_at.time_since_epoch()).count()},
          {"timeoutSeconds", timeout.count()}, {"autoPause", auto_pause}, {"autoResume", auto_resume},
          {"autoPauseMemory", auto_pause_memory}};
}

std::optional<KeptPause> KeptPause::from_json(const nlohmann::json& j) {
  try {
    KeptPause k;
    k.id = j.at("id").get<std::string>();
    k.tenant = j.at("tenant").get<std::string>();
    k.template_name = j.at("template").get<std::string>();
    k.access_token = j.at("accessToken").get<std::string>();
    k.traffic_token = j.at("trafficToken").get<std::string>();
    k.mask_request_host = j.at("maskRequestHost").get<std::string>();
    k.metadata = j.at("metadata");
    k.env_vars = j.at("envVars").get<std::map<std::string, std::string>>();
    k.allow_out = j.at("allowOut").get<std::vector<std::string>>();
    k.deny_out = j.at("denyOut").get<std::vector<std::string>>();
    k.started_at = std::chrono::system_clock::time_point(std::chrono::milliseconds(j.at("startedMs").get<int64_t>()));
    // (absent from an earlier server's records: paused now, as the create's defaults)
    k.paused_at = j.contains("pausedMs") ? std::chrono::system_clock::time_point(std::chrono::milliseconds(j["pausedMs"].get<int64_t>()))
                                         : std::chrono::system_clock::now();
    k.timeout = std::chrono::seconds(j.value("timeoutSeconds", int64_t{300}));
    k.auto_pause = j.value("autoPause", false), k.auto_resume = j.value("autoResume", false);
    k.auto_pause_memory = j.value("autoPauseMemory", true);
    if (k.id.empty() || k.id.find('/') != std::string::npos || k.id[0] == '.') return std::nullopt;
    return k;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

bool KeptPauses::has(const std::string& id) const {
  struct stat st {};
  return ::stat(record_of(id).c_str(), &st) == 0;
}

Result<void> KeptPauses::write(const KeptPause& k) const {
  const std::string tmp = record_of(k.id) + ".tmp";
  {
    std::ofstream out(tmp);
    out << k.to_json().dump() << "\n";
    if (!out) return fail(Error::msg("write " + tmp, "failed"));
  }
  if (::rename(tmp.c_str(), record_of(k.id).c_str()) != 0) return fail(Error::sys("rename " + tmp));
  return {};
}

void KeptPauses::drop_record(const std::string& id) const { ::unlink(record_of(id).c_str()); }

void KeptPauses::remove(const std::string& id) const {
  drop_record(id);
  std::error_code ec;
  fs::remove_all(home_of(id), ec);
  fs::remove_all(seed_of(id), ec);
}

std::vector<KeptPause> KeptPauses::load() const {
  std::vector<KeptPause> out;
  std::vector<std::string> drop, broken;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(dir_, ec)) {
    const std::string name = e.path().filename().string();
    const std::string ext = e.path().extension().string();
    const std::string id = e.path().stem().string();
    if (ext != ".json") {  // a home or copy whose record is gone, a temporary: nothing to start again
      if (ext == ".tmp" || !has(id)) drop.push_back(e.path().string());
      continue;
    }
    std::ifstream in(e.path());
    std::stringstream text;
    text << in.rdbuf();
    auto j = parse_json(text.str());
    auto k = in ? KeptPause::from_json(j) : std::nullopt;
    struct stat st {};
    if (!k || k->id != id || ::lstat(home_of(id).c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      broken.push_back(id);  // a pause its server never stopped with (or a broken record): its home too
      continue;
    }
    out.push_back(std::move(*k));
  }
  for (const auto& p : drop) fs::remove_all(p, ec);
  for (const auto& id : broken) remove(id);
  return out;
}

}  // namespace exg::serve
