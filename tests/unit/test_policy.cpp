// Policy loading: schema, srt compatibility, and error positions.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "policy/policy.hpp"

namespace exg::policy {
namespace {

using std::chrono::milliseconds;

PResult<Policy> parse(std::string_view text) { return parse_policy(text, "p.json", "/base"); }

// The error message, or a failure when the text parsed.
std::string error_of(std::string_view text) {
  auto p = parse(text);
  if (p) {
    ADD_FAILURE() << "expected an error for: " << text;
    return "";
  }
  return p.error().message;
}

Policy ok(std::string_view text) {
  auto p = parse(text);
  EXPECT_TRUE(p.has_value()) << (p ? "" : p.error().message);
  return p ? *p : Policy{};
}

// ---- valid documents ----

TEST(Policy, ValidExGuardianPolicy) {
  Policy p = ok(
      "{\n"
      "  \"$schema\": \"https://example.invalid/exguardian.json\",\n"
      "  \"network\": {\"allowedDomains\": [\"github.com\", \"*.npmjs.org:443\", \"[::1]:8080\"],\n"
      "              \"deniedDomains\": [\"*\"]},\n"
      "  \"filesystem\": {\n"
      "    \"denyRead\": [\"~/.ssh\", \"secrets/**/*.pem\"],\n"
      "    \"allowWrite\": [\".\", {\"path\": \"weird[name]\", \"literal\": true}],\n"
      "    \"allowGitConfig\": false,\n"
      "    \"protect\": [\".husky\", \"tools/hooks\"]\n"
      "  },\n"
      "  \"resources\": {\"memory\": \"512M\", \"pids\": 256, \"cpus\": 1.5, \"timeout\": \"30s\"},\n"
      "  \"env\": {\"allow\": [\"PATH\", \"LANG\"], \"set\": {\"CI\": \"1\", \"EMPTY\": \"\"}},\n"
      "  \"layer\": \"container\",\n"
      "  \"audit\": {\"log\": \"audit.jsonl\"}\n"
      "}\n");
  ASSERT_EQ(p.network.allowed_domains.size(), 3u);
  EXPECT_EQ(p.network.allowed_domains[1].pattern, "*.npmjs.org:443");
  EXPECT_EQ(p.network.allowed_domains[1].where.str(), "p.json:3:48");
  ASSERT_EQ(p.network.denied_domains.size(), 1u);
  EXPECT_EQ(p.network.denied_domains[0].pattern, "*");
  ASSERT_EQ(p.filesystem.deny_read.size(), 2u);
  EXPECT_EQ(p.filesystem.deny_read[1].path, "secrets/**/*.pem");
  EXPECT_FALSE(p.filesystem.deny_read[1].literal);
  EXPECT_EQ(p.filesystem.deny_read[1].base_dir, "/base");
  EXPECT_EQ(p.filesystem.deny_read[1].where.str(), "p.json:6:28");
  ASSERT_EQ(p.filesystem.allow_write.size(), 2u);
  EXPECT_EQ(p.filesystem.allow_write[1].path, "weird[name]");
  EXPECT_TRUE(p.filesystem.allow_write[1].literal);
  EXPECT_EQ(p.filesystem.allow_write[1].where.str(), "p.json:7:25");
  EXPECT_EQ(p.filesystem.allow_git_config, false);
  EXPECT_EQ(p.filesystem.protect, (std::vector<std::string>{".husky", "tools/hooks"}));
  EXPECT_EQ(p.resources.memory_bytes, 512ull << 20);
  EXPECT_EQ(p.resources.pids, 256u);
  EXPECT_EQ(p.resources.cpus, 1.5);
  EXPECT_EQ(p.resources.timeout, milliseconds(30'000));
  EXPECT_EQ(p.env.allow, (std::vector<std::string>{"PATH", "LANG"}));
  using Set = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(p.env.set, (Set{{"CI", "1"}, {"EMPTY", ""}}));
  EXPECT_EQ(p.layer, "container");
  EXPECT_EQ(p.audit_log, "audit.jsonl");
  ASSERT_EQ(p.notes.size(), 1u);  // what srt's allowGitConfig did
  EXPECT_NE(p.notes[0].find("filesystem.allowGitConfig: .git/config files stay protected"), std::string::npos);
  EXPECT_TRUE(p.sources.empty());  // parse_policy does not know about files
}

TEST(Policy, EmptyObjectIsTheDefaultPolicy) {
  Policy p = ok("{}");
  EXPECT_TRUE(p.network.allowed_domains.empty());
  EXPECT_FALSE(p.layer.has_value());
  EXPECT_FALSE(p.resources.memory_bytes.has_value());
}

TEST(Policy, IntegerResources) {
  Policy p = ok(R"({"resources": {"memory": 1048576, "timeout": 90}})");
  EXPECT_EQ(p.resources.memory_bytes, 1048576u);
  EXPECT_EQ(p.resources.timeout, milliseconds(90'000));
}

TEST(Policy, SrtReadmeExample) {
  Policy p = ok(R"({
  "network": {
    "allowedDomains": ["github.com", "*.github.com", "lfs.github.com", "api.github.com", "npmjs.org", "*.npmjs.org"],
    "deniedDomains": ["malicious.com"]
  },
  "filesystem": {
    "denyRead": ["~/.ssh"],
    "allowWrite": [".", "src/", "test/", "/tmp"],
    "denyWrite": [".env", "config/production.json"]
  }
})");
  ASSERT_EQ(p.network.allowed_domains.size(), 6u);
  EXPECT_EQ(p.network.allowed_domains[5].pattern, "*.npmjs.org");
  ASSERT_EQ(p.network.denied_domains.size(), 1u);
  EXPECT_EQ(p.network.denied_domains[0].pattern, "malicious.com");
  EXPECT_EQ(p.network.denied_domains[0].where.str(), "p.json:4:23");
  ASSERT_EQ(p.filesystem.deny_read.size(), 1u);
  EXPECT_EQ(p.filesystem.deny_read[0].path, "~/.ssh");
  ASSERT_EQ(p.filesystem.allow_write.size(), 4u);
  EXPECT_EQ(p.filesystem.allow_write[3].path, "/tmp");
  ASSERT_EQ(p.filesystem.deny_write.size(), 2u);
  EXPECT_EQ(p.filesystem.deny_write[1].path, "config/production.json");
  EXPECT_TRUE(p.notes.empty());
}

TEST(Policy, SrtExampleWithLiteralAllowReadAndIgnoredKeys) {
  Policy p = ok(R"({
  "network": {"allowedDomains": ["localhost", "127.0.0.1:3000"], "deniedDomains": []},
  "filesystem": {
    "denyRead": ["~/"],
    "allowRead": ["~/projects", {"path": "~/odd*name", "literal": true}],
    "allowWrite": ["."],
    "denyWrite": [{"path": "./[x].env", "literal": true}]
  },
  "ignoreViolations": {"*": ["/usr/bin"], "git push": ["/usr/bin/nc"]},
  "enableWeakerNestedSandbox": false
})");
  ASSERT_EQ(p.filesystem.allow_read.size(), 2u);
  EXPECT_EQ(p.filesystem.allow_read[1].path, "~/odd*name");
  EXPECT_TRUE(p.filesystem.allow_read[1].literal);
  ASSERT_EQ(p.filesystem.deny_write.size(), 1u);
  EXPECT_TRUE(p.filesystem.deny_write[0].literal);
  ASSERT_EQ(p.notes.size(), 1u);
  EXPECT_EQ(p.notes[0],
            "p.json:9:3: ignoreViolations: nothing to silence: ExGuardian reports no per-path filesystem violations "
            "(a refused write fails with EROFS or EACCES inside, unlogged); refused syscalls and egress are still "
            "reported");
}

TEST(Policy, SrtKeysSayWhatTheyDid) {
  Policy p = ok(R"({"network": {"httpProxyPort": 8080,
 "deniedDomainReasons": {"x.com": "no"}, "strictAllowlist": true}, "allowPty": true,
 "mandatoryDenySearchDepth": 3})");
  ASSERT_EQ(p.notes.size(), 5u);
  EXPECT_EQ(p.notes[0],
            "p.json:1:14: network.httpProxyPort: HTTP and CONNECT requests, once ExGuardian's rules allow them, go on "
            "through the proxy at 127.0.0.1:8080 (CONNECT)");
  EXPECT_EQ(p.network.http_proxy_port, 8080);
  ASSERT_EQ(p.network.denied_domain_reasons.size(), 1u);
  EXPECT_EQ(p.network.denied_domain_reasons[0].second, "no");
  EXPECT_EQ(p.notes[4],
            "p.json:3:2: mandatoryDenySearchDepth: srt looks 3 levels deep for dangerous names; ExGuardian protects "
            "them at every depth, which covers it");
}

TEST(Policy, UnixSocketExceptions) {
  Policy p = ok(R"({"network": {"allowUnixSockets": ["/var/run/docker.sock", "~/agent.sock"],
 "allowAllUnixSockets": false}})");
  EXPECT_TRUE(p.notes.empty());
  ASSERT_EQ(p.network.allow_unix_sockets.size(), 2u);
  EXPECT_EQ(p.network.allow_unix_sockets[0].path, "/var/run/docker.sock");
  EXPECT_EQ(p.network.allow_all_unix_sockets, false);
  Policy top = ok(R"({"network": {"allowAllUnixSockets": true}})");
  merge(p, top);
  EXPECT_EQ(p.network.allow_all_unix_sockets, true);
  EXPECT_EQ(p.network.allow_unix_sockets.size(), 2u);
}

