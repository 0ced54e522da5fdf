// Reading policy files and layering policies on each other.
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "policy/policy.hpp"
#include "policy/srt_settings.hpp"

namespace exg::policy {

namespace {

std::string parent_dir(const std::string& path) {
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

PolicyError cannot_read(const std::string& path, int err) {
  return PolicyError{path + ": cannot read: " + std::strerror(err)};
}

}  // namespace

PResult<Policy> load_policy_file(const std::string& path) { return load_policy_file(path, RelativeTo::File, ""); }

PResult<Policy> load_policy_file(const std::string& path, RelativeTo rule, const std::string& cwd) {
  // A policy is small; a huge file is a mistake (or /dev/zero), not a policy.
  constexpr std::size_t kMaxBytes = 16 << 20;
  std::unique_ptr<std::FILE, decltype(&std::fclose)> f(std::fopen(path.c_str(), "rbe"), &std::fclose);
  if (!f) return std::unexpected(cannot_read(path, errno));
  std::string text;
  char buf[65536];
  for (;;) {
    std::size_t n = std::fread(buf, 1, sizeof buf, f.get());
    text.append(buf, n);
    if (text.size() > kMaxBytes) return std::unexpected(PolicyError{path + ": cannot read: file is larger than 16 MiB"});
    if (n < sizeof buf) {
      if (std::ferror(f.get())) return std::unexpected(cannot_read(path, errno));
      break;
    }
  }
  bool srt = rule == RelativeTo::WorkingDirectory || (rule == RelativeTo::ByShape && is_srt_settings(text));
  std::string base;
  if (srt) {
    // srt's rule: relative to where the command is run from.
    base = cwd;
  } else {
    // ExGuardian's: "next to this file", wherever we run from.
    char resolved[PATH_MAX];
    if (!::realpath(parent_dir(path).c_str(), resolved)) return std::unexpected(cannot_read(path, errno));
    base = resolved;
  }
  auto policy = parse_policy(text, path, base);
  if (!policy) return policy;
  policy->sources = {path};
  if (srt)
    policy->notes.push_back(path + ": read as srt settings: relative paths are relative to the working directory " +
                            cwd + " (srt's rule)");
  return policy;
}

void merge(Policy& base, const Policy& top) {
  auto append = [](auto& into, const auto& from) { into.insert(into.end(), from.begin(), from.end()); };
  append(base.network.allowed_domains, top.network.allowed_domains);
  append(base.network.denied_domains, top.network.denied_domains);
  append(base.network.allowed_cidrs, top.network.allowed_cidrs);
  append(base.network.allow_unix_sockets, top.network.allow_unix_sockets);
  append(base.network.denied_domain_reasons, top.network.denied_domain_reasons);
  append(base.network.denied_resolved_addresses, top.network.denied_resolved_addresses);
  append(base.network.rules, top.network.rules);
  append(base.network.strip_response_headers, top.network.strip_response_headers);
  append(base.network.tls_exclude, top.network.tls_exclude);
  append(base.network.extra_ca_certs, top.network.extra_ca_certs);
  append(base.git_safe_directories, top.git_safe_directories);
  append(base.filesystem.deny_read, top.filesystem.deny_read);
  append(base.filesystem.allow_read, top.filesystem.allow_read);
  append(base.filesystem.allow_write, top.filesystem.allow_write);
  append(base.filesystem.deny_write, top.filesystem.deny_write);
  append(base.filesystem.protect, top.filesystem.protect);
  append(base.filesystem.make_dirs, top.filesystem.make_dirs);
  append(base.env.allow, top.env.allow);
  append(base.env.set, top.env.set);
  append(base.env.deny, top.env.deny);
  append(base.secrets, top.secrets);
  append(base.secret_files, top.secret_files);
  append(base.notes, top.notes);
  append(base.sources, top.sources);
  auto override_with = [](auto& into, const auto& from) {
    if (from) into = from;
  };
  override_with(base.filesystem.allow_git_config, top.filesystem.allow_git_config);
  override_with(base.network.resolver, top.network.resolver);
  override_with(base.network.transparent, top.network.transparent);
  override_with(base.network.allow_all_unix_sockets, top.network.allow_all_unix_sockets);
  override_with(base.network.parent_proxy, top.network.parent_proxy);
  override_with(base.network.http_proxy_port, top.network.http_proxy_port);
  override_with(base.network.socks_proxy_port, top.network.socks_proxy_port);
  override_with(base.network.mitm_proxy, top.network.mitm_proxy);
  override_with(base.network.read_only, top.network.read_only);
  override_with(base.network.refuse_opaque_tunnels, top.network.refuse_opaque_tunnels);
  override_with(base.network.require_host_match, top.network.require_host_match);
  override_with(base.network.normalize_targets, top.network.normalize_targets);
  override_with(base.network.max_tunnels, top.network.max_tunnels);
  override_with(base.network.handshake_timeout, top.network.handshake_timeout);
  override_with(base.java_agent_jar, top.java_agent_jar);
  override_with(base.resources.memory_bytes, top.resources.memory_bytes);
  override_with(base.resources.pids, top.resources.pids);
  override_with(base.resources.cpus, top.resources.cpus);
  override_with(base.resources.timeout, top.resources.timeout);
  override_with(base.resources.scratch_disk_bytes, top.resources.scratch_disk_bytes);
  override_with(base.layer, top.layer);
  override_with(base.min_layer, top.min_layer);
  override_with(base.landlock_required, top.landlock_required);
  override_with(base.audit_log, top.audit_log);
}

}  // namespace exg::policy
