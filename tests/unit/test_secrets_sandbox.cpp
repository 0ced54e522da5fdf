// Secrets on the sandbox's side (issue 5): the policy keys (ours and srt's
// credentials), and what compile() makes of them: placeholders, the
// environment, masked copies of credential files, the trust bundle, and the
// value never appearing in anything the sandbox or --dry-run gets.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "plan/plan.hpp"
#include "plan/secrets.hpp"
#include "policy/extract_pattern.hpp"
#include "policy/policy.hpp"

namespace exg {
namespace {

namespace fs = std::filesystem;

policy::PResult<policy::Policy> parse(std::string_view text, const std::string& base = "/base") {
  return policy::parse_policy(text, "p.json", base);
}

std::string error_of(std::string_view text) {
  auto p = parse(text);
  if (p) {
    ADD_FAILURE() << "expected an error for: " << text;
    return "";
  }
  return p.error().message;
}

policy::Policy ok(std::string_view text, const std::string& base = "/base") {
  auto p = parse(text, base);
  EXPECT_TRUE(p.has_value()) << (p ? "" : p.error().message);
  return p ? *p : policy::Policy{};
}

// ---- the policy ----

TEST(SecretsPolicy, OwnKeys) {
  auto p = ok(R"J({
  "network": {"allowedDomains": ["api.github.com"]},
  "secrets": [
    {"name": "GITHUB_TOKEN", "from": "env:GH_HOST_TOKEN", "hosts": ["api.github.com", "*.githubusercontent.com"]},
    {"name": "NPM_TOKEN", "from": "file:~/.npm-token", "extract": "token=(\\S+)", "hosts": ["registry.npmjs.org"]}
  ],
  "secretFiles": [{"path": "~/.npmrc", "secrets": ["NPM_TOKEN"]}]
})J");
  ASSERT_EQ(p.secrets.size(), 2u);
  EXPECT_EQ(p.secrets[0].name, "GITHUB_TOKEN");
  EXPECT_EQ(p.secrets[0].source, policy::SecretEntry::Source::Env);
  EXPECT_EQ(p.secrets[0].from, "GH_HOST_TOKEN");
  ASSERT_EQ(p.secrets[0].hosts.size(), 2u);
  EXPECT_EQ(p.secrets[0].hosts[1].pattern, "*.githubusercontent.com");
  EXPECT_EQ(p.secrets[0].hosts[1].where.str(), "p.json:4:87");
  EXPECT_EQ(p.secrets[0].where.str(), "p.json:4:5");
  EXPECT_TRUE(p.secrets[0].set_env);
  EXPECT_EQ(p.secrets[1].source, policy::SecretEntry::Source::File);
  EXPECT_EQ(p.secrets[1].from, "~/.npm-token");
  EXPECT_EQ(p.secrets[1].base_dir, "/base");
  EXPECT_EQ(p.secrets[1].extract.value_or(""), "token=(\\S+)");
  EXPECT_TRUE(p.secrets[0].headers.empty());  // any header
  auto lim = ok(R"J({"network": {"allowedDomains": ["a.com"]},
    "secrets": [{"name": "K", "from": "env:K", "hosts": ["a.com"], "headers": ["X-Api-Key", "authorization"]}]})J");
  EXPECT_EQ(lim.secrets[0].headers, (std::vector<std::string>{"x-api-key", "authorization"}));
  // "setHeader": the proxy sets the header itself; no variable inside (E2B's network.rules).
  auto set = ok(R"J({"network": {"allowedDomains": ["a.com"]},
    "secrets": [{"name": "E2B_RULE_1", "from": "env:V", "hosts": ["a.com"], "setHeader": "Authorization"}]})J");
  EXPECT_EQ(set.secrets[0].set_header, "Authorization");
  EXPECT_FALSE(set.secrets[0].set_env);
  ASSERT_EQ(p.secret_files.size(), 1u);
  EXPECT_EQ(p.secret_files[0].path, "~/.npmrc");
  EXPECT_EQ(p.secret_files[0].secrets, std::vector<std::string>{"NPM_TOKEN"});
}

