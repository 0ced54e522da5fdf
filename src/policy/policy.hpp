// The Policy: plain, validated data. Loaded from JSON files (ExGuardian's own
// format, which is a superset of an srt settings file) and from CLI flags,
// merged in order: defaults < user file < project file < --policy < flags.
#pragma once
#include <chrono>
#include <cstdint>
#include <expected>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace exg::policy {

// Where a value came from, for error messages: "file:line:column".
struct SourcePos {
  std::string file;  // "<cli>" for flags, "<defaults>" for built-ins
  int line = 0;
  int column = 0;
  std::string str() const;  // "file:line:column", or just "file" when line == 0
};

// A filesystem entry as written: "~/x", "./x", "/abs", "src/**/*.pem", or
// {"path": "...", "literal": true} (never a glob). base_dir is what a relative
// path is relative to: the directory of the file it came from, or the cwd for
// CLI flags.
struct PathEntry {
  std::string path;
  bool literal = false;
  std::string base_dir;
  SourcePos where;
};

struct DomainEntry {
  std::string pattern;  // as written, validated: "example.com", "*.x.org", "a.b:443"
  SourcePos where;
};

// A method/path rule for a host whose requests the proxy sees (plain HTTP and
// hosts whose TLS it terminates): "network.rules": [{"host": "api.github.com",
// "methods": ["GET"], "paths": ["/repos/"]}]. Allow rules of a host list what
// may be asked of it (anything else is refused); deny rules ("action": "deny")
// refuse what they match and beat allow rules. "readOnly": true is methods
// GET, HEAD, OPTIONS.
struct RequestRule {
  std::string name;                  // "name" as written, else "network.rules[I] HOST"
  DomainEntry host;                  // "api.github.com", "*.example.org" (no port)
  bool deny = false;
  std::vector<std::string> methods;  // upper-case tokens; empty: any method
  std::vector<std::string> paths;    // prefixes, each starting with "/"; empty: any path
};

// srt's network.parentProxy: the proxy reaches the world through the user's
// own HTTP proxy (CONNECT), whose credentials stay outside the sandbox. An
// https:// URL is a proxy reached over TLS (its certificate verified against
// the system's trust store, plus ca_file).
inline constexpr const char* kCaFileWithoutTls = "caFile is for a proxy reached over TLS, and neither URL is https://";
struct ParentProxy {
  std::string http;      // URL for plain HTTP requests ("http[s]://[user:pass@]host[:port]"); may be empty
  std::string https;     // URL for tunnels (CONNECT, SOCKS); empty: http
  std::string no_proxy;  // "corp.example,10.0.0.0/8": these go direct
  std::string ca_file;   // ours: "caFile": an absolute PEM path, trusted for https:// proxies besides the system's
  SourcePos where;
};

// srt's network.mitmProxy: these hosts go through an HTTP proxy on a Unix socket.
struct MitmProxy {
  std::string socket_path;
  std::vector<DomainEntry> domains;
  SourcePos where;
};

struct Network {
  std::vector<DomainEntry> allowed_domains;
  std::vector<DomainEntry> denied_domains;
  std::vector<DomainEntry> allowed_cidrs;  // ours: "network.allowedCidrs": ["10.0.0.0/8", "192.0.2.7"]
  std::optional<bool> resolver;  // ours: "network.resolver": true: a DNS resolver on 127.0.0.53 inside, allowed names only
  // ours: "network.transparent" (default true): clients that ignore the proxy
  // variables are captured too (the resolver's own addresses, TCP redirected
  // to the proxy inside the sandbox's netns); false: only the proxy variables.
  std::optional<bool> transparent;
  // srt: host pathname Unix sockets the sandbox may connect to (every other one
  // visible inside is masked), or all of them.
  std::vector<PathEntry> allow_unix_sockets;
  std::optional<bool> allow_all_unix_sockets;
  // srt 0.0.83's proxy keys (docs/srt.md).
  std::vector<std::pair<std::string, std::string>> denied_domain_reasons;  // deniedDomains entry -> reason
  std::vector<DomainEntry> denied_resolved_addresses;  // CIDRs an allowed name must not resolve to
  std::optional<ParentProxy> parent_proxy;
  std::optional<std::uint16_t> http_proxy_port, socks_proxy_port;  // an external proxy on the host's 127.0.0.1
  std::optional<MitmProxy> mitm_proxy;
  std::vector<RequestRule> rules;      // ours (issue 18): method and path rules
  std::optional<bool> read_only;       // ours: GET, HEAD, OPTIONS only, every host
  std::optional<bool> refuse_opaque_tunnels;  // tunnels the proxy cannot see into are refused
  std::optional<bool> require_host_match;     // a Host naming another host: 421 (else 403)
  std::vector<std::string> strip_response_headers;  // lower-case, "-" "_" "." folded to "-"
  std::optional<bool> normalize_targets;      // ambiguousRequestTarget "normalize" (default "refuse")
  std::vector<DomainEntry> tls_exclude;       // tlsTerminate.excludeDomains: never terminated
  std::vector<PathEntry> extra_ca_certs;      // tlsTerminate.extraCaCertPaths
  std::optional<std::uint32_t> max_tunnels;   // tlsTerminate.maxTunnels: terminated at once
  std::optional<std::chrono::milliseconds> handshake_timeout;  // tlsTerminate.handshakeTimeoutMs
};

