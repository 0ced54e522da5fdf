// srt 0.0.83's settings (issue 18): a file with every key of its published
// schema loads, each key either applied with srt's meaning or refused with why;
// and the proxy's side of them: request rules, parent proxies, denied reasons
// and resolved addresses.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <map>
#include <set>
#include <string>

#include "egress/parent_proxy.hpp"
#include "egress/request_rules.hpp"
#include "egress/rules.hpp"
#include "policy/policy.hpp"

namespace exg {
namespace {

const std::string kFixture = std::string(EXG_SOURCE_DIR) + "/tests/data/srt-0.0.83-settings.json";

// Every key of SandboxRuntimeConfigSchema in @anthropic-ai/sandbox-runtime 0.0.83
// (dist/sandbox/sandbox-config.js), as paths ("[]" for an array's entries).
const std::set<std::string> kSchemaKeys = {
    "network", "network.allowedDomains", "network.deniedDomains", "network.deniedDomainReasons",
    "network.strictAllowlist", "network.deniedResolvedAddresses", "network.allowUnixSockets",
    "network.allowAllUnixSockets", "network.allowLocalBinding", "network.allowMachLookup", "network.httpProxyPort",
    "network.socksProxyPort", "network.mitmProxy", "network.mitmProxy.socketPath", "network.mitmProxy.domains",
    "network.filterRequest", "network.allowPlaintextHeaderSet", "network.stripResponseHeaders",
    "network.refuseOpaqueTunnels", "network.requireHostMatch", "network.ambiguousRequestTarget",
    "network.tlsTerminate", "network.tlsTerminate.caCertPath", "network.tlsTerminate.caKeyPath",
    "network.tlsTerminate.excludeDomains", "network.tlsTerminate.extraCaCertPaths", "network.tlsTerminate.maxTunnels",
    "network.tlsTerminate.handshakeTimeoutMs", "network.parentProxy", "network.parentProxy.http",
    "network.parentProxy.https", "network.parentProxy.noProxy",
    "filesystem", "filesystem.disabled", "filesystem.denyRead", "filesystem.allowRead", "filesystem.allowWrite",
    "filesystem.denyWrite", "filesystem.allowGitConfig",
    "credentials", "credentials.files", "credentials.files[].path", "credentials.files[].mode",
    "credentials.files[].extract", "credentials.files[].onExtractNoMatch", "credentials.files[].decode",
    "credentials.files[].maskClaims", "credentials.files[].maskDuplicates", "credentials.files[].injectHosts",
    "credentials.envVars", "credentials.envVars[].name", "credentials.envVars[].mode", "credentials.envVars[].extract",
    "credentials.envVars[].onExtractNoMatch", "credentials.envVars[].decode", "credentials.envVars[].maskClaims",
    "credentials.envVars[].injectHosts", "credentials.allowPlaintextInject", "credentials.awsPairs",
    "credentials.sigv4",
    "ignoreViolations", "enableWeakerNestedSandbox", "allowNestedUserNamespaces", "enableWeakerNetworkIsolation",
    "allowAppleEvents", "ripgrep", "ripgrep.command", "ripgrep.args", "ripgrep.argv0", "mandatoryDenySearchDepth",
    "allowPty", "seccomp", "seccomp.applyPath", "seccomp.argv0", "bwrapPath", "socatPath", "javaAgentJarPath",
    "windows", "windows.backend", "windows.sandboxUser", "windows.sublayerGuid", "windows.wfpSublayerGuid",
    "windows.proxyPortRange", "windows.srtWin", "windows.srtWin.path", "git", "git.safeDirectories",
};

// Keys the fixture cannot hold: refused (each test below says why), with the
// document that shows the refusal and the start of its message.
struct Refused {
  const char* key;
  const char* doc;
  const char* says;
};
const Refused kRefused[] = {
    {"network.filterRequest", R"({"network": {"filterRequest": "x"}})", "a JavaScript callback"},
    {"network.tlsTerminate.caCertPath", R"({"network": {"tlsTerminate": {"caCertPath": "/c.pem"}}})",
     "ExGuardian makes its own CA"},
    {"network.tlsTerminate.caKeyPath", R"({"network": {"tlsTerminate": {"caKeyPath": "/k.pem"}}})",
     "ExGuardian makes its own CA"},
    {"credentials.files[].decode",
     R"({"credentials": {"files": [{"path": "/t", "mode": "mask", "decode": "jwt", "injectHosts": ["a.b"]}]}})",
     "not supported: ExGuardian does not rewrite JSON Web Tokens"},
    {"credentials.files[].maskClaims",
     R"({"credentials": {"files": [{"path": "/t", "mode": "mask", "maskClaims": ["x"], "injectHosts": ["a.b"]}]}})",
     "not supported: ExGuardian does not rewrite JSON Web Tokens"},
    {"credentials.envVars[].decode", R"({"credentials": {"envVars": [{"name": "T", "decode": "jwt"}]}})",
     "not supported: ExGuardian does not rewrite JSON Web Tokens"},
    {"credentials.envVars[].maskClaims", R"({"credentials": {"envVars": [{"name": "T", "maskClaims": ["x"]}]}})",
     "not supported: ExGuardian does not rewrite JSON Web Tokens"},
    {"credentials.awsPairs", R"({"credentials": {"awsPairs": []}})", "not supported: ExGuardian does not re-sign"},
    {"credentials.sigv4", R"({"credentials": {"sigv4": {}}})", "not supported: ExGuardian does not re-sign"},
    // Weakening values of keys the fixture holds with a harmless one.
    {"", R"({"network": {"allowPlaintextHeaderSet": true}})", "a header set on plain HTTP travels in clear text"},
    {"", R"({"network": {"ambiguousRequestTarget": "asSpelled"}})", "\"asSpelled\" would judge network.rules"},
    {"", R"({"filesystem": {"disabled": true}})", "filesystem.disabled would turn the filesystem policy off"},
    {"", R"({"enableWeakerNestedSandbox": true})", "ExGuardian does not weaken its sandbox"},
    {"", R"({"allowNestedUserNamespaces": true})", "ExGuardian does not let the command create user namespaces"},
    {"", R"({"credentials": {"allowPlaintextInject": true}})", "ExGuardian puts secrets only into TLS"},
};

void collect(const nlohmann::json& j, const std::string& at, std::set<std::string>& out) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      std::string p = at.empty() ? k : at + "." + k;
      // Maps keyed by the user (reasons, violations) hold no schema keys.
      if (p != "network.deniedDomainReasons" && p != "ignoreViolations") collect(v, p, out);
      out.insert(p);
    }
  } else if (j.is_array()) {
    for (const auto& v : j)
      if (v.is_object()) collect(v, at + "[]", out);
  }
}