// ---- errors, each with its exact position ----

TEST(PolicyErrors, UnknownTopLevelKeySuggests) {
  EXPECT_EQ(error_of("{\n  \"netwrk\": {}\n}"), "p.json:2:3: unknown key \"netwrk\" (did you mean \"network\"?)");
}

TEST(PolicyErrors, UnknownNestedKeySuggests) {
  EXPECT_EQ(error_of(R"({"network": {"allowedDomain": []}})"),
            "p.json:1:14: unknown key \"allowedDomain\" in network (did you mean \"allowedDomains\"?)");
  EXPECT_EQ(error_of("{\"filesystem\": {\n\t\"denyread\": []}}"),
            "p.json:2:2: unknown key \"denyread\" in filesystem (did you mean \"denyRead\"?)");
}

TEST(PolicyErrors, UnknownKeyWithoutSuggestion) {
  EXPECT_EQ(error_of(R"({"zzzzzzzzz": 1})"), "p.json:1:2: unknown key \"zzzzzzzzz\"");
}

TEST(PolicyErrors, WrongType) {
  EXPECT_EQ(error_of(R"({"network": {"allowedDomains": "github.com"}})"),
            "p.json:1:32: network.allowedDomains: expected an array of strings, got string");
  EXPECT_EQ(error_of(R"({"network": {"allowedDomains": ["a.com", 7]}})"),
            "p.json:1:42: network.allowedDomains[1]: expected a string, got number");
  EXPECT_EQ(error_of(R"({"filesystem": {"allowGitConfig": "yes"}})"),
            "p.json:1:35: filesystem.allowGitConfig: expected true or false, got string");
  EXPECT_EQ(error_of("[]"), "p.json:1:1: expected an object at the top level, got array");
  EXPECT_EQ(error_of(R"({"resources": {"pids": 0}})"), "p.json:1:24: resources.pids: must be 1-4294967295, got 0");
  EXPECT_EQ(error_of(R"({"resources": {"cpus": "2"}})"),
            "p.json:1:24: resources.cpus: expected a number of CPUs, got string");
  EXPECT_EQ(error_of(R"({"allowPty": 1})"), "p.json:1:14: allowPty: expected true or false, got number");
  EXPECT_EQ(error_of(R"({"mandatoryDenySearchDepth": 11})"),
            "p.json:1:30: mandatoryDenySearchDepth: must be 1-10, got 11");
}