struct Filesystem {
  std::vector<PathEntry> deny_read;
  std::vector<PathEntry> allow_read;   // beats deny_read
  std::vector<PathEntry> allow_write;
  std::vector<PathEntry> deny_write;   // beats allow_write
  std::optional<bool> allow_git_config;  // srt: lets .git/config be written
  std::vector<std::string> protect;      // extra protected names (ours)
  // ours: "makeDirs": directories made on the host (empty, 0700) before a run when
  // missing, parents first; each lies in an allowWrite tree. An agent makes them on
  // its first run under protected names (~/.codex/skills): made inside, the sweep
  // would quarantine them as planted; made first, they are read-only inside.
  std::vector<PathEntry> make_dirs;
};

struct Resources {
  std::optional<std::uint64_t> memory_bytes;
  std::optional<std::uint32_t> pids;
  std::optional<double> cpus;
  std::optional<std::chrono::milliseconds> timeout;
  // "scratchDisk": the microVM layer's writable disk as guest root (a size; 0: none).
  std::optional<std::uint64_t> scratch_disk_bytes;
};

struct Env {
  std::vector<std::string> allow;                          // names passed from the host env
  std::vector<std::pair<std::string, std::string>> set;    // NAME=VALUE, set explicitly
  std::vector<std::string> deny;                           // never passed, whatever allows it (srt credentials.envVars deny)
};

// A credential the command needs but must never hold (DESIGN.md §6): the
// sandbox sees a placeholder, the proxy puts the value into requests to
// `hosts`. "secrets": [{"name": "GITHUB_TOKEN", "from": "env:GITHUB_TOKEN",
// "hosts": ["api.github.com"]}]; srt's credentials.envVars/files in mask mode
// become these too.
struct SecretEntry {
  enum class Source { Env, File };
  std::string name;                    // also the variable inside (set_env), and part of the placeholder
  Source source = Source::Env;
  std::string from;                    // Env: the host variable's name; File: the path as written
  std::string base_dir;                // what a relative File path is relative to
  std::optional<std::string> extract;  // RE2 pattern (policy/extract_pattern.hpp): group 1 of its matches is the value
  std::vector<DomainEntry> hosts;      // where the value may go; each must be allowed by allowedDomains
  std::vector<std::string> headers;    // lower-case request header names it is put in; empty: any header
  bool set_env = true;                 // NAME=placeholder inside (srt file masks set no variable)
  std::string set_header;              // "setHeader": the proxy sets this header to the value (no variable inside)
  SourcePos where;
  // "optional": true: a source that is not there (variable unset, file
  // absent, extract finding nothing) drops the secret instead of stopping the
  // run (an agent signed in with an API key or with OAuth).
  bool optional = false;
  // "refreshField": "access_token": an OAuth token. A JSON response from one of
  // its hosts holding this field with a new value (a refresh) makes the proxy
  // keep the new value as a successor secret (a new placeholder in the
  // response) and write it into the source file in place of the old one.
  std::string refresh_field;
  // "bodyHosts": of hosts, those whose request bodies get the value (an OAuth
  // token request carries the refresh token in its body).
  std::vector<DomainEntry> body_hosts;
};

// A credential file the sandbox sees as a copy with placeholders in place of
// the secrets' values. "secretFiles": [{"path": "~/.npmrc", "secrets": ["NPM_TOKEN"]}]
struct SecretFileEntry {
  std::string path;                  // as written; "~" and relative paths allowed, no globs
  std::string base_dir;
  std::vector<std::string> secrets;  // names of secrets whose values it holds
  SourcePos where;
  bool optional = false;             // "optional": true: a file that does not exist is no copy, no error
  bool writable = false;             // "writable": true: the copy is writable inside (an agent rewriting its tokens)
};