TEST(SrtSettings, EveryKeyOf0083IsAppliedOrRefused) {
  std::ifstream f(kFixture);
  ASSERT_TRUE(f) << kFixture;
  std::set<std::string> present;
  collect(nlohmann::json::parse(f), "", present);
  for (const auto& r : kRefused)
    if (*r.key) present.insert(r.key);
  for (const auto& k : kSchemaKeys) EXPECT_TRUE(present.count(k)) << "neither in the fixture nor refused: " << k;
  for (const auto& k : present) {
    if (!k.starts_with("filesystem.denyWrite[]")) EXPECT_TRUE(kSchemaKeys.count(k)) << "not a 0.0.83 key: " << k;
  }

  auto p = policy::load_policy_file(kFixture);
  ASSERT_TRUE(p) << p.error().message;
  const auto& net = p->network;
  EXPECT_EQ(net.denied_domain_reasons.size(), 1u);
  EXPECT_EQ(net.denied_resolved_addresses.size(), 2u);
  EXPECT_EQ(net.http_proxy_port, 18080);
  EXPECT_EQ(net.socks_proxy_port, 11080);
  ASSERT_TRUE(net.mitm_proxy);
  EXPECT_EQ(net.mitm_proxy->socket_path, "/run/mitm.sock");
  ASSERT_TRUE(net.parent_proxy);
  EXPECT_EQ(net.parent_proxy->https, "http://proxy.corp.test:3129");
  EXPECT_EQ(net.strip_response_headers, (std::vector<std::string>{"set-cookie", "x-internal-trace"}));
  EXPECT_EQ(net.require_host_match, true);
  EXPECT_EQ(net.normalize_targets, false);
  EXPECT_EQ(net.max_tunnels, 64u);
  EXPECT_EQ(net.handshake_timeout, std::chrono::milliseconds(5000));
  EXPECT_EQ(net.tls_exclude.size(), 1u);
  EXPECT_EQ(net.extra_ca_certs.size(), 1u);
  EXPECT_EQ(p->git_safe_directories, std::vector<std::string>{"/work/repo"});
  EXPECT_EQ(p->java_agent_jar, "/opt/srt/srt-proxy-agent.jar");
  EXPECT_EQ(p->filesystem.allow_git_config, true);
  // -v and --dry-run say what each key without a field of its own did.
  std::string notes;
  for (const auto& n : p->notes) notes += n + "\n";
  for (const char* k : {"network.deniedDomainReasons:", "network.strictAllowlist:", "network.deniedResolvedAddresses:",
                        "network.allowLocalBinding:", "network.allowMachLookup:", "network.httpProxyPort:",
                        "network.socksProxyPort:", "network.mitmProxy:", "network.allowPlaintextHeaderSet:",
                        "network.stripResponseHeaders:", "network.refuseOpaqueTunnels:", "network.requireHostMatch:",
                        "network.ambiguousRequestTarget:", "network.tlsTerminate:", "network.tlsTerminate.maxTunnels:",
                        "network.tlsTerminate.handshakeTimeoutMs:", "network.parentProxy:", "filesystem.allowGitConfig:",
                        " ignoreViolations:", " enableWeakerNetworkIsolation:", " allowAppleEvents:", " ripgrep:",
                        " mandatoryDenySearchDepth:", " allowPty:", " seccomp:", " bwrapPath:", " socatPath:",
                        " javaAgentJarPath:", " windows:", " git:"})
    EXPECT_NE(notes.find(k), std::string::npos) << k << " says nothing in:\n" << notes;
  // The parent proxy's password is not repeated anywhere.
  EXPECT_EQ(notes.find("p%40ss"), std::string::npos) << notes;
  EXPECT_NE(notes.find("http://***@proxy.corp.test:3128"), std::string::npos) << notes;
}