TEST(SecretsPolicy, ErrorsNameWhatAndWhere) {
  EXPECT_EQ(error_of(R"J({"secrets": [{"name": "A_TOKEN", "from": "env:A", "hosts": ["a.com"], "host": 1}]})J"),
            "p.json:1:71: unknown key \"host\" in secrets[0] (did you mean \"hosts\"?)");
  EXPECT_EQ(error_of(R"J({"secrets": [{"name": "1BAD", "from": "env:A", "hosts": ["a.com"]}]})J"),
            "p.json:1:23: secrets[0].name: invalid environment variable name \"1BAD\" (expected letters, digits "
            "and _, not starting with a digit)");
  EXPECT_EQ(error_of(R"J({"secrets": [{"name": "A_TOKEN", "from": "vault:x", "hosts": ["a.com"]}]})J"),
            "p.json:1:42: secrets[0].from: expected \"env:NAME\" or \"file:PATH\", got \"vault:x\"");
  EXPECT_EQ(error_of(R"J({"secrets": [{"name": "A_TOKEN", "from": "env:1X", "hosts": ["a.com"]}]})J"),
            "p.json:1:42: secrets[0].from: invalid environment variable name \"1X\" (expected letters, digits and _, "
            "not starting with a digit) in \"env:1X\"");
  EXPECT_EQ(error_of(R"J({"secrets": [{"name": "A_TOKEN", "from": "file:", "hosts": ["a.com"]}]})J"),
            "p.json:1:42: secrets[0].from: empty path in \"file:\" (expected \"env:NAME\" or \"file:PATH\")");
  EXPECT_EQ(error_of(R"J({"secrets": [{"name": "A_TOKEN", "from": "env:A", "hosts": ["https://a.com"]}]})J"),
            "p.json:1:61: secrets[0].hosts[0]: domain \"https://a.com\" contains a URL scheme; write the host name "
            "only");
  EXPECT_EQ(error_of(R"J({"secrets": [{"name": "A_TOKEN", "from": "env:A", "hosts": []}]})J"),
            "p.json:1:60: secrets[0].hosts: must name at least one host: a secret goes only where it is meant to");
  EXPECT_EQ(error_of(R"J({"secrets": [{"name": "A_TOKEN", "from": "env:A"}]})J"),
            "p.json:1:14: secrets[0]: secret \"A_TOKEN\": missing \"hosts\": a secret goes only to the hosts named "
            "for it");
  EXPECT_EQ(error_of(R"J({"secrets": [{"name": "A_TOKEN", "from": "env:A", "hosts": ["a.com"], "extract": "x+"}]})J"),
            "p.json:1:82: secrets[0].extract: needs a capture group: group 1 of each match is the secret's value");
  // Extract patterns are RE2's (linear time, no recursion): what needs
  // backtracking is refused when the policy is loaded, naming why.
  EXPECT_EQ(error_of(R"J({"secrets": [{"name": "A_TOKEN", "from": "env:A", "hosts": ["a.com"], "extract": "(a)\\1"}]})J"),
            "p.json:1:82: secrets[0].extract: invalid regular expression \"(a)\\1\": invalid escape sequence: \\1 "
            "(RE2 syntax: no back-references, no look-ahead or look-behind, no possessive repeats; a named group is "
            "(?P<name>...))");
  EXPECT_EQ(error_of(R"J({"secrets": [{"name": "A_TOKEN", "from": "env:A", "hosts": ["a.com"], "extract": "(?=a)(b)"}]})J"),
            "p.json:1:82: secrets[0].extract: invalid regular expression \"(?=a)(b)\": invalid perl operator: "
            "(?= (RE2 syntax: no back-references, no look-ahead or look-behind, no possessive repeats; a named group is "
            "(?P<name>...))");
  // A plain syntax error gets no hint about what RE2 leaves out.
  EXPECT_EQ(error_of(R"J({"secrets": [{"name": "A_TOKEN", "from": "env:A", "hosts": ["a.com"], "extract": "(abc"}]})J"),
            "p.json:1:82: secrets[0].extract: invalid regular expression \"(abc\": missing ): (abc");
  // A number of more than 9 digits overflowed libstdc++'s regex compiler
  // (fuzz/policy.cpp); RE2 refuses counts over 1000 and reads a brace it
  // cannot take as a count as itself.
  EXPECT_EQ(error_of(R"J({"secrets": [{"name": "A_TOKEN", "from": "env:A", "hosts": ["a.com"], "extract": "(a{1,1001})"}]})J"),
            "p.json:1:82: secrets[0].extract: invalid regular expression \"(a{1,1001})\": invalid "
            "repetition size: {1,1001}");
  EXPECT_EQ(ok(R"J({"secrets": [{"name": "A_TOKEN", "from": "env:A", "hosts": ["a.com"], "extract": "(a{1,99999999999})"}]})J")
                .secrets[0].extract.value_or(""),
            "(a{1,99999999999})");
  EXPECT_EQ(policy::extract_values("(a{1,99999999999})", "xa{1,99999999999}", 2), std::vector<std::string>{"a{1,99999999999}"});
  EXPECT_EQ(error_of(R"J({"secrets": [{"name": "A_TOKEN", "from": "env:A", "hosts": ["a.com"], "extract": "(a))J" +
                     std::string(1022, 'b') + R"J("}]})J"),
            "p.json:1:82: secrets[0].extract: the regular expression is 1025 characters long (at most 1024)");
  EXPECT_EQ(ok(R"J({"secrets": [{"name": "A_TOKEN", "from": "env:A", "hosts": ["a.com"], "extract": "id=12345678901(a{1,9})"}]})J")
                .secrets[0].extract.value_or(""),
            "id=12345678901(a{1,9})");
  EXPECT_EQ(error_of(R"J({"secrets": [{"name": "A", "from": "env:A", "hosts": ["a.com"]},
                                     {"name": "A", "from": "env:B", "hosts": ["b.com"]}]})J"),
            "p.json:2:47: secrets[1].name: secret \"A\" is already declared at p.json:1:14");
  EXPECT_EQ(error_of(R"J({"secrets": [{"name": "A", "from": "env:A", "hosts": ["a.com"], "headers": []}]})J"),
            "p.json:1:76: secrets[0].headers: must name at least one header (leave the key out for any header)");
  EXPECT_EQ(error_of(R"J({"secrets": [{"name": "A", "from": "env:A", "hosts": ["a.com"], "headers": ["x key"]}]})J"),
            "p.json:1:77: secrets[0].headers[0]: \"x key\" is not a header name");
  EXPECT_EQ(error_of(R"J({"secrets": [{"name": "A", "from": "env:A", "hosts": ["a.com"], "headers": ["Host"]}]})J"),
            "p.json:1:77: secrets[0].headers[0]: \"Host\": the proxy sets or removes this header itself");
  EXPECT_EQ(error_of(R"J({"secrets": [{"name": "A", "from": "env:A", "hosts": ["a.com"], "headers": ["a", "A"]}]})J"),
            "p.json:1:82: secrets[0].headers[1]: \"A\" is listed twice");
  EXPECT_EQ(error_of(R"J({"secrets": [{"name": "A", "from": "env:A", "hosts": ["a.com"], "headers": "x"}]})J"),
            "p.json:1:76: secrets[0].headers: expected an array of request header names, got string");
  EXPECT_NE(error_of(R"J({"secrets": [{"name": "A", "from": "env:A", "hosts": ["a.com"], "setHeader": "Content-Length"}]})J")
                .find("secrets[0].setHeader: \"Content-Length\": the proxy sets or removes this header itself"),
            std::string::npos);
  EXPECT_NE(error_of(R"J({"secrets": [{"name": "A", "from": "env:A", "hosts": ["a.com"], "setHeader": "a b"}]})J")
                .find("secrets[0].setHeader: \"a b\" is not a header name"),
            std::string::npos);
  EXPECT_EQ(error_of(R"J({"secretFiles": [{"path": "~/.npmrc", "secrets": []}]})J"),
            "p.json:1:50: secretFiles[0].secrets: must name at least one secret");
  EXPECT_EQ(error_of(R"J({"secretFiles": [{"path": "~/*.rc", "secrets": ["A"]}]})J"),
            "p.json:1:27: secretFiles[0].path: \"~/*.rc\": one path, not a glob");
}

TEST(SecretsPolicy, SrtCredentialsMapOntoSecrets) {
  auto p = ok(R"J({
  "network": {"allowedDomains": ["*.github.com"], "tlsTerminate": {}},
  "credentials": {
    "envVars": [
      {"name": "GH_TOKEN", "mode": "mask", "injectHosts": ["api.github.com"]},
      {"name": "ANTHROPIC_API_KEY", "mode": "deny"}
    ],
    "files": [
      {"path": "~/.config/gh/hosts.yml", "mode": "mask", "extract": "oauth_token:\\s*(\\S+)",
       "injectHosts": ["api.github.com"]},
      {"path": "~/.aws", "mode": "deny"}
    ],
    "allowPlaintextInject": false
  }
})J");
  ASSERT_EQ(p.secrets.size(), 2u);
  EXPECT_EQ(p.secrets[0].name, "GH_TOKEN");
  EXPECT_EQ(p.secrets[0].from, "GH_TOKEN");
  EXPECT_TRUE(p.secrets[0].set_env);
  EXPECT_EQ(p.secrets[0].hosts[0].pattern, "api.github.com");
  EXPECT_EQ(p.secrets[1].name, "FILE_HOSTS_YML");
  EXPECT_EQ(p.secrets[1].source, policy::SecretEntry::Source::File);
  EXPECT_EQ(p.secrets[1].from, "~/.config/gh/hosts.yml");
  EXPECT_FALSE(p.secrets[1].set_env);
  EXPECT_EQ(p.secrets[1].extract.value_or(""), "oauth_token:\\s*(\\S+)");
  ASSERT_EQ(p.secret_files.size(), 1u);
  EXPECT_EQ(p.secret_files[0].path, "~/.config/gh/hosts.yml");
  EXPECT_EQ(p.secret_files[0].secrets, std::vector<std::string>{"FILE_HOSTS_YML"});
  EXPECT_EQ(p.env.deny, std::vector<std::string>{"ANTHROPIC_API_KEY"});
  ASSERT_EQ(p.filesystem.deny_read.size(), 1u);
  EXPECT_EQ(p.filesystem.deny_read[0].path, "~/.aws");
  EXPECT_TRUE(std::any_of(p.notes.begin(), p.notes.end(),
                          [](const std::string& n) { return n.find("network.tlsTerminate") != std::string::npos; }));
}

TEST(SecretsPolicy, SrtCredentialsRefusals) {
  EXPECT_EQ(error_of(R"J({"credentials": {"envVars": [{"name": "GH_TOKEN", "mode": "mask"}]}})J"),
            "p.json:1:30: credentials.envVars[0]: credentials.envVars entry \"GH_TOKEN\": mode \"mask\" needs "
            "injectHosts: ExGuardian sends a secret only to the hosts named for it");
  EXPECT_EQ(error_of(R"J({"credentials": {"envVars": [{"name": "GH_TOKEN", "mode": "hide"}]}})J"),
            "p.json:1:59: credentials.envVars[0].mode: unknown mode \"hide\" (expected \"mask\" or \"deny\")");
  EXPECT_EQ(error_of(R"J({"credentials": {"envVars": [{"name": "T", "mode": "mask", "decode": "jwt"}]}})J"),
            "p.json:1:60: credentials.envVars[0].decode: not supported: ExGuardian does not rewrite JSON Web "
            "Tokens; mask the whole value or use \"extract\"");
  EXPECT_EQ(error_of(R"J({"credentials": {"files": [{"path": "~/.t", "mode": "mask", "injectHosts": ["a.com"],
                                                     "onExtractNoMatch": "warn"}]}})J"),
            "p.json:2:74: credentials.files[0].onExtractNoMatch: ExGuardian refuses to start when extract finds "
            "nothing (\"error\"); \"warn\" is not supported");
  EXPECT_EQ(error_of(R"J({"credentials": {"allowPlaintextInject": true}})J"),
            "p.json:1:42: credentials.allowPlaintextInject: ExGuardian puts secrets only into TLS connections it "
            "terminates itself; remove the key or set it to false");
  EXPECT_EQ(error_of(R"J({"network": {"tlsTerminate": {"caKeyPath": "/k.pem"}}})J"),
            "p.json:1:31: network.tlsTerminate.caKeyPath: ExGuardian makes its own CA in memory for every sandbox "
            "(its key never touches the disk); remove the key");
}

TEST(SecretsPolicy, MergeAppends) {
  auto a = ok(R"J({"secrets": [{"name": "A_TOKEN", "from": "env:A", "hosts": ["a.com"]}]})J");
  auto b = ok(R"J({"secrets": [{"name": "B_TOKEN", "from": "env:B", "hosts": ["b.com"]}],
                  "secretFiles": [{"path": "x", "secrets": ["B_TOKEN"]}],
                  "credentials": {"envVars": [{"name": "C", "mode": "deny"}]}})J");
  policy::merge(a, b);
  ASSERT_EQ(a.secrets.size(), 2u);
  EXPECT_EQ(a.secrets[1].name, "B_TOKEN");
  EXPECT_EQ(a.secret_files.size(), 1u);
  EXPECT_EQ(a.env.deny.size(), 1u);
}

// ---- the plan ----

class SecretsPlan : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/exg_secrets_test_XXXXXX";
    char* d = ::mkdtemp(tmpl);
    ASSERT_NE(d, nullptr);
    char buf[PATH_MAX];
    root = ::realpath(d, buf);
    ws = root + "/ws";
    home = root + "/home";
    fs::create_directories(ws);
    fs::create_directories(home + "/.config/gh");
    write(home + "/.npmrc", "registry=https://registry.npmjs.org/\n//registry.npmjs.org/:_authToken=" + kNpm +
                                "\nalways-auth=true\n");
    write(home + "/npm-token", kNpm + "\n");
    write(home + "/.config/gh/hosts.yml", "github.com:\n    oauth_token: " + kGh + "\n    user: me\n");
    ctx.uid = 1000;
    ctx.gid = 1000;
    ctx.cwd = ws;
    ctx.home = home;
    ctx.workspace = ws;
    ctx.argv = {"true"};
    ctx.sandbox_id = "sec12345";
    ctx.environ = {"PATH=/usr/bin:/bin", "GITHUB_TOKEN=" + kGh, "ALSO_GH=" + kGh,
                   "DATABASE_URL=postgres://app:" + kDb + "@db.internal:5432/app"};
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  static void write(const std::string& p, const std::string& text) { std::ofstream(p) << text; }

  policy::Policy pol(const std::string& json) { return ok(json, ws); }

  plan::Plan compiled(const std::string& json) {
    auto r = plan::compile(pol(json), ctx);
    EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().str());
    return r ? *r : plan::Plan{};
  }
  std::string compile_error(const std::string& json) {
    auto r = plan::compile(pol(json), ctx);
    if (r) {
      ADD_FAILURE() << "expected an error for " << json;
      return "";
    }
    return r.error().str();
  }
  const plan::Step* step(const plan::Plan& p, plan::StepKind k, const std::string& target) {
    for (const auto& s : p.steps)
      if (s.kind == k && s.target == target) return &s;
    return nullptr;
  }
  long index_of(const plan::Plan& p, plan::StepKind k, const std::string& target) {
    for (size_t i = 0; i < p.steps.size(); ++i)
      if (p.steps[i].kind == k && p.steps[i].target == target) return static_cast<long>(i);
    return -1;
  }
  std::string env_of(const plan::Plan& p, const std::string& name) {
    for (const auto& e : p.env)
      if (e.starts_with(name + "=")) return e.substr(name.size() + 1);
    return "<unset>";
  }
  // Everything the sandbox or a reader of --dry-run gets from the plan.
  std::string visible(const plan::Plan& p) {
    std::string all = p.to_text();
    for (const auto& e : p.env) all += e + "\n";
    for (const auto& s : p.steps) all += s.source + s.target + s.content + s.why + "\n";
    for (const auto& n : p.notes) all += n + "\n";
    return all;
  }

  const std::string kGh = "ghp_R3alGitHubValue0123456789";
  const std::string kNpm = "npm_R3alNpmValue_abcdef";
  const std::string kDb = "db_R3alPassw0rd";
  const std::string kNet =
      R"J("network": {"allowedDomains": ["api.github.com", "*.githubusercontent.com", "registry.npmjs.org",
                                        "db.example.com"]})J";
  std::string root, ws, home;
  plan::Context ctx;
};

TEST_F(SecretsPlan, PlaceholdersEnvAndNoValueAnywhere) {
  std::string json = "{" + kNet + R"J(, "secrets": [
      {"name": "GITHUB_TOKEN", "from": "env:GITHUB_TOKEN", "hosts": ["api.github.com", "*.githubusercontent.com"]},
      {"name": "NPM_TOKEN", "from": "file:~/npm-token", "hosts": ["registry.npmjs.org"]}],
    "secretFiles": [{"path": "~/.npmrc", "secrets": ["NPM_TOKEN"]}],
    "env": {"allow": ["ALSO_GH"]}})J";
  auto p = compiled(json);
  ASSERT_EQ(p.secrets.size(), 2u);
  const std::regex shape("exg_ph_GITHUB_TOKEN_[0-9a-f]{32}");
  EXPECT_TRUE(std::regex_match(p.secrets[0].placeholder, shape)) << p.secrets[0].placeholder;
  EXPECT_TRUE(std::regex_match(p.secrets[1].placeholder, std::regex("exg_ph_NPM_TOKEN_[0-9a-f]{32}")));
  EXPECT_EQ(p.secrets[0].value, kGh);
  EXPECT_EQ(p.secrets[1].value, kNpm);  // the file's trailing newline is not part of it
  EXPECT_EQ(p.secrets[0].hosts, (std::vector<std::string>{"api.github.com", "*.githubusercontent.com"}));
  // Inside: the placeholder under the secret's name, and under any other name that held the value.
  EXPECT_EQ(env_of(p, "GITHUB_TOKEN"), p.secrets[0].placeholder);
  EXPECT_EQ(env_of(p, "NPM_TOKEN"), p.secrets[1].placeholder);
  EXPECT_EQ(env_of(p, "ALSO_GH"), p.secrets[0].placeholder);
  for (const char* n : {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO"})
    EXPECT_EQ(env_of(p, n), p.trust_bundle_path) << n;
  EXPECT_FALSE(p.trust_bundle_path.empty());
  // The values: nowhere in what the sandbox or --dry-run sees.
  std::string all = visible(p);
  EXPECT_EQ(all.find(kGh), std::string::npos);
  EXPECT_EQ(all.find(kNpm), std::string::npos);
  EXPECT_NE(p.to_text().find("GITHUB_TOKEN -> api.github.com, *.githubusercontent.com"), std::string::npos);
  // A fresh sandbox, fresh placeholders.
  auto q = compiled(json);
  EXPECT_NE(q.secrets[0].placeholder, p.secrets[0].placeholder);
  EXPECT_NE(q.secrets[1].placeholder, p.secrets[1].placeholder);
}

TEST_F(SecretsPlan, MaskedCopyOfACredentialFile) {
  auto p = compiled("{" + kNet + R"J(, "secrets": [
      {"name": "NPM_TOKEN", "from": "file:~/npm-token", "hosts": ["registry.npmjs.org"]}],
    "secretFiles": [{"path": "~/.npmrc", "secrets": ["NPM_TOKEN"]}]})J");
  const plan::Step* f = step(p, plan::StepKind::File, home + "/.npmrc");
  ASSERT_NE(f, nullptr);
  EXPECT_FALSE(f->trust_bundle);
  EXPECT_FALSE(f->is_dir);
  EXPECT_EQ(f->content, "registry=https://registry.npmjs.org/\n//registry.npmjs.org/:_authToken=" +
                            p.secrets[0].placeholder + "\nalways-auth=true\n");
  // ~/.npmrc is a default credential path: the copy replaces the empty mask, not added under it.
  EXPECT_EQ(step(p, plan::StepKind::MaskFile, home + "/.npmrc"), nullptr);
  // The file the value was read from stays unreadable.
  EXPECT_NE(step(p, plan::StepKind::MaskFile, home + "/npm-token"), nullptr);
  // The trust bundle, filled by the supervisor later.
  size_t bundles = 0;
  for (const auto& s : p.steps)
    if (s.kind == plan::StepKind::File && s.trust_bundle) {
      ++bundles;
      EXPECT_TRUE(s.content.empty());
      EXPECT_EQ(s.source, p.host_trust_bundle);
    }
  EXPECT_GE(bundles, 1u);
}

TEST_F(SecretsPlan, SrtFileMaskInsideAMaskedDirectory) {
  auto p = compiled(R"J({"network": {"allowedDomains": ["api.github.com"], "tlsTerminate": {}},
    "credentials": {"files": [{"path": "~/.config/gh/hosts.yml", "mode": "mask",
                               "extract": "oauth_token:\\s*(\\S+)", "injectHosts": ["api.github.com"]}]}})J");
  ASSERT_EQ(p.secrets.size(), 1u);
  EXPECT_EQ(p.secrets[0].value, kGh);
  EXPECT_EQ(env_of(p, "FILE_HOSTS_YML"), "<unset>");  // srt file masks set no variable
  std::string file = home + "/.config/gh/hosts.yml";
  const plan::Step* f = step(p, plan::StepKind::File, file);
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->content, "github.com:\n    oauth_token: " + p.secrets[0].placeholder + "\n    user: me\n");
  // ~/.config/gh is masked by default: passable (to reach the copy), not listable; the copy goes in before the seal.
  const plan::Step* mask = step(p, plan::StepKind::MaskDir, home + "/.config/gh");
  ASSERT_NE(mask, nullptr);
  EXPECT_EQ(mask->mode, 0111u);
  long at = index_of(p, plan::StepKind::File, file);
  EXPECT_GT(at, index_of(p, plan::StepKind::MaskDir, home + "/.config/gh"));
  EXPECT_LT(at, index_of(p, plan::StepKind::ReadOnly, home + "/.config/gh"));
  EXPECT_EQ(step(p, plan::StepKind::MaskFile, file), nullptr);
  // Other masked directories stay shut.
  for (const auto& s : p.steps)
    if (s.kind == plan::StepKind::MaskDir && s.target != home + "/.config/gh") EXPECT_EQ(s.mode, 0u) << s.target;
  EXPECT_EQ(visible(p).find(kGh), std::string::npos);
}

TEST_F(SecretsPlan, ExtractFromAVariableKeepsItsShape) {
  auto p = compiled("{" + kNet + R"J(, "secrets": [
      {"name": "DATABASE_URL", "from": "env:DATABASE_URL", "extract": "//[^:]+:([^@]+)@", "hosts": ["db.example.com"]}]})J");
  ASSERT_EQ(p.secrets.size(), 1u);
  EXPECT_EQ(p.secrets[0].value, kDb);
  EXPECT_EQ(env_of(p, "DATABASE_URL"), "postgres://app:" + p.secrets[0].placeholder + "@db.internal:5432/app");
}

TEST_F(SecretsPlan, HostsMustBeAllowed) {
  EXPECT_EQ(compile_error(R"J({"network": {"allowedDomains": ["github.com"]},
      "secrets": [{"name": "GITHUB_TOKEN", "from": "env:GITHUB_TOKEN", "hosts": ["api.github.com"]}]})J"),
            "secret GITHUB_TOKEN (p.json:2:19): host \"api.github.com\" is not allowed by network.allowedDomains: "
            "add it there too (the secret goes only where the sandbox may connect) [p.json:2:82]");
  EXPECT_NE(compile_error(R"J({"network": {"allowedDomains": ["*.github.com"], "deniedDomains": ["api.github.com"]},
      "secrets": [{"name": "GITHUB_TOKEN", "from": "env:GITHUB_TOKEN", "hosts": ["api.github.com"]}]})J")
                .find("is denied by network.deniedDomains \"api.github.com\""),
            std::string::npos);
  // Wildcards: "*.x" covers its subdomains and narrower wildcards, never x itself; ports must agree.
  policy::Network net;
  net.allowed_domains = {{"*.github.com", {}}, {"registry.npmjs.org:443", {}}};
  EXPECT_FALSE(plan::secret_host_refusal("api.github.com", net));
  EXPECT_FALSE(plan::secret_host_refusal("*.api.github.com", net));
  EXPECT_FALSE(plan::secret_host_refusal("*.github.com", net));
  EXPECT_FALSE(plan::secret_host_refusal("API.GitHub.com.", net));
  EXPECT_TRUE(plan::secret_host_refusal("github.com", net));
  EXPECT_TRUE(plan::secret_host_refusal("*.com", net));
  EXPECT_TRUE(plan::secret_host_refusal("evilgithub.com", net));
  EXPECT_FALSE(plan::secret_host_refusal("registry.npmjs.org:443", net));
  EXPECT_TRUE(plan::secret_host_refusal("registry.npmjs.org", net));  // any port, but only 443 is allowed
}

TEST_F(SecretsPlan, ValueProblemsNameTheSecret) {
  EXPECT_EQ(compile_error("{" + kNet + R"J(, "secrets": [{"name": "T", "from": "env:NOPE", "hosts": ["api.github.com"]}]})J"),
            "secret T (p.json:2:73): env:NOPE is not set in exguardian's environment");
  EXPECT_NE(compile_error("{" + kNet + R"J(, "secrets": [{"name": "T", "from": "file:~/missing", "hosts": ["api.github.com"]}]})J")
                .find("secret T (p.json:2:73): file:~/missing: " + home + "/missing does not exist"),
            std::string::npos);
  EXPECT_NE(compile_error("{" + kNet + R"J(, "secrets": [{"name": "T", "from": "env:GITHUB_TOKEN", "extract": "zz(x)",
                                                          "hosts": ["api.github.com"]}]})J")
                .find("finds nothing"),
            std::string::npos);
  EXPECT_NE(compile_error("{" + kNet + R"J(, "secrets": [{"name": "T", "from": "env:GITHUB_TOKEN", "extract": "(.)",
                                                          "hosts": ["api.github.com"]}]})J")
                .find("finds more than one different value"),
            std::string::npos);
  EXPECT_NE(compile_error("{" + kNet + R"J(, "secrets": [{"name": "T", "from": "env:GITHUB_TOKEN", "hosts": ["api.github.com"]}],
                                           "secretFiles": [{"path": "~/.npmrc", "secrets": ["T"]}]})J")
                .find("the value of secret T is not in " + home + "/.npmrc"),
            std::string::npos);
  EXPECT_NE(compile_error("{" + kNet + R"J(, "secretFiles": [{"path": "~/.npmrc", "secrets": ["NOPE"]}]})J")
                .find("names secret NOPE, which no \"secrets\" entry declares"),
            std::string::npos);
  ctx.environ.push_back("SHORT=abc");
  EXPECT_NE(compile_error("{" + kNet + R"J(, "secrets": [{"name": "S", "from": "env:SHORT", "hosts": ["api.github.com"]}]})J")
                .find("too short"),
            std::string::npos);
}

// An agent signed in with a key or with OAuth: each source optional, the
// absent ones dropped (and their secretFiles entry with them); none there at all
// refuses, naming each (the agent would sign in inside, its tokens real there).
TEST_F(SecretsPlan, OptionalSecretsOneAtLeast) {
  const std::string secrets = R"J(, "secrets": [
      {"name": "GITHUB_TOKEN", "from": "env:GITHUB_TOKEN", "hosts": ["api.github.com"], "optional": true},
      {"name": "OAUTH", "from": "file:~/.npmrc", "extract": "oauth=(\\w+)", "hosts": ["api.github.com"], "optional": true},
      {"name": "GONE", "from": "file:~/absent.json", "hosts": ["api.github.com"], "optional": true}],
    "secretFiles": [{"path": "~/absent.json", "secrets": ["GONE"], "optional": true}]})J";
  auto p = compiled("{" + kNet + secrets);
  ASSERT_EQ(p.secrets.size(), 1u);
  EXPECT_EQ(p.secrets[0].name, "GITHUB_TOKEN");
  ctx.environ.erase(std::remove_if(ctx.environ.begin(), ctx.environ.end(),
                                   [](const std::string& e) { return e.starts_with("GITHUB_TOKEN="); }),
                    ctx.environ.end());
  std::string e = compile_error("{" + kNet + secrets);
  EXPECT_NE(e.find("none is there"), std::string::npos) << e;
  EXPECT_NE(e.find("GITHUB_TOKEN: env:GITHUB_TOKEN is not set"), std::string::npos) << e;
  EXPECT_NE(e.find("OAUTH: its extract finds nothing in " + home + "/.npmrc"), std::string::npos) << e;
  EXPECT_NE(e.find("GONE: ~/absent.json does not exist"), std::string::npos) << e;
}

TEST_F(SecretsPlan, NoSecretsNoTrustBundle) {
  auto p = compiled("{" + kNet + "}");
  EXPECT_TRUE(p.secrets.empty());
  for (const auto& s : p.steps)  // (transparent egress's hosts file aside)
    if (s.kind == plan::StepKind::File) EXPECT_TRUE(s.why.starts_with("transparent egress")) << s.target;
  EXPECT_EQ(env_of(p, "SSL_CERT_FILE"), "<unset>");
  EXPECT_EQ(p.to_text().find("secrets (values"), std::string::npos);
}

// Request rules are judged inside TLS too (issue 18.3): a CA and its bundle
// without any secret; srt's git.safeDirectories and javaAgentJarPath inside.
TEST_F(SecretsPlan, RequestRulesTerminateTlsWithoutSecrets) {
  auto p = compiled(R"({"network": {"allowedDomains": ["api.github.com"],
      "rules": [{"host": "api.github.com", "readOnly": true}]},
      "git": {"safeDirectories": ["/srv/repo"]}, "javaAgentJarPath": "/opt/agent.jar"})");
  EXPECT_TRUE(p.secrets.empty());
  EXPECT_TRUE(p.terminate_for_rules);
  bool bundle = false;
  for (const auto& s : p.steps) bundle |= s.kind == plan::StepKind::File && s.trust_bundle;
  EXPECT_TRUE(bundle);
  EXPECT_EQ(env_of(p, "SSL_CERT_FILE"), p.trust_bundle_path);
  EXPECT_NE(p.to_text().find("tls: the proxy also terminates TLS for the hosts under network.rules"), std::string::npos);
  EXPECT_EQ(env_of(p, "GIT_CONFIG_COUNT"), "1");
  EXPECT_EQ(env_of(p, "GIT_CONFIG_KEY_0"), "safe.directory");
  EXPECT_EQ(env_of(p, "GIT_CONFIG_VALUE_0"), "/srv/repo");
  EXPECT_EQ(env_of(p, "JAVA_TOOL_OPTIONS"), "-javaagent:/opt/agent.jar");
  // A secret's host in tlsTerminate.excludeDomains could never get its value.
  EXPECT_NE(compile_error(R"({"network": {"allowedDomains": ["api.github.com"],
      "tlsTerminate": {"excludeDomains": ["*.github.com"]}},
      "secrets": [{"name": "GITHUB_TOKEN", "from": "env:GITHUB_TOKEN", "hosts": ["api.github.com"]}]})")
                .find("would never be terminated"),
            std::string::npos);
}

// The source is any file of up to 1 MiB and the pattern may come with the
// project: matching must stay linear and use no stack per character (std::regex
// overflowed an 8 MiB stack on "key=(.*)" over 100 000 characters, and took
// seconds on "(.*)Z" over 10 000).
TEST(SecretsExtract, LinearAndStacklessOnHostileInput) {
  const std::string mib(1 << 20, 'x');
  auto v = policy::extract_values("key=(.*)", "key=" + mib + "\nother=1", 2);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0], mib);
  EXPECT_TRUE(policy::extract_values("(.*)Z", mib, 2).empty());
  EXPECT_TRUE(policy::extract_values("(x*x*x*x*x*x*x*x*)Z", mib, 2).empty());
  EXPECT_EQ(policy::extract_values("(x)|[^\\n]*Z", mib, 2), std::vector<std::string>{"x"});  // a million matches
  EXPECT_TRUE(policy::extract_values("(a|a)*(b)", std::string(64, 'a'), 2).empty());
  // Successive matches, distinct values, empty matches skipped, "^" only at the start.
  EXPECT_EQ(policy::extract_values("k=(\\w+)", "k=aaaa k=aaaa k=bbbb k=cccc", 2), (std::vector<std::string>{"aaaa", "bbbb"}));
  EXPECT_EQ(policy::extract_values("k=(\\w+)", "k=aaaa k=aaaa", 2), std::vector<std::string>{"aaaa"});
  EXPECT_TRUE(policy::extract_values("(x*)", "abc", 2).empty());
  EXPECT_EQ(policy::extract_values("^k=(\\w+)", "k=aaaa\nk=bbbb", 2), std::vector<std::string>{"aaaa"});
  EXPECT_EQ(policy::extract_values("(?m)^k=(\\w+)", "k=aaaa\nk=bbbb", 2), (std::vector<std::string>{"aaaa", "bbbb"}));
  EXPECT_EQ(policy::extract_values("token:\\s*(\\S+)", "user: a\ntoken:   gho_abcd1234\n", 2),
            std::vector<std::string>{"gho_abcd1234"});
}

TEST(SecretsMask, LongestValueFirst) {
  std::vector<plan::Secret> s = {{"A", "exg_ph_A_1", "abcd", {}}, {"B", "exg_ph_B_2", "abcdefgh", {}}};
  EXPECT_EQ(plan::mask_values("x=abcdefgh y=abcd", s), "x=exg_ph_B_2 y=exg_ph_A_1");
}

}  // namespace
}  // namespace exg
