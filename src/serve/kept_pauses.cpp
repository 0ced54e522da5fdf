#include "serve/kept_pauses.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace exg::serve {

namespace fs = std::filesystem;

nlohmann::json KeptPause::to_json() const {
  return {{"id", id}, {"tenant", tenant}, {"template", template_name}, {"accessToken", access_token},
          {"trafficToken", traffic_token}, {"maskRequestHost", mask_request_host}, {"metadata", metadata},
          {"envVars", env_vars}, {"allowOut", allow_out}, {"denyOut", deny_out},
          {"startedMs", std::chrono::duration_cast<std::chrono::milliseconds>(started_at.time_since_epoch()).count()}};
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
    if (k.id.empty() || k.id.find('/') != std::string::npos || k.id[0] == '.') return std::nullopt;
    return k;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

bool KeptPauses::has(const std::string& id) const {
  struct stat st {};
  return ::stat((dir_of(id) + "/record.json").c_str(), &st) == 0;
}

Result<void> KeptPauses::write(const KeptPause& k) const {
  const std::string d = dir_of(k.id);
  if (::mkdir(d.c_str(), 0700) != 0 && errno != EEXIST) return fail(Error::sys("mkdir " + d));
  const std::string tmp = d + "/record.json.tmp";
  {
    std::ofstream out(tmp);
    out << k.to_json().dump() << "\n";
    if (!out) return fail(Error::msg("write " + tmp, "failed"));
  }
  if (::rename(tmp.c_str(), (d + "/record.json").c_str()) != 0) return fail(Error::sys("rename " + tmp));
  return {};
}

void KeptPauses::remove(const std::string& id) const {
  std::error_code ec;
  fs::remove_all(dir_of(id), ec);
}

std::vector<KeptPause> KeptPauses::load() const {
  std::vector<KeptPause> out;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(dir_, ec)) {
    const std::string id = e.path().filename().string();
    std::ifstream in(e.path() / "record.json");
    std::stringstream text;
    text << in.rdbuf();
    auto j = nlohmann::json::parse(text.str(), nullptr, false);
    auto k = in ? KeptPause::from_json(j) : std::nullopt;
    struct stat st {};
    if (!k || k->id != id || ::lstat(home_of(id).c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      remove(id);  // a pause whose server never stopped with it kept (or a broken record): nothing to start again
      continue;
    }
    out.push_back(std::move(*k));
  }
  return out;
}

}  // namespace exg::serve