TEST(SrtSettings, RefusalsSayWhyAndWhatInstead) {
  for (const auto& r : kRefused) {
    auto p = policy::parse_policy(r.doc, "p.json", "/base");
    ASSERT_FALSE(p) << r.doc;
    EXPECT_NE(p.error().message.find(r.says), std::string::npos) << p.error().message;
  }
}

TEST(SrtSettings, BadValuesAreErrors) {
  auto error = [](std::string_view doc) {
    auto p = policy::parse_policy(doc, "p.json", "/base");
    return p ? std::string("(parsed)") : p.error().message;
  };
  EXPECT_EQ(error(R"({"network": {"rules": [{"methods": ["GET"]}]}})"),
            "p.json:1:24: network.rules[0]: missing \"host\": a rule is {\"host\": HOST, \"methods\": [...], "
            "\"paths\": [...], \"readOnly\": true, \"action\": \"allow\" | \"deny\", \"name\": NAME} (host required)");
  EXPECT_NE(error(R"({"network": {"rules": [{"host": "a.test", "paths": ["/a/../b"]}]}})").find("dot segments"),
            std::string::npos);
  EXPECT_NE(error(R"({"network": {"rules": [{"host": "a.test", "paths": ["repos"]}]}})").find("starts with \"/\""),
            std::string::npos);
  EXPECT_NE(error(R"({"network": {"rules": [{"host": "a.test:443"}]}})").find("has no port"), std::string::npos);
  EXPECT_NE(error(R"({"network": {"rules": [{"host": "a.test", "readOnly": true, "methods": ["GET"]}]}})")
                .find("give one or the other"),
            std::string::npos);
  // (Left out, http or https may still come from the environment: ParentProxyFromTheEnvironmentAsSrtTakesIt.)
  EXPECT_NE(error(R"({"network": {"parentProxy": {"http": "http://p.test", "https": "http://q.test", "caFile": "/ca.pem"}}})")
                .find("caFile is for a proxy reached over TLS"),
            std::string::npos);
  EXPECT_NE(error(R"({"network": {"parentProxy": {"https": "https://p.test", "caFile": "ca.pem"}}})")
                .find("must be an absolute path"),
            std::string::npos);
  EXPECT_NE(error(R"({"network": {"parentProxy": {"http": "http://p.test:99999"}}})").find("invalid port"),
            std::string::npos);
  EXPECT_NE(error(R"({"network": {"parentProxy": {"http": "http://p.test", "noProxy": "10.0.0.1/8"}}})")
                .find("bits set after the prefix"),
            std::string::npos);
  EXPECT_NE(error(R"({"network": {"deniedResolvedAddresses": ["nope"]}})").find("invalid address"), std::string::npos);
  EXPECT_NE(error(R"({"network": {"tlsTerminate": {"maxTunnels": 0}}})").find("must be 1-65536"), std::string::npos);
}

TEST(SrtSettings, ProxyUrlsAndNoProxy) {
  auto u = policy::parse_proxy_url("http://me:p%40ss@Proxy.Corp:3128/");
  ASSERT_TRUE(u) << u.error().message;
  EXPECT_EQ(u->host, "proxy.corp");
  EXPECT_EQ(u->port, 3128);
  ASSERT_TRUE(u->credentials);
  EXPECT_EQ(u->credentials->second, "p@ss");
  EXPECT_EQ(policy::parse_proxy_url("http://[::1]")->port, 80);
  EXPECT_FALSE(policy::parse_proxy_url("http://[::1]")->tls);
  // https://: a proxy reached over TLS, port 443 unless given.
  auto t = policy::parse_proxy_url("HTTPS://u:p@tls.corp/");
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_TRUE(t->tls);
  EXPECT_EQ(t->host, "tls.corp");
  EXPECT_EQ(t->port, 443);
  EXPECT_EQ(policy::parse_proxy_url("https://tls.corp:8443")->port, 8443);
  EXPECT_EQ(policy::redacted_proxy_url("https://me:secret@p:1"), "https://***@p:1");
  EXPECT_NE(policy::parse_proxy_url("ftp://p:21").error().message.find("expected http:// or https://"),
            std::string::npos);
  EXPECT_FALSE(policy::parse_proxy_url("socks5://p:1080"));
  EXPECT_FALSE(policy::parse_proxy_url("http://p/x"));
  EXPECT_EQ(policy::redacted_proxy_url("http://me:secret@p:1"), "http://***@p:1");
  auto np = policy::parse_no_proxy(" a.test, .b.test,*.c.test ,d.test:8080, 10.0.0.0/8, 192.0.2.1,[::1]:80");
  ASSERT_TRUE(np) << np.error().message;
  EXPECT_EQ(np->suffixes, (std::vector<std::string>{"a.test", "b.test", "c.test", "d.test"}));
  EXPECT_EQ(np->cidrs, (std::vector<std::string>{"10.0.0.0/8", "192.0.2.1", "::1"}));
  EXPECT_TRUE(policy::parse_no_proxy("*")->all);
}

egress::Host host(std::string_view h) { return *egress::normalise_host(h); }

policy::Network network_of(std::string_view doc) {
  auto p = policy::parse_policy(doc, "p.json", "/base");
  EXPECT_TRUE(p) << (p ? "" : p.error().message);
  return p ? p->network : policy::Network{};
}

TEST(RequestRules, AllowAndDenyByMethodAndPath) {
  auto net = network_of(R"({"network": {"rules": [
      {"host": "api.github.com", "methods": ["GET"], "paths": ["/repos/"]},
      {"host": "api.github.com", "name": "no-admin", "action": "deny", "paths": ["/repos/x/admin"]},
      {"host": "*.ro.test", "readOnly": true}]}})");
  auto rr = egress::RequestRules::from_policy(net);
  ASSERT_TRUE(rr);
  auto gh = host("api.github.com");
  auto check = [&](const egress::Host& h, const char* m, const char* t) { return rr->check(h, m, t).decision; };
  EXPECT_TRUE(check(gh, "GET", "/repos/a/b?x=1").allowed);
  EXPECT_EQ(check(gh, "GET", "/repos/a/b").rule, "network.rules[0] api.github.com");
  auto post = check(gh, "POST", "/repos/a/b");
  EXPECT_FALSE(post.allowed);
  EXPECT_EQ(post.rule, "network.rules[0] api.github.com");
  EXPECT_FALSE(check(gh, "GET", "/user").allowed);
  EXPECT_FALSE(check(gh, "get", "/repos/a").allowed);  // an allow rule matches exactly
  EXPECT_EQ(check(gh, "GET", "/repos/x/admin/keys").rule, "no-admin");
  EXPECT_EQ(check(gh, "GET", "/repos/x/%61dmin").rule, "no-admin");  // a deny rule leniently
  EXPECT_EQ(check(gh, "GET", "/REPOS/X/ADMIN").rule, "no-admin");
  // Ambiguous paths: refused as such, never judged on their spelling.
  auto dots = rr->check(gh, "GET", "/repos/a/../../user");
  EXPECT_FALSE(dots.decision.allowed);
  EXPECT_TRUE(dots.ambiguous);
  EXPECT_TRUE(rr->check(gh, "GET", "/repos/a%2f..%2f..%2fuser").ambiguous);
  EXPECT_TRUE(rr->check(gh, "GET", "//repos/a").ambiguous);
  EXPECT_TRUE(rr->check(gh, "GET", "/repos\\a").ambiguous);
  // readOnly on a wildcard; hosts without a rule go unjudged.
  EXPECT_TRUE(check(host("x.ro.test"), "HEAD", "/a").allowed);
  EXPECT_EQ(check(host("x.ro.test"), "PUT", "/a").rule, "network.rules[2] *.ro.test");
  EXPECT_FALSE(rr->governing(host("ro.test")));
  EXPECT_TRUE(check(host("other.test"), "DELETE", "/").allowed);
}

TEST(RequestRules, ReadOnlyForAllAndNormalize) {
  auto net = network_of(R"({"network": {"readOnly": true, "ambiguousRequestTarget": "normalize",
      "rules": [{"host": "a.test", "paths": ["/pub/"]}]}})");
  auto rr = egress::RequestRules::from_policy(net);
  ASSERT_TRUE(rr);
  EXPECT_EQ(rr->check(host("any.test"), "POST", "/").decision.rule, "network.readOnly");
  EXPECT_TRUE(rr->check(host("any.test"), "OPTIONS", "*").decision.allowed);
  auto v = rr->check(host("a.test"), "GET", "/pub/x/../y?q");
  EXPECT_TRUE(v.decision.allowed);
  EXPECT_EQ(v.normalized_target, "/pub/y?q");
  EXPECT_FALSE(rr->check(host("a.test"), "GET", "/pub/../priv").decision.allowed);
  EXPECT_FALSE(rr->check(host("a.test"), "GET", "/pub/%2e%2e/priv").decision.allowed);
  EXPECT_EQ(egress::detail::normalize_target("/a/./b/").path, "/a/b/");
  EXPECT_FALSE(egress::detail::normalize_target("/a/b.c/d?x=/../").ambiguous);  // the query is not a path
}