struct Policy {
  Network network;
  Filesystem filesystem;
  Resources resources;
  Env env;
  std::vector<SecretEntry> secrets;
  std::vector<SecretFileEntry> secret_files;
  std::optional<std::string> layer;      // "process" | "container" | "gvisor" | "microvm" | "auto"
  std::optional<std::string> min_layer;  // "minLayer": the weakest layer a run accepts (a layer's name)
  std::optional<bool> landlock_required; // "landlock": "required" | "best-effort"
  std::optional<std::string> audit_log;
  std::vector<std::string> git_safe_directories;  // srt's git.safeDirectories (GIT_CONFIG_* inside)
  std::optional<std::string> java_agent_jar;      // srt's javaAgentJarPath (JAVA_TOOL_OPTIONS inside)
  // What each srt key did here ("p.json:3:5: network.strictAllowlist: ..."),
  // shown by --dry-run and -v: no key is taken and silently dropped.
  std::vector<std::string> notes;
  // Files this policy was loaded from, in merge order.
  std::vector<std::string> sources;
};

struct PolicyError {
  std::string message;  // complete, e.g. "p.json:3:7: unknown key \"netwrk\""
};

template <typename T>
using PResult = std::expected<T, PolicyError>;

// Parse and validate one JSON document. `name` is used in error positions;
// `base_dir` is what relative paths in it are relative to.
PResult<Policy> parse_policy(std::string_view text, const std::string& name,
                             const std::string& base_dir);

// Read a file and parse it (a missing or unreadable file is an error).
PResult<Policy> load_policy_file(const std::string& path);

// Overlay `top` on `base`: lists are appended, scalars in `top` win.
void merge(Policy& base, const Policy& top);

// Value parsers shared with the CLI ("512M", "1.5G", "30s", "2m", "500ms").
PResult<std::uint64_t> parse_size(std::string_view s);
PResult<std::chrono::milliseconds> parse_duration(std::string_view s);

// Validation helpers shared with the CLI. Return an error message or nothing.
std::optional<std::string> check_glob(std::string_view pattern);
std::optional<std::string> check_domain_pattern(std::string_view pattern, bool denied);
std::optional<std::string> check_env_name(std::string_view name);

// A parent proxy's URL, "http[s]://[user[:password]@]host[:port][/]" (port 80,
// 443 for https, when left out; user and password percent-decoded). https://
// is a proxy reached over TLS; what goes through it is spoken as over TCP.
struct ProxyUrl {
  std::string host;  // name or address, brackets removed
  std::uint16_t port = 80;
  bool tls = false;  // https://
  std::optional<std::pair<std::string, std::string>> credentials;  // user, password
};
PResult<ProxyUrl> parse_proxy_url(std::string_view url);
// The URL without its credentials ("http://***@proxy:3128"), for messages.
std::string redacted_proxy_url(std::string_view url);

// srt 0.0.83's fallback for network.parentProxy: a field the policy leaves
// out is taken from the environment exguardian was started with, as srt takes
// it from its own: http from HTTP_PROXY (else http_proxy), https from
// HTTPS_PROXY (else https_proxy, else what http ended as), noProxy from
// NO_PROXY (else no_proxy). "host:port" is read as http://host:port; an empty
// value is none. Each value taken is a note ("network.parentProxy.https: from
// HTTPS_PROXY: ..."); one that is not a proxy URL is an error naming it. A
// parentProxy of the policy's that still names no proxy after it, or whose
// caFile has no https:// proxy to be for, is an error naming the key.
using EnvLookup = std::function<const char*(const char*)>;
PResult<void> parent_proxy_from_environment(Policy& p, const EnvLookup& env);

// A NO_PROXY list as srt reads it: comma-separated; "*" is everything; an
// entry with "/" (or an address) is a CIDR; else a name that also covers its
// subdomains ("corp.example", ".corp.example", "*.corp.example"), ports ignored.
struct NoProxy {
  bool all = false;
  std::vector<std::string> suffixes;  // lower case, without a leading "." or "*."
  std::vector<std::string> cidrs;     // as written (checked by the caller)
};
PResult<NoProxy> parse_no_proxy(std::string_view list);

}  // namespace exg::policy