TEST(PolicyErrors, BadGlob) {
  EXPECT_EQ(error_of("{\n  \"filesystem\": {\n    \"denyWrite\": [\"ok\", \"a/[bc\"]\n  }\n}"),
            "p.json:3:25: filesystem.denyWrite[1]: unclosed '[' in \"a/[bc\"");
  EXPECT_EQ(error_of(R"({"filesystem": {"allowRead": ["a**b"]}})"),
            "p.json:1:31: filesystem.allowRead[0]: '**' must be a whole path component (like a/**/b) in \"a**b\"");
}

TEST(PolicyErrors, BadDomain) {
  EXPECT_EQ(error_of("{\"network\": {\n  \"allowedDomains\": [\"*.com\"]}}"),
            "p.json:2:22: network.allowedDomains[0]: wildcard \"*.com\" covers a whole top-level domain; "
            "name a domain under it");
  EXPECT_EQ(error_of(R"({"network": {"allowedDomains": ["https://x.com"]}})"),
            "p.json:1:33: network.allowedDomains[0]: domain \"https://x.com\" contains a URL scheme; "
            "write the host name only");
}

TEST(PolicyErrors, DuplicateKey) {
  EXPECT_EQ(error_of("{\"layer\": \"process\",\n \"layer\": \"gvisor\"}"), "p.json:2:2: duplicate key \"layer\"");
  EXPECT_EQ(error_of(R"({"env": {"set": {"A": "1", "A": "2"}}})"), "p.json:1:28: duplicate key \"A\"");
}

TEST(PolicyErrors, SyntaxErrorPosition) {
  EXPECT_EQ(error_of("{\n  \"layer\": \"process\",\n}"),
            "p.json:3:1: syntax error while parsing object key - unexpected '}'; expected string literal");
  EXPECT_EQ(error_of("{\"a\": tru}"),
            "p.json:1:10: syntax error while parsing value - invalid literal; last read: '\"a\": tru}'");
  EXPECT_EQ(error_of("{\"a\": 1"),
            "p.json:1:8: syntax error while parsing object - unexpected end of input; expected '}'");
}

TEST(PolicyErrors, ColumnsCountCharactersNotBytes) {
  EXPECT_EQ(error_of("{\"env\": {\"set\": {\"X\": \"\xc3\xa9\xc3\xa9\", \"Y\": 1}}}"),
            "p.json:1:34: env.set.Y: expected a string, got number");
}

TEST(PolicyErrors, DeepNestingIsRefused) {
  std::string deep = "{\"ignoreViolations\": " + std::string(100000, '[');
  EXPECT_EQ(error_of(deep), "p.json:1:85: nested deeper than 64 levels");
}

TEST(PolicyErrors, ByteOrderMarkIsNotAColumn) {
  EXPECT_EQ(error_of("\xEF\xBB\xBF{\"layer\": 1}"), "p.json:1:11: layer: expected a string, got number");
}

TEST(PolicyErrors, TrailingGarbage) {
  EXPECT_EQ(error_of("{} x"),
            "p.json:1:4: syntax error while parsing value - invalid literal; last read: '{} x'; expected end of input");
}

TEST(PolicyErrors, EmptyDocument) {
  EXPECT_EQ(error_of(""), "p.json: empty file (write {} for an empty policy)");
  EXPECT_EQ(error_of(" \n"), "p.json: empty file (write {} for an empty policy)");
}

TEST(PolicyErrors, BadSizeAndDuration) {
  EXPECT_EQ(error_of(R"({"resources": {"memory": "12X"}})"),
            "p.json:1:26: resources.memory: invalid size \"12X\": expected a positive size like 512M, 1.5G or a "
            "number of bytes (suffixes K, M, G, T are 1024-based)");
  EXPECT_EQ(error_of(R"({"resources": {"memory": -5}})"),
            "p.json:1:26: resources.memory: must be 1-9223372036854775807, got -5");
  EXPECT_EQ(error_of(R"({"resources": {"timeout": "0s"}})"),
            "p.json:1:27: resources.timeout: invalid duration \"0s\": must be at least 1ms");
  EXPECT_EQ(error_of(R"({"resources": {"timeout": 1.5}})"),
            "p.json:1:27: resources.timeout: expected a duration like \"30s\" or a number of seconds, got number");
}

TEST(PolicyErrors, LiteralObjectShape) {
  const std::string shape = "expected a path, or {\"path\": ..., \"literal\": true}";
  EXPECT_EQ(error_of(R"({"filesystem": {"denyRead": [{"path": "x", "literal": false}]}})"),
            "p.json:1:55: filesystem.denyRead[0].literal: " + shape);
  EXPECT_EQ(error_of(R"({"filesystem": {"denyRead": [{"path": "x", "literal": true, "glob": 1}]}})"),
            "p.json:1:61: filesystem.denyRead[0].glob: " + shape);
  EXPECT_EQ(error_of(R"({"filesystem": {"denyRead": [{"path": "", "literal": true}]}})"),
            "p.json:1:39: filesystem.denyRead[0].path: " + shape);
  EXPECT_EQ(error_of(R"({"filesystem": {"denyRead": [{"literal": true}]}})"),
            "p.json:1:30: filesystem.denyRead[0]: " + shape);
  EXPECT_EQ(error_of(R"({"filesystem": {"denyRead": [""]}})"), "p.json:1:30: filesystem.denyRead[0]: empty path");
}

TEST(PolicyErrors, RefusedKeys) {
  EXPECT_EQ(error_of(R"({"credentials": {"awsPairs": []}})"),
            "p.json:1:18: credentials.awsPairs: not supported: ExGuardian does not re-sign AWS SigV4 requests");
  EXPECT_EQ(error_of(R"({"network": {"mitmProxy": {}}})"),
            "p.json:1:27: network.mitmProxy: expected {\"socketPath\": PATH, \"domains\": [...]}");
  EXPECT_EQ(error_of(R"({"enableWeakerNestedSandbox": true})"),
            "p.json:1:31: enableWeakerNestedSandbox: ExGuardian does not weaken its sandbox to run nested; "
            "remove the key or set it to false");
  EXPECT_EQ(error_of(R"({"filesystem": {"disabled": true}})"),
            "p.json:1:29: filesystem.disabled: filesystem.disabled would turn the filesystem policy off; "
            "ExGuardian does not support that");
  EXPECT_TRUE(parse(R"({"filesystem": {"disabled": false}, "allowNestedUserNamespaces": false})").has_value());
}

TEST(PolicyLayer, AutoAndAMinimum) {
  auto p = parse(R"({"layer": "auto", "minLayer": "container"})");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->layer, "auto");
  EXPECT_EQ(p->min_layer, "container");
  // The minimum is a layer, never "auto".
  EXPECT_EQ(error_of(R"({"minLayer": "auto"})"),
            "p.json:1:14: minLayer: unknown layer \"auto\" (expected process, container, gvisor, microvm or landlock)");
}