TEST(SrtSettings, DeniedReasonsAndResolvedAddresses) {
  auto net = network_of(R"({"network": {"allowedDomains": ["a.test", "b.test"], "deniedDomains": ["b.test"],
      "deniedDomainReasons": {"b.test": "use a.test"},
      "deniedResolvedAddresses": ["203.0.113.0/24", "198.51.100.7"], "allowedCidrs": ["198.51.100.7"]}})");
  auto rules = egress::Rules::from_policy(net);
  ASSERT_TRUE(rules);
  auto d = rules->check_host(host("b.test"), 80);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.reason, "use a.test");
  auto a = rules->check_address(*egress::parse_ip("203.0.113.10"));
  EXPECT_FALSE(a.allowed);
  EXPECT_EQ(a.rule, "deniedResolvedAddresses[0] \"203.0.113.0/24\"");
  EXPECT_TRUE(rules->check_address(*egress::parse_ip("198.51.100.7")).allowed);  // exactly that address allowed
  EXPECT_TRUE(rules->check_address(*egress::parse_ip("192.0.2.1")).allowed);
  // srt 0.0.83: "*:22" denies every host on that port, with its reason.
  auto ssh = egress::Rules::from_policy(network_of(R"({"network": {"allowedDomains": ["a.test"],
      "deniedDomains": ["*:22"], "deniedDomainReasons": {"*:22": "use https"}}})"));
  ASSERT_TRUE(ssh);
  EXPECT_EQ(ssh->check_host(host("a.test"), 22).reason, "use https");
  EXPECT_TRUE(ssh->check_host(host("a.test"), 443).allowed);
  EXPECT_TRUE(ssh->check_name(host("a.test")).allowed);
}

