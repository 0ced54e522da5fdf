#include "runtime/spec_version.hpp"

namespace exg::runtime {

using nlohmann::json;

namespace {

bool has(const json& j, const char* key) { return j.is_object() && j.contains(key) && !j[key].is_null(); }

}  // namespace

// The fields runtime-spec 1.2.0 added (its changelog), and those of later
// versions that a 1.2.x config may already carry: a config naming one keeps
// the version it claims.
std::string spec_1_2_feature(const json& config) {
  const json& p = config.contains("process") ? config["process"] : json();
  for (const char* k : {"ioPriority", "scheduler", "execCPUAffinity"})
    if (has(p, k)) return std::string("process.") + k;
  const json& l = config.contains("linux") ? config["linux"] : json();
  for (const char* k : {"personality", "netDevices", "memoryPolicy", "intelRdt"})
    if (has(l, k)) return std::string("linux.") + k;
  if (has(config, "zos")) return "zos";
  if (config.contains("mounts") && config["mounts"].is_array())
    for (const auto& m : config["mounts"]) {
      if (!m.is_object() || !m.contains("options") || !m["options"].is_array()) continue;
      for (const auto& o : m["options"])
        if (o.is_string() && (o == "idmap" || o == "ridmap" || o == "recursive-idmap")) return "mounts[].options " + o.get<std::string>();
    }
  return "";
}

bool fit_spec_version_for_crun(json& config) {
  if (!config.is_object() || !config.contains("ociVersion") || !config["ociVersion"].is_string()) return false;
  const std::string v = config["ociVersion"].get<std::string>();
  if (v.rfind("1.2.", 0) != 0 && v != "1.2") return false;
  if (!spec_1_2_feature(config).empty()) return false;
  config["ociVersion"] = "1.1.0";
  return true;
}

}  // namespace exg::runtime