TEST(PolicyErrors, OwnKeys) {
  EXPECT_EQ(error_of(R"({"layer": "vm"})"),
            "p.json:1:11: layer: unknown layer \"vm\" (expected process, container, gvisor, microvm, landlock or \"auto\": the strongest that runs here)");
  EXPECT_EQ(error_of(R"({"env": {"allow": ["1BAD"]}})"),
            "p.json:1:20: env.allow[0]: invalid environment variable name \"1BAD\" (expected letters, digits and _, "
            "not starting with a digit)");
  EXPECT_EQ(error_of(R"({"env": {"set": {"A=B": "x"}}})"),
            "p.json:1:18: env.set.A=B: invalid environment variable name \"A=B\" (expected letters, digits and _, "
            "not starting with a digit)");
  EXPECT_EQ(error_of(R"({"audit": {"log": ""}})"), "p.json:1:19: audit.log: must not be empty");
  EXPECT_EQ(error_of(R"({"filesystem": {"protect": ["../x"]}})"),
            "p.json:1:29: filesystem.protect[0]: \"../x\" must not contain \"..\"");
  EXPECT_EQ(error_of(R"({"filesystem": {"protect": ["*.sh"]}})"),
            "p.json:1:29: filesystem.protect[0]: \"*.sh\" must be a plain name or relative path, not a glob");
}