TEST(SrtSettings, WhichProxyAConnectionGoesThrough) {
  auto net = network_of(R"({"network": {"parentProxy": {"http": "http://u:p@plain.corp:3128",
      "https": "http://tls.corp:3129", "noProxy": "corp.test,10.0.0.0/8"},
      "mitmProxy": {"socketPath": "/run/m.sock", "domains": ["*.mitm.test"]}}})");
  auto up = egress::Upstreams::from_policy(net);
  ASSERT_TRUE(up);
  auto tunnel = up->route(host("x.example"), true, false);
  ASSERT_TRUE(tunnel);
  EXPECT_EQ(tunnel->host, "tls.corp");
  EXPECT_EQ(tunnel->port, 3129);
  EXPECT_TRUE(tunnel->authorization.empty());
  auto plain = up->route(host("x.example"), false, false);
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->host, "plain.corp");
  EXPECT_EQ(plain->authorization, "Basic dTpw");
  EXPECT_EQ(plain->label, "parentProxy http://***@plain.corp:3128");
  EXPECT_FALSE(up->route(host("a.corp.test"), true, false));
  EXPECT_FALSE(up->route(host("10.1.2.3"), true, false));
  auto m = up->route(host("a.mitm.test"), true, false);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->unix_path, "/run/m.sock");
  EXPECT_FALSE(tunnel->tls);
  // https://: TLS to the proxy, with a client context that verifies it.
  auto tls = egress::Upstreams::from_policy(network_of(R"({"network": {"parentProxy": {"https": "https://tls.corp"}}})"));
  ASSERT_TRUE(tls) << tls.error().str();
  auto via_tls = tls->route(host("x.example"), true, false);
  ASSERT_TRUE(via_tls);
  EXPECT_TRUE(via_tls->tls);
  EXPECT_EQ(via_tls->port, 443);
  EXPECT_EQ(via_tls->label, "parentProxy https://tls.corp");
  // caFile: loaded at once (a file that is not PEM is an error naming the key), only beside an https:// URL.
  auto bad_ca = egress::Upstreams::from_policy(
      network_of(R"({"network": {"parentProxy": {"https": "https://tls.corp", "caFile": "/dev/null"}}})"));
  ASSERT_FALSE(bad_ca);
  EXPECT_NE(bad_ca.error().str().find("network.parentProxy.caFile /dev/null"), std::string::npos) << bad_ca.error().str();
  auto ports = egress::Upstreams::from_policy(network_of(R"({"network": {"httpProxyPort": 8080, "socksProxyPort": 1081}})"));
  ASSERT_TRUE(ports);
  EXPECT_EQ(ports->route(host("x.test"), true, true)->kind, egress::Via::Kind::Socks5);
  EXPECT_EQ(ports->route(host("x.test"), true, false)->port, 8080);
}


TEST(SrtSettings, ParentProxyFromTheEnvironmentAsSrtTakesIt) {
  auto env_of = [](std::map<std::string, std::string> vars) {
    return [vars = std::move(vars)](const char* n) -> const char* {
      auto it = vars.find(n);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  };
  auto with_env = [&](std::string_view doc, std::map<std::string, std::string> vars) {
    auto p = policy::parse_policy(doc, "p.json", "/base");
    EXPECT_TRUE(p);
    auto r = policy::parent_proxy_from_environment(*p, env_of(std::move(vars)));
    EXPECT_TRUE(r) << (r ? "" : r.error().message);
    return *p;
  };
  // Nothing set: direct, nothing noted.
  auto none = with_env("{}", {});
  EXPECT_FALSE(none.network.parent_proxy);
  EXPECT_TRUE(none.notes.empty());
  // Upper case wins; a value without a scheme is http://; https falls back to http (at routing).
  auto p = with_env("{}", {{"HTTP_PROXY", "u:p@proxy.corp:3128"}, {"http_proxy", "http://lower:1"},
                           {"no_proxy", "corp.test,10.0.0.0/8"}});
  ASSERT_TRUE(p.network.parent_proxy);
  EXPECT_EQ(p.network.parent_proxy->http, "http://u:p@proxy.corp:3128");
  EXPECT_EQ(p.network.parent_proxy->https, "");
  EXPECT_EQ(p.network.parent_proxy->no_proxy, "corp.test,10.0.0.0/8");
  ASSERT_EQ(p.notes.size(), 2u);
  EXPECT_EQ(p.notes[0], "network.parentProxy.http: from HTTP_PROXY: http://***@proxy.corp:3128 "
                        "(srt's fallback: the environment exguardian was started with)");
  EXPECT_EQ(p.notes[1].find("network.parentProxy.noProxy: from no_proxy: direct: corp.test,10.0.0.0/8"), 0u);
  auto up = egress::Upstreams::from_policy(p.network);
  ASSERT_TRUE(up);
  EXPECT_EQ(up->route(host("x.example"), true, false)->host, "proxy.corp");
  EXPECT_FALSE(up->route(host("a.corp.test"), true, false));
  // Field by field: what the policy gives stays, the rest comes from the environment.
  auto mixed = with_env(R"({"network": {"parentProxy": {"https": "http://tls.corp:3129"}}})",
                        {{"HTTP_PROXY", "http://plain.corp:80"}, {"HTTPS_PROXY", "http://ignored:1"}});
  EXPECT_EQ(mixed.network.parent_proxy->https, "http://tls.corp:3129");
  EXPECT_EQ(mixed.network.parent_proxy->http, "http://plain.corp:80");
  EXPECT_EQ(mixed.notes.back().find("network.parentProxy.http: from HTTP_PROXY"), 0u);
  // An empty value is none; a value that is not a proxy URL is an error naming the variable.
  EXPECT_FALSE(with_env("{}", {{"HTTPS_PROXY", ""}, {"https_proxy", "http://x:1"}}).network.parent_proxy);
  // A parentProxy with only caFile (or noProxy): the proxies come from the environment, and
  // -v / --dry-run say where each field came from.
  const char* ca_only = R"({"network": {"parentProxy": {"caFile": "/etc/corp-ca.pem"}}})";
  auto ca = with_env(ca_only, {{"HTTPS_PROXY", "https://tls.corp:8443"}});
  ASSERT_TRUE(ca.network.parent_proxy);
  EXPECT_EQ(ca.network.parent_proxy->ca_file, "/etc/corp-ca.pem");
  EXPECT_EQ(ca.network.parent_proxy->https, "https://tls.corp:8443");
  EXPECT_EQ(ca.network.parent_proxy->http, "");
  ASSERT_EQ(ca.notes.size(), 2u);
  EXPECT_EQ(ca.notes[0], "p.json:1:14: network.parentProxy: no proxy URL of its own: \"http\" and \"https\" come from "
                         "HTTP_PROXY and HTTPS_PROXY of the environment exguardian is started with (srt's fallback; an "
                         "error when neither is set); caFile /etc/corp-ca.pem trusted for an https:// proxy the "
                         "environment names; its credentials stay outside the sandbox");
  EXPECT_EQ(ca.notes[1].find("network.parentProxy.https: from HTTPS_PROXY: https://tls.corp:8443 (srt's fallback"), 0u);
  auto np = with_env(R"({"network": {"parentProxy": {"noProxy": "corp.test"}}})", {{"http_proxy", "proxy.corp:3128"}});
  EXPECT_EQ(np.network.parent_proxy->http, "http://proxy.corp:3128");
  EXPECT_EQ(np.network.parent_proxy->no_proxy, "corp.test");
  // ... and refused, naming the key and why, when the environment does not complete it.
  auto refused = [&](std::string_view doc, std::map<std::string, std::string> vars) {
    auto q = policy::parse_policy(doc, "p.json", "/base");
    EXPECT_TRUE(q) << doc;
    if (!q) return std::string();
    auto r = policy::parent_proxy_from_environment(*q, env_of(std::move(vars)));
    return r ? std::string("(accepted)") : r.error().message;
  };
  EXPECT_EQ(refused(ca_only, {{"NO_PROXY", "x.test"}}),
            "p.json:1:14: network.parentProxy: names no proxy: neither \"http\" nor \"https\" is given, and the "
            "environment exguardian was started with sets none of HTTP_PROXY, http_proxy, HTTPS_PROXY, https_proxy "
            "(srt's fallback): give a proxy URL, set one of those, or leave parentProxy out");
  EXPECT_EQ(refused(R"({"network": {"parentProxy": {}}})", {}).find("p.json:1:14: network.parentProxy: names no proxy"), 0u);
  EXPECT_EQ(refused(ca_only, {{"HTTP_PROXY", "http://plain.corp:3128"}}),
            "p.json:1:14: network.parentProxy: caFile is for a proxy reached over TLS, and neither URL is https:// "
            "(after srt's fallback to the environment; network.parentProxy.http: from HTTP_PROXY: "
            "http://plain.corp:3128)");
  EXPECT_EQ(refused(R"({"network": {"parentProxy": {"http": "http://p.test", "caFile": "/ca.pem"}}})", {}),
            "p.json:1:14: network.parentProxy: caFile is for a proxy reached over TLS, and neither URL is https:// "
            "(after srt's fallback to the environment, which named none)");
  EXPECT_EQ(refused(R"({"network": {"parentProxy": {"http": "http://p.test", "caFile": "/ca.pem"}}})",
                    {{"HTTPS_PROXY", "https://tls.corp"}}),
            "(accepted)");

  auto bad = policy::parse_policy("{}", "p.json", "/base");
  auto r = policy::parent_proxy_from_environment(*bad, env_of({{"HTTPS_PROXY", "socks5://s:1080"}}));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message.find("HTTPS_PROXY (srt's fallback for network.parentProxy.https): parent proxy URL "
                                   "socks5://s:1080: unsupported scheme"),
            0u)
      << r.error().message;
}

}  // namespace
}  // namespace exg
