// Whether a settings document is srt's: every key it holds is a key of srt
// 0.0.83's settings schema (issue 40). Such a file means what it means in srt
// wherever it lies and however it is named: its relative paths are relative
// to the working directory (srt's normalizePathForSandbox resolves them
// against process.cwd()), not to the file's directory (ExGuardian's rule for
// its own files, whose keys srt does not know).
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>

#include "policy/srt_settings.hpp"
#include "util/json_parse.hpp"

namespace exg::policy {

namespace {

// SandboxRuntimeConfigSchema of @anthropic-ai/sandbox-runtime 0.0.83
// (dist/sandbox/sandbox-config.js), as paths; "[]" for an array's entries.
// tests/unit/test_srt_settings.cpp holds the same list, checked against the
// fixture; "$schema" is in neither tool's schema and neutral here.
const std::set<std::string, std::less<>>& schema_keys() {
  static const std::set<std::string, std::less<>> keys = {
      "network", "network.allowedDomains", "network.deniedDomains", "network.deniedDomainReasons",
      "network.strictAllowlist", "network.deniedResolvedAddresses", "network.allowUnixSockets",
      "network.allowAllUnixSockets", "network.allowLocalBinding", "network.allowMachLookup", "network.httpProxyPort",
      "network.socksProxyPort", "network.mitmProxy", "network.mitmProxy.socketPath", "network.mitmProxy.domains",
      "network.filterRequest", "network.allowPlaintextHeaderSet", "network.stripResponseHeaders",
      "network.refuseOpaqueTunnels", "network.requireHostMatch", "network.ambiguousRequestTarget",
      "network.tlsTerminate", "network.tlsTerminate.caCertPath", "network.tlsTerminate.caKeyPath",
      "network.tlsTerminate.excludeDomains", "network.tlsTerminate.extraCaCertPaths",
      "network.tlsTerminate.maxTunnels", "network.tlsTerminate.handshakeTimeoutMs", "network.parentProxy",
      "network.parentProxy.http", "network.parentProxy.https", "network.parentProxy.noProxy",
      "filesystem", "filesystem.disabled", "filesystem.denyRead", "filesystem.allowRead", "filesystem.allowWrite",
      "filesystem.denyWrite", "filesystem.allowGitConfig",
      "credentials", "credentials.files", "credentials.files[].path", "credentials.files[].mode",
      "credentials.files[].extract", "credentials.files[].onExtractNoMatch", "credentials.files[].decode",
      "credentials.files[].maskClaims", "credentials.files[].maskDuplicates", "credentials.files[].injectHosts",
      "credentials.envVars", "credentials.envVars[].name", "credentials.envVars[].mode",
      "credentials.envVars[].extract", "credentials.envVars[].onExtractNoMatch", "credentials.envVars[].decode",
      "credentials.envVars[].maskClaims", "credentials.envVars[].injectHosts", "credentials.allowPlaintextInject",
      "credentials.awsPairs", "credentials.sigv4",
      "ignoreViolations", "enableWeakerNestedSandbox", "allowNestedUserNamespaces", "enableWeakerNetworkIsolation",
      "allowAppleEvents", "ripgrep", "ripgrep.command", "ripgrep.args", "ripgrep.argv0", "mandatoryDenySearchDepth",
      "allowPty", "seccomp", "seccomp.applyPath", "seccomp.argv0", "bwrapPath", "socatPath", "javaAgentJarPath",
      "windows", "windows.backend", "windows.sandboxUser", "windows.sublayerGuid", "windows.wfpSublayerGuid",
      "windows.proxyPortRange", "windows.srtWin", "windows.srtWin.path", "git", "git.safeDirectories",
  };
  return keys;
}

// Does the schema name keys below `path` (so that its value's keys are keys,
// not data such as deniedDomainReasons' domains)?
bool has_children(const std::string& path) {
  const auto& keys = schema_keys();
  for (auto it = keys.lower_bound(path); it != keys.end() && it->starts_with(path); ++it)
    if (it->size() > path.size() && ((*it)[path.size()] == '.' || (*it)[path.size()] == '['))
      return true;
  return false;
}

bool only_schema_keys(const nlohmann::json& v, const std::string& path) {
  if (v.is_array()) {
    if (!has_children(path + "[]")) return true;
    for (const auto& el : v)
      if (!only_schema_keys(el, path + "[]")) return false;
    return true;
  }
  if (!v.is_object()) return true;
  for (const auto& [key, value] : v.items()) {
    if (path.empty() && key == "$schema") continue;
    std::string p = path.empty() ? key : path + "." + key;
    if (!schema_keys().contains(p)) return false;
    if (has_children(p) && !only_schema_keys(value, p)) return false;
  }
  return true;
}

}  // namespace

bool is_srt_settings(std::string_view text) {
  auto doc = parse_json(text);
  return doc.is_object() && only_schema_keys(doc, "");
}

}  // namespace exg::policy