// ---- files ----

class PolicyFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/exg-policy-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  std::string dir_;
};

TEST_F(PolicyFile, LoadsWithBaseDirAndSource) {
  std::filesystem::create_directory(dir_ + "/sub");
  std::string path = write("sub/p.json", R"({"filesystem": {"allowWrite": ["build"]}})");
  auto p = load_policy_file(dir_ + "/sub/../sub/p.json");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->sources, std::vector<std::string>{dir_ + "/sub/../sub/p.json"});
  ASSERT_EQ(p->filesystem.allow_write.size(), 1u);
  EXPECT_EQ(p->filesystem.allow_write[0].base_dir, std::filesystem::canonical(dir_ + "/sub").string());
  EXPECT_EQ(p->filesystem.allow_write[0].where.str(), dir_ + "/sub/../sub/p.json:1:32");
}

TEST_F(PolicyFile, ErrorsNameTheFileAsGiven) {
  std::string path = write("bad.json", "{\n \"layer\": 3\n}");
  auto p = load_policy_file(path);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().message, path + ":2:11: layer: expected a string, got number");
}

TEST_F(PolicyFile, MissingUnreadableAndEmpty) {
  auto missing = load_policy_file(dir_ + "/nope.json");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message, dir_ + "/nope.json: cannot read: No such file or directory");
  auto is_dir = load_policy_file(dir_);
  ASSERT_FALSE(is_dir);
  EXPECT_EQ(is_dir.error().message, dir_ + ": cannot read: Is a directory");
  std::string empty = write("empty.json", "");
  auto e = load_policy_file(empty);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().message, empty + ": empty file (write {} for an empty policy)");
}

// ---- merge ----

TEST(PolicyMerge, AppendsListsAndTopWins) {
  Policy base = ok(R"({"network": {"allowedDomains": ["a.com"]}, "filesystem": {"protect": [".husky"]},
    "env": {"allow": ["PATH"], "set": {"A": "1"}}, "resources": {"memory": "1G", "pids": 10}, "layer": "process",
    "allowPty": true})");
  base.sources = {"base.json"};
  Policy top = ok(R"({"network": {"allowedDomains": ["b.com"]}, "filesystem": {"protect": [".tools"]},
    "env": {"allow": ["HOME"], "set": {"A": "2"}}, "resources": {"memory": "2G"}, "audit": {"log": "x"}})");
  top.sources = {"top.json"};
  merge(base, top);
  ASSERT_EQ(base.network.allowed_domains.size(), 2u);
  EXPECT_EQ(base.network.allowed_domains[0].pattern, "a.com");
  EXPECT_EQ(base.network.allowed_domains[1].pattern, "b.com");
  EXPECT_EQ(base.filesystem.protect, (std::vector<std::string>{".husky", ".tools"}));
  EXPECT_EQ(base.env.allow, (std::vector<std::string>{"PATH", "HOME"}));
  using Set = std::vector<std::pair<std::string, std::string>>;
  EXPECT_EQ(base.env.set, (Set{{"A", "1"}, {"A", "2"}}));  // later wins when applied
  EXPECT_EQ(base.resources.memory_bytes, 2ull << 30);
  EXPECT_EQ(base.resources.pids, 10u);  // unset in top: base stays
  EXPECT_EQ(base.layer, "process");
  EXPECT_EQ(base.audit_log, "x");
  EXPECT_EQ(base.notes.size(), 1u);
  EXPECT_EQ(base.sources, (std::vector<std::string>{"base.json", "top.json"}));
}

TEST(PolicyMerge, AllowedCidrsAreAppended) {
  Policy base = ok(R"({"network": {"allowedCidrs": ["10.0.0.0/8"]}})");
  Policy top = ok(R"({"network": {"allowedCidrs": ["fc00::/7", "192.0.2.7"]}})");
  merge(base, top);
  ASSERT_EQ(base.network.allowed_cidrs.size(), 3u);
  EXPECT_EQ(base.network.allowed_cidrs[0].pattern, "10.0.0.0/8");
  EXPECT_EQ(base.network.allowed_cidrs[1].pattern, "fc00::/7");
  EXPECT_EQ(base.network.allowed_cidrs[2].pattern, "192.0.2.7");
}

// ---- network.allowedCidrs ----

TEST(PolicyCidrs, ValidEntries) {
  Policy p = ok(R"({"network": {"allowedCidrs": ["10.0.0.0/8", "192.0.2.7", "0.0.0.0/0", "fc00::/7",
    "2001:db8::1", "[2001:db8::]/32", "::/0", "10.0.0.5/32"]}})");
  ASSERT_EQ(p.network.allowed_cidrs.size(), 8u);
  EXPECT_EQ(p.network.allowed_cidrs[0].pattern, "10.0.0.0/8");
  EXPECT_EQ(p.network.allowed_cidrs[0].where.str(), "p.json:1:31");
  EXPECT_EQ(p.network.allowed_cidrs[7].pattern, "10.0.0.5/32");
  EXPECT_TRUE(p.network.allowed_domains.empty());
}

TEST(PolicyCidrs, InvalidEntries) {
  EXPECT_EQ(error_of(R"({"network": {"allowedCidrs": ["10.0.0.0/33"]}})"),
            "p.json:1:31: network.allowedCidrs[0]: invalid prefix length in CIDR \"10.0.0.0/33\" (expected 0-32)");
  EXPECT_EQ(error_of(R"({"network": {"allowedCidrs": ["10.0.0.5/8"]}})"),
            "p.json:1:31: network.allowedCidrs[0]: CIDR \"10.0.0.5/8\" has bits set after the prefix length "
            "(did you mean the network address?)");
  EXPECT_EQ(error_of(R"({"network": {"allowedCidrs": ["10.1/16"]}})"),
            "p.json:1:31: network.allowedCidrs[0]: invalid address in CIDR \"10.1/16\" "
            "(expected like 10.0.0.0/8 or fc00::/7)");
  EXPECT_EQ(error_of(R"({"network": {"allowedCidrs": "10.0.0.0/8"}})"),
            "p.json:1:30: network.allowedCidrs: expected an array of strings, got string");
  for (const char* bad : {"", "example.com", "10.0.0.0/", "10.0.0.0/08", "10.0.0.0/-1", "fe80::1%eth0/128",
                          "fc00::/129", "10.0.0.0/8/8", "0x0a.0.0.0/8", "::1/x"}) {
    std::string doc = std::string(R"({"network": {"allowedCidrs": [")") + bad + "\"]}}";
    EXPECT_NE(error_of(doc).find("network.allowedCidrs[0]: "), std::string::npos) << bad;
  }
}

// ---- value parsers ----

TEST(PolicyValues, ParseSize) {
  struct Case {
    const char* in;
    std::uint64_t want;
  };
  for (auto [in, want] : {Case{"1", 1}, Case{"512", 512}, Case{"1K", 1024}, Case{"1k", 1024},
                          Case{"1KiB", 1024}, Case{"512M", 512ull << 20}, Case{"3m", 3ull << 20},
                          Case{"2MiB", 2ull << 20}, Case{"1G", 1ull << 30}, Case{"1.5G", 3ull << 29},
                          Case{"1GiB", 1ull << 30}, Case{"1g", 1ull << 30}, Case{"2T", 2ull << 40},
                          Case{"1TiB", 1ull << 40}, Case{"1.1K", 1126}, Case{"0.5K", 512},
                          Case{"18446744073709551615", UINT64_MAX}}) {
    auto got = parse_size(in);
    ASSERT_TRUE(got) << in << ": " << got.error().message;
    EXPECT_EQ(*got, want) << in;
  }
  for (const char* bad : {"", "0", "0K", "-1", "+1", " 1", "1 ", "1.5", "K", "1KB", "1X", "1.G", ".5G", "1e3",
                          "18446744073709551616", "16777216T", "0.0001K", "1Kib", "abc"}) {
    EXPECT_FALSE(parse_size(bad)) << bad;
  }
  EXPECT_EQ(parse_size("1X").error().message,
            "invalid size \"1X\": expected a positive size like 512M, 1.5G or a number of bytes (suffixes K, M, G, "
            "T are 1024-based)");
  EXPECT_EQ(parse_size("0").error().message, "invalid size \"0\": must be more than 0");
}

TEST(PolicyValues, ParseDuration) {
  struct Case {
    const char* in;
    std::int64_t ms;
  };
  for (auto [in, ms] : {Case{"500ms", 500}, Case{"30s", 30'000}, Case{"30", 30'000}, Case{"2m", 120'000},
                        Case{"1h", 3'600'000}, Case{"1.5s", 1'500}, Case{"0.5", 500}, Case{"1.5ms", 1},
                        Case{"1.25h", 4'500'000}}) {
    auto got = parse_duration(in);
    ASSERT_TRUE(got) << in << ": " << got.error().message;
    EXPECT_EQ(got->count(), ms) << in;
  }
  for (const char* bad : {"", "0", "0s", "0ms", "0.1ms", "-1s", "1d", "s", "1 s", "1.s", "1sec", "abc",
                          "99999999999999999999h"}) {
    EXPECT_FALSE(parse_duration(bad)) << bad;
  }
  EXPECT_EQ(parse_duration("1d").error().message,
            "invalid duration \"1d\": expected a positive duration like 500ms, 30s, 2m, 1h or a number of seconds");
}

TEST(PolicyValues, SourcePosStr) {
  EXPECT_EQ((SourcePos{"a.json", 3, 7}).str(), "a.json:3:7");
  EXPECT_EQ((SourcePos{"<cli>", 0, 0}).str(), "<cli>");
}

TEST(PolicyValues, DomainPatterns) {
  for (const char* good : {"example.com", "EXAMPLE.com", "*.example.com", "a.b:443", "localhost", "my_host.local",
                           "127.0.0.1", "10.0.0.1:8080", "[::1]", "[2001:db8::1]:443", "xn--bcher-kva.example"}) {
    EXPECT_EQ(check_domain_pattern(good, false), std::nullopt) << good;
  }
  for (const char* bad : {"", "*", "*.com", "http://x.com", "x.com/path", "x .com", "x..com", ".x.com", "x.com.",
                          "a.*.com", "*x.com", "x.com:0", "x.com:65536", "x.com:", "x.com:http", "x%2ecom",
                          "::1", "[::1", "[zz::1]", "127.1", "256.0.0.1", "*.1.2.3", "a!.com", "x.com\r\nHost: y"}) {
    EXPECT_NE(check_domain_pattern(bad, false), std::nullopt) << bad;
  }
  EXPECT_NE(check_domain_pattern(std::string_view("a\0b.com", 7), false), std::nullopt);
  EXPECT_NE(check_domain_pattern(std::string(64, 'a') + ".com", false), std::nullopt);
  EXPECT_EQ(check_domain_pattern(std::string(63, 'a') + ".com", false), std::nullopt);
  std::string long_name;
  for (int i = 0; i < 4; ++i) long_name += std::string(63, 'a') + ".";
  long_name += "com";  // 259 characters
  EXPECT_NE(check_domain_pattern(long_name, false), std::nullopt);
  // deniedDomains may be broad.
  EXPECT_EQ(check_domain_pattern("*", true), std::nullopt);
  EXPECT_EQ(check_domain_pattern("*.com", true), std::nullopt);
  EXPECT_EQ(check_domain_pattern("*", false),
            "a bare \"*\" in allowedDomains would allow every host; list the domains instead");
}

TEST(PolicyValues, Globs) {
  for (const char* good : {"a", "~/.ssh", "src/**/*.pem", "**", "**/x", "a/**", "file?.txt", "[abc]", "[a-z]x",
                           "[!x]", "a\\*b", "./x", "/etc/passwd"}) {
    EXPECT_EQ(check_glob(good), std::nullopt) << good;
  }
  for (const char* bad : {"", "a**b", "a/**b", "***", "x**/y", "[abc", "[]", "[!]", "a\\", "[z-a]", "[a/b]"}) {
    EXPECT_NE(check_glob(bad), std::nullopt) << bad;
  }
  EXPECT_EQ(check_glob("[]"), "empty '[]' in \"[]\" matches nothing");
  EXPECT_EQ(check_glob("a\\"), "trailing backslash in \"a\\\"");
}

TEST(PolicyValues, EnvNames) {
  EXPECT_EQ(check_env_name("PATH"), std::nullopt);
  EXPECT_EQ(check_env_name("_x1"), std::nullopt);
  EXPECT_NE(check_env_name(""), std::nullopt);
  EXPECT_NE(check_env_name("1A"), std::nullopt);
  EXPECT_NE(check_env_name("A-B"), std::nullopt);
  EXPECT_NE(check_env_name("A=B"), std::nullopt);
}

TEST(Policy, NetworkResolver) {
  EXPECT_EQ(ok(R"({"network": {"resolver": true}})").network.resolver, std::optional<bool>(true));
  EXPECT_EQ(ok(R"({"network": {}})").network.resolver, std::nullopt);
  EXPECT_NE(error_of(R"({"network": {"resolver": "yes"}})").find("network.resolver: expected true or false"),
            std::string::npos);
  Policy base = ok(R"({"network": {"resolver": true}})");
  merge(base, ok(R"({"network": {"resolver": false}})"));
  EXPECT_EQ(base.network.resolver, std::optional<bool>(false));
}

}  // namespace
}  // namespace exg::policy
