// exguardian serve's parsers: the tenants and templates files, key hashing and
// authentication, Connect-RPC framing and protobuf-JSON helpers; the root
// refusal per layer, pause's freezer check, the JSON-lines log.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "serve/connect_rpc.hpp"
#include "serve/control_requests.hpp"
#include "serve/kept_pauses.hpp"
#include "serve/file_signature.hpp"
#include "serve/log.hpp"
#include "serve/sandbox_registry.hpp"
#include "serve/service.hpp"
#include "serve/templates.hpp"
#include "serve/tenants.hpp"
#include "util/json_parse.hpp"

using namespace exg::serve;
using exg::Result;

namespace {
std::string tenants_with(const std::string& key) {
  return R"({"tenants":[{"id":"acme","keys":[")" + key_entry(key) + R"("],"quota":{"sandboxes":3,"memoryMB":2048}}]})";
}
}  // namespace

TEST(ServeTenants, AuthenticatesOnlyTheHashedKey) {
  auto t = Tenants::parse(tenants_with("s3cret"), "t.json");
  ASSERT_TRUE(t) << t.error().str();
  ASSERT_NE(t->authenticate("s3cret"), nullptr);
  EXPECT_EQ(t->authenticate("s3cret")->id, "acme");
  EXPECT_EQ(t->authenticate("s3cre"), nullptr);
  EXPECT_EQ(t->authenticate(""), nullptr);
  EXPECT_EQ(t->authenticate(key_entry("s3cret")), nullptr);  // the hash itself is no key
  EXPECT_EQ(t->all()[0].quota.max_sandboxes, 3u);
  EXPECT_EQ(key_entry("abc"), "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(ServeTenants, BadFilesNameWhatIsWrong) {
  auto err = [](const std::string& text) {
    auto t = Tenants::parse(text, "t.json");
    return t ? std::string("accepted") : t.error().str();
  };
  EXPECT_NE(err("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(err(R"({"tenant":[]})").find("unknown key"), std::string::npos);
  EXPECT_NE(err(R"({"tenants":[{"id":"a","keys":["plain-key"]}]})").find("tenants[0].keys"), std::string::npos);
  EXPECT_NE(err(R"({"tenants":[{"id":"a b","keys":[")" + key_entry("k") + R"("]}]})").find("tenants[0].id"), std::string::npos);
  EXPECT_NE(err(R"({"tenants":[{"id":"a","keys":[")" + key_entry("k") + R"("],"quota":{"sandboxes":-1}}]})").find("quota.sandboxes"),
            std::string::npos);
  std::string k = key_entry("k");
  EXPECT_NE(err(R"({"tenants":[{"id":"a","keys":[")" + k + R"("]},{"id":"b","keys":[")" + k + R"("]}]})").find("twice"), std::string::npos);
  EXPECT_NE(err(R"({"tenants":[{"id":"a","keys":[")" + k + R"("]},{"id":"a","keys":[")" + key_entry("j") + R"("]}]})").find("duplicate"),
            std::string::npos);
}

TEST(ServeTenants, SecretsCheckedByThePolicyLoader) {
  std::string k = key_entry("k");
  auto with = [&](const std::string& secrets) {
    return R"({"tenants":[{"id":"a","keys":[")" + k + R"("],"secrets":)" + secrets + "}]}";
  };
  auto t = Tenants::parse(with(R"([{"name":"GH","from":"file:/etc/exg/gh","hosts":["api.github.com","*.x.test"]},
                                   {"name":"NPM","from":"env:NPM_TOKEN","hosts":["registry.npmjs.org"]}])"), "t.json");
  ASSERT_TRUE(t) << t.error().str();
  EXPECT_EQ(t->all()[0].secrets.size(), 2u);
  EXPECT_EQ(t->all()[0].secret_hosts, (std::vector<std::string>{"api.github.com", "*.x.test", "registry.npmjs.org"}));
  auto err = [&](const std::string& secrets) {
    auto r = Tenants::parse(with(secrets), "t.json");
    return r ? std::string("accepted") : r.error().str();
  };
  // A relative file would be read relative to wherever the supervisor runs: refused.
  EXPECT_NE(err(R"([{"name":"GH","from":"file:gh","hosts":["a.test"]}])").find("must be an absolute path"), std::string::npos);
  // What the policy loader refuses in a policy's secrets, refused here, naming the tenant.
  EXPECT_NE(err(R"([{"name":"GH","from":"env:GH"}])").find("tenants[0].secrets"), std::string::npos);
  EXPECT_NE(err(R"([{"name":"GH","from":"env:GH","hosts":["a.test"],"bogus":1}])").find("bogus"), std::string::npos);
  EXPECT_NE(err(R"({"name":"GH"})").find("expected an array"), std::string::npos);
  EXPECT_TRUE(Tenants::parse(with("[]"), "t.json"));
}

// @e2b/code-interpreter's default template is built in; a file may name its own (still the
// code interpreter unless it says otherwise) or give any template the interpreter.
TEST(ServeTemplates, CodeInterpreterBuiltInAndNamed) {
  Templates none;
  ASSERT_NE(none.find("code-interpreter-v1"), nullptr);
  EXPECT_TRUE(none.find("code-interpreter-v1")->code_interpreter);
  EXPECT_FALSE(none.find("base")->code_interpreter);
  auto t = Templates::parse(R"({"templates":{"code-interpreter-v1":{"layer":"container"},"py":{"codeInterpreter":true},)"
                            R"("plain":{},"off":{"codeInterpreter":false}}})", "x.json");
  ASSERT_TRUE(t) << t.error().str();
  EXPECT_TRUE(t->find("code-interpreter-v1")->code_interpreter);
  EXPECT_EQ(t->find("code-interpreter-v1")->layer, "container");
  EXPECT_TRUE(t->find("py")->code_interpreter);
  EXPECT_FALSE(t->find("plain")->code_interpreter);
  EXPECT_FALSE(t->find("off")->code_interpreter);
  auto bad = Templates::parse(R"({"templates":{"py":{"codeInterpreter":"yes"}}})", "x.json");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().str().find("templates.py.codeInterpreter"), std::string::npos);
}

TEST(ServeTemplates, BaseBuiltInAndFileChecked) {
  Templates none;
  ASSERT_NE(none.find("base"), nullptr);
  EXPECT_EQ(none.find("base")->layer, "process");
  auto t = Templates::parse(R"({"templates":{"c":{"layer":"container","memoryMB":256,"cpus":0.5}}})", "x.json");
  ASSERT_TRUE(t) << t.error().str();
  EXPECT_EQ(t->find("c")->layer, "container");
  EXPECT_EQ(t->find("c")->memory_mb, 256u);
  EXPECT_NE(t->find("base"), nullptr);
  auto bad = Templates::parse(R"({"templates":{"c":{"layer":"vm"}}})", "x.json");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().str().find("templates.c.layer"), std::string::npos);
  // landlock: sessions run there too (the agent a child subreaper: docs/layers.md).
  auto ll = Templates::parse(R"({"templates":{"l":{"layer":"landlock"}}})", "x.json");
  ASSERT_TRUE(ll) << ll.error().str();
  EXPECT_EQ(ll->find("l")->layer, "landlock");
  // root: only on gVisor (its own kernel); the message says why, naming the layer.
  auto root_proc = Templates::parse(R"({"templates":{"c":{"allowRoot":true}}})", "x.json");
  ASSERT_FALSE(root_proc);
  EXPECT_NE(root_proc.error().str().find("templates.c.allowRoot"), std::string::npos);
  EXPECT_NE(root_proc.error().str().find("process layer runs commands on the host's kernel"), std::string::npos);
  EXPECT_FALSE(Templates::parse(R"({"templates":{"c":{"layer":"container","allowRoot":true}}})", "x.json"));
  auto root_gv = Templates::parse(R"({"templates":{"g":{"layer":"gvisor","allowRoot":true}}})", "x.json");
  ASSERT_TRUE(root_gv) << root_gv.error().str();
  EXPECT_TRUE(root_gv->find("g")->allow_root);
  EXPECT_FALSE(Templates::parse(R"({"templates":{"c":{"rootfs":"/r"}}})", "x.json"));  // process layer: no rootfs
  // microvm: served, root with allowRoot (the guest's kernel), no rootfs (the guest image is its root).
  auto vm = Templates::parse(R"({"templates":{"v":{"layer":"microvm"},"r":{"layer":"microvm","allowRoot":true}}})", "x.json");
  ASSERT_TRUE(vm) << vm.error().str();
  EXPECT_EQ(vm->find("v")->layer, "microvm");
  EXPECT_TRUE(vm->find("r")->allow_root);
  auto vm_rootfs = Templates::parse(R"({"templates":{"v":{"layer":"microvm","rootfs":"/r"}}})", "x.json");
  ASSERT_FALSE(vm_rootfs);
  EXPECT_NE(vm_rootfs.error().str().find("templates.v.rootfs"), std::string::npos) << vm_rootfs.error().str();
}

// load() reads each template's policy: one that does not load, or that lets
// host Unix sockets through on a layer that cannot carry one, stops the
// server at its start, naming the template.
TEST(ServeTemplates, LoadChecksEachTemplatesPolicy) {
  char tmpl[] = "/tmp/exg-templates-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::filesystem::path d = tmpl;
  std::ofstream(d / "uds.json") << R"({"network": {"allowAllUnixSockets": true}})";
  std::ofstream(d / "one.json") << R"({"network": {"allowUnixSockets": ["/run/x.sock"]}})";
  std::ofstream(d / "bad.json") << R"({"netwrk": {}})";
  auto load = [&](const std::string& layer, const std::string& pol) {
    std::ofstream(d / "t.json") << R"({"templates": {"u": {"layer": ")" + layer + R"(", "policy": ")" +
                                       (d / pol).string() + R"("}}})";
    return Templates::load((d / "t.json").string());
  };
  for (const char* layer : {"gvisor", "microvm"})
    for (const char* pol : {"uds.json", "one.json"}) {
      auto t = load(layer, pol);
      ASSERT_FALSE(t) << layer << " " << pol;
      EXPECT_NE(t.error().str().find("templates.u.policy: lets host Unix sockets through"), std::string::npos)
          << t.error().str();
      EXPECT_NE(t.error().str().find(std::string("the ") + layer + " layer cannot carry"), std::string::npos);
    }
  for (const char* layer : {"process", "container"}) EXPECT_TRUE(load(layer, "uds.json")) << layer;
  auto bad = load("process", "bad.json");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().str().find("templates.u.policy"), std::string::npos) << bad.error().str();
  EXPECT_NE(bad.error().str().find("netwrk"), std::string::npos) << bad.error().str();
  auto missing = load("process", "nope.json");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().str().find("templates.u.policy"), std::string::npos) << missing.error().str();
  std::error_code ec;
  std::filesystem::remove_all(d, ec);
}

TEST(ServeUsers, RootRefusedPerLayerWithTheReason) {
  Request req{http::verb::post, "/process.Process/Start", 11};
  Sandbox sb;
  sb.tmpl.name = "t";
  EXPECT_FALSE(Service::user_error(req, "user", sb));
  for (const char* layer : {"process", "container"}) {
    sb.tmpl.layer = layer;
    auto e = Service::user_error(req, "root", sb);
    ASSERT_TRUE(e);
    EXPECT_NE(e->find(std::string("the ") + layer + " layer runs the sandbox's commands on the host's kernel"), std::string::npos) << *e;
  }
  for (const char* layer : {"gvisor", "microvm"}) {  // a kernel of their own
    sb.tmpl.layer = layer;
    auto g = Service::user_error(req, "root", sb);
    ASSERT_TRUE(g);
    EXPECT_EQ(g->find("host's kernel"), std::string::npos) << *g;
    EXPECT_NE(g->find("allowRoot"), std::string::npos) << *g;
    EXPECT_NE(g->find(std::string("The ") + layer + " layer"), std::string::npos) << *g;
  }
  sb.tmpl.allow_root = true;
  EXPECT_FALSE(Service::user_error(req, "root", sb));
  EXPECT_TRUE(Service::user_error(req, "admin", sb));
}

// The freezer's answer decides: a cgroup whose events never say frozen makes
// pause fail, thawed again, the sandbox's state untouched. (A kernel cgroup
// that stays FREEZING cannot be made on demand; the files stand in for it.)
// The wait runs on the event loop: other handlers run while a pause waits,
// and the pause answers once the freezer reads frozen, not before.
TEST(ServeRegistry, PauseWaitsForTheFreezerWithoutHoldingTheLoop) {
  char tmpl[] = "/tmp/exg-freeze-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  auto put = [](const std::string& p, const std::string& s) { std::ofstream(p) << s; };
  auto get = [](const std::string& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  put(dir + "/cgroup.freeze", "0\n");
  put(dir + "/cgroup.events", "populated 1\nfrozen 0\n");
  boost::asio::io_context io;
  RegistryOptions opt{dir, "/bin/false"};
  opt.freeze_wait = std::chrono::milliseconds(150);
  Registry reg(io, opt);
  // Handlers one at a time until the pause has answered; a pause that never
  // answers fails the test rather than hanging it.
  auto run_until = [&io](const std::optional<Result<void>>& answer) {
    io.restart();  // the loop stops itself whenever it runs out of work
    while (!answer && io.run_one_for(std::chrono::seconds(10)) > 0) {
    }
  };
  auto sb = std::make_shared<Sandbox>();
  sb->id = "freezetest0000000000";
  sb->state = Sandbox::State::Running;
  sb->cgroup_dirs = {dir};
  sb->expiry = std::make_unique<boost::asio::steady_timer>(io);  // (a pause re-arms it: the pause's keep time)
  // Never frozen: the pause fails after freeze_wait, thawed again.
  std::optional<Result<void>> failed;
  reg.pause(sb, [&](Result<void> r) { failed = std::move(r); });
  EXPECT_FALSE(failed) << "answered before the freezer was read back";
  EXPECT_TRUE(sb->pausing);
  EXPECT_EQ(get(dir + "/cgroup.freeze"), "1");
  run_until(failed);
  ASSERT_TRUE(failed);
  ASSERT_FALSE(*failed);
  EXPECT_NE(failed->error().str().find("did not read frozen 1"), std::string::npos) << failed->error().str();
  EXPECT_FALSE(sb->pausing);
  EXPECT_EQ(sb->state, Sandbox::State::Running);
  EXPECT_EQ(get(dir + "/cgroup.freeze"), "0");  // thawed again

  // The kernel says frozen only later: meanwhile another handler runs, then the pause holds.
  std::optional<Result<void>> held;
  bool other_ran_first = false;
  reg.pause(sb, [&](Result<void> r) { held = std::move(r); });
  boost::asio::steady_timer later(io, std::chrono::milliseconds(40));
  later.async_wait([&](boost::system::error_code) {
    other_ran_first = !held;
    put(dir + "/cgroup.events", "populated 1\nfrozen 1\n");
  });
  run_until(held);
  EXPECT_TRUE(other_ran_first);
  ASSERT_TRUE(held);
  ASSERT_TRUE(*held) << held->error().str();
  EXPECT_EQ(sb->state, Sandbox::State::Paused);
  EXPECT_EQ(get(dir + "/cgroup.freeze"), "1");
  // Its timeout stopped at the pause: it is now kept --pause-ttl-hours (30 days by default).
  EXPECT_GT(sb->end_at, std::chrono::system_clock::now() + std::chrono::hours(24 * 29));
  ASSERT_TRUE(reg.resume(sb));
  // The resume starts the create's timeout again.
  EXPECT_LT(sb->end_at, std::chrono::system_clock::now() + sb->timeout + std::chrono::seconds(1));
  EXPECT_EQ(sb->state, Sandbox::State::Running);
  EXPECT_EQ(get(dir + "/cgroup.freeze"), "0");

  // Killed while the pause waits: the pause fails, the freezer is thawed.
  put(dir + "/cgroup.events", "populated 1\nfrozen 0\n");
  std::optional<Result<void>> cut;
  reg.pause(sb, [&](Result<void> r) { cut = std::move(r); });
  sb->state = Sandbox::State::Ending;  // what kill() and the supervisor's end do
  run_until(cut);
  ASSERT_TRUE(cut);
  ASSERT_FALSE(*cut);
  EXPECT_NE(cut->error().str().find("ended while it was being paused"), std::string::npos) << cut->error().str();
  sb->state = Sandbox::State::Running;

  sb->cgroup_dirs.clear();
  std::optional<Result<void>> none;
  reg.pause(sb, [&](Result<void> r) { none = std::move(r); });
  ASSERT_TRUE(none);  // no freezer at all: an error at once
  EXPECT_FALSE(*none);
  std::filesystem::remove_all(dir);
}

TEST(ServeLog, OneParseableObjectPerLine) {
  std::string out;
  append_json_escaped(out, "a\"b\\c\nd\x01\xff\xc3\xa9");
  EXPECT_EQ(out, "a\\\"b\\\\c\\nd\\u0001\\ufffd\xc3\xa9");
  char tmpl[] = "/tmp/exg-log-XXXXXX";
  int fd = ::mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ::close(fd);
  {
    Log log;
    ASSERT_TRUE(log.open(tmpl));
    {
      auto outer = log.info("create");
      outer.str("tenant", "acme").num("n", -3);
      log.warn("nested").str("msg", "line\nbreak");  // written while `outer` is open: its own buffer
      outer.real("ms", 1.5).flag("warm", true);
    }
  }
  std::ifstream in(tmpl);
  std::vector<nlohmann::json> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(nlohmann::json::parse(l));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["event"], "nested");
  EXPECT_EQ(lines[0]["msg"], "line\nbreak");
  EXPECT_EQ(lines[1]["event"], "create");
  EXPECT_EQ(lines[1]["level"], "info");
  EXPECT_EQ(lines[1]["tenant"], "acme");
  EXPECT_EQ(lines[1]["n"], -3);
  EXPECT_EQ(lines[1]["warm"], true);
  EXPECT_DOUBLE_EQ(lines[1]["ms"].get<double>(), 1.5);
  EXPECT_TRUE(lines[1]["time"].get<std::string>().ends_with("Z"));
  ::unlink(tmpl);
}

TEST(ServeConnect, EnvelopesAndMessages) {
  std::string e = rpc::envelope("{}", 2);
  ASSERT_EQ(e.size(), 7u);
  EXPECT_EQ(e[0], 2);
  EXPECT_EQ(e.substr(1, 4), std::string("\0\0\0\2", 4));
  Request req{http::verb::post, "/process.Process/Start", 11};
  req.set(http::field::content_type, "application/connect+json");
  req.body() = rpc::envelope(R"({"process":{"cmd":"x"}})", 0);
  rpc::RpcError err{};
  auto m = rpc::read_message(req, &err);
  ASSERT_TRUE(m);
  EXPECT_EQ((*m)["process"]["cmd"], "x");
  req.body()[4] = 99;  // a length that is not the body's
  EXPECT_FALSE(rpc::read_message(req, &err));
  EXPECT_EQ(err.code, rpc::Code::InvalidArgument);
  req.body() = "abc";
  EXPECT_FALSE(rpc::read_message(req, &err));
  Request unary{http::verb::post, "/process.Process/List", 11};
  unary.set(http::field::content_type, "application/json");
  unary.body() = "[1]";
  EXPECT_FALSE(rpc::read_message(unary, &err));
  EXPECT_EQ(rpc::http_status(rpc::Code::NotFound), http::status::not_found);
  EXPECT_EQ(std::string(rpc::code_name(rpc::code_of_errno("ENOENT"))), "not_found");
}

TEST(ServeConnect, Base64AndTimes) {
  for (const std::string& s : std::vector<std::string>{"", "a", "ab", "abc", "abcd", std::string("\0\xff\x10", 3)}) {
    auto back = rpc::base64_decode(rpc::base64_encode(s));
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, s);
  }
  EXPECT_EQ(*rpc::base64_decode("YWI"), "ab");  // padding optional
  EXPECT_EQ(*rpc::base64_decode("-_8"), std::string("\xfb\xff", 2));  // URL alphabet
  EXPECT_FALSE(rpc::base64_decode("a$b"));
  EXPECT_EQ(rpc::rfc3339(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(rpc::rfc3339(1, 5), "1970-01-01T00:00:01.000000005Z");
}

TEST(ServeQuery, ParamsDecoded) {
  EXPECT_EQ(*query_param("path=a%2Fb&username=user", "path"), "a/b");
  EXPECT_EQ(*query_param("path=a%2Fb&username=user", "username"), "user");
  EXPECT_FALSE(query_param("path=x", "username"));
  EXPECT_EQ(url_decode("a+b%20c"), "a b c");
}

namespace {
Templates control_templates() {
  auto t = Templates::parse(R"({"templates":{"web":{"allowDomains":["*.Example.org"]},"pinned":{"policy":"/etc/p.json"}}})", "t.json");
  return *t;
}
std::string create_error(const std::string& body) {
  auto cr = parse_create_body(body, control_templates(), 3600);
  return cr ? std::string("accepted") : cr.error().message;
}
}  // namespace

TEST(ServeControlRequests, CreateBodyAsTheSdkSendsIt) {
  auto cr = parse_create_body(R"({"templateID":"web","metadata":{"suite":"t"},"envVars":{"A_1":"x"},"timeout":60,"secure":true,
      "network":{"allowOut":["api.test"],"denyOut":["0.0.0.0/0","10.0.0.0/8"],
                 "rules":{"API.example.org":[{"transform":{"headers":{"X-Key":"abcd"}}},{"transform":{"headers":{"x-key":"efgh"}}}]}}})",
                              control_templates(), 3600);
  ASSERT_TRUE(cr) << cr.error().message;
  EXPECT_EQ(cr->tmpl.name, "web");
  EXPECT_EQ(cr->timeout.count(), 60);
  EXPECT_EQ(cr->metadata["suite"], "t");
  EXPECT_EQ(cr->env_vars.at("A_1"), "x");
  EXPECT_EQ(cr->deny_out, std::vector<std::string>{"10.0.0.0/8"});  // 0.0.0.0/0 is the default already
  ASSERT_EQ(cr->header_rules.size(), 1u);                             // a later rule replaces the header (any case)
  EXPECT_EQ(cr->header_rules[0].host, "api.example.org");
  EXPECT_EQ(cr->header_rules[0].value, "efgh");
  auto none = parse_create_body(R"({"templateID":"nope"})", control_templates(), 3600);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().status, http::status::not_found);
}

TEST(ServeControlRequests, BadCreateBodiesNameTheField) {
  EXPECT_EQ(create_error(""), "the request has no JSON body");
  EXPECT_EQ(create_error("[]"), "the body is not a JSON object");
  EXPECT_NE(create_error(R"({"envVars":{"9A":"x"}})").find("envVars: 9A"), std::string::npos);
  // A NUL would cut the variable short in the C environment.
  EXPECT_EQ(create_error(R"({"envVars":{"A":"x\u0000y"}})"), "envVars.A: the value holds a NUL character");
  // A number past int64 is over the limit, not "-1: must be at least 1 second".
  EXPECT_EQ(create_error(R"({"timeout":18446744073709551615})"), "timeout: 18446744073709551615: this tenant's limit is 3600 seconds");
  EXPECT_NE(create_error(R"({"timeout":0})").find("at least 1 second"), std::string::npos);
  EXPECT_NE(create_error(R"({"network":{"allowOut":["10.0.0.0/8"]}})").find("address ranges"), std::string::npos);
  EXPECT_NE(create_error(R"({"network":{"rules":{"api.test":[]}}})").find("not in network.allowOut"), std::string::npos);
  // fuzz/create_request's reachability check: ".example.org" passed as a host under "*.example.org".
  for (const char* host : {".example.org", "a..example.org", "a.example.org.", "*..example.org"})
    EXPECT_NE(create_error(std::string(R"({"templateID":"web","network":{"rules":{")") + host +
                           R"(":[{"transform":{"headers":{"X-A":"abcd"}}}]}}})")
                  .find("not a host name"),
              std::string::npos)
        << host;
  EXPECT_NE(create_error(R"({"templateID":"web","network":{"rules":{"a.example.org":[{"transform":{"headers":{"Host":"abcd"}}}]}}})")
                .find("the proxy sets or removes this header"),
            std::string::npos);
  EXPECT_NE(create_error(R"({"templateID":"pinned","network":{"allowOut":["a.test"],"rules":{"a.test":[{"transform":{"headers":{"X-A":"abcd"}}}]}}})")
                .find("has its own policy file"),
            std::string::npos);
}

// E2B types network.maskRequestHost a string (the Host of requests to the sandbox's ports).
TEST(ServeControlRequests, MaskRequestHostIsAString) {
  auto cr = parse_create_body(R"({"network":{"maskRequestHost":"custom.example.com:${PORT}"}})", control_templates(), 3600);
  ASSERT_TRUE(cr) << cr.error().message;
  EXPECT_EQ(cr->mask_request_host, "custom.example.com:${PORT}");
  EXPECT_NE(create_error(R"({"network":{"maskRequestHost":true}})").find("network.maskRequestHost: expected a string"), std::string::npos);
  EXPECT_NE(create_error(R"({"network":{"maskRequestHost":""}})").find("network.maskRequestHost"), std::string::npos);
  EXPECT_NE(create_error(R"({"network":{"maskRequestHost":"a\r\nX-Evil: 1"}})").find("network.maskRequestHost"), std::string::npos);
}

// E2B's lifecycle as the SDK sends it (lifecycle.onTimeout / autoResume -> autoPause,
// autoPauseMemory, autoResume {enabled}), and E2B's rules on combining them.
TEST(ServeControlRequests, LifecycleAsTheSdkSendsIt) {
  auto cr = parse_create_body(R"({"autoPause":true,"autoResume":{"enabled":true}})", control_templates(), 3600);
  ASSERT_TRUE(cr) << cr.error().message;
  EXPECT_TRUE(cr->auto_pause);
  EXPECT_TRUE(cr->auto_resume);
  EXPECT_TRUE(cr->auto_pause_memory);
  cr = parse_create_body(R"({"autoPause":true,"autoPauseMemory":false})", control_templates(), 3600);
  ASSERT_TRUE(cr) << cr.error().message;
  EXPECT_TRUE(cr->auto_pause);
  EXPECT_FALSE(cr->auto_resume);
  EXPECT_FALSE(cr->auto_pause_memory);  // the timeout's pause: filesystem only
  cr = parse_create_body(R"({"autoPause":false})", control_templates(), 3600);
  ASSERT_TRUE(cr);
  EXPECT_FALSE(cr->auto_pause);
  EXPECT_NE(create_error(R"({"autoResume":{"enabled":true}})").find("autoResume: enabled only with autoPause"), std::string::npos);
  EXPECT_NE(create_error(R"({"autoPause":true,"autoPauseMemory":false,"autoResume":{"enabled":true}})").find("autoPauseMemory false"),
            std::string::npos);
  EXPECT_NE(create_error(R"({"autoResume":true})").find("autoResume: expected an object"), std::string::npos);
  EXPECT_NE(create_error(R"({"autoResume":{"on":true}})").find("autoResume.on: unknown field"), std::string::npos);
  EXPECT_NE(create_error(R"({"autoPause":"yes"})").find("autoPause: expected true or false"), std::string::npos);
}

// The SDK's getSignature, as E2B's own test computes it: "v1_" + unpadded base64 of the sha256.
TEST(ServeFileSignature, AsTheSdkComputesIt) {
  // printf '%s' '/home/user/hello.txt:read:root:tok' | sha256sum | xxd -r -p | base64
  EXPECT_EQ(file_signature("/home/user/hello.txt", "read", "root", "tok", std::nullopt),
            "v1_" + std::string("TRlHfiNgpf44c8IeZCoou7xiz+m60QkIJ1Pm8NXrjXk"));
  EXPECT_EQ(file_signature("hello.txt", "write", "", "tok", 1700000000), "v1_" + std::string("X5VuPiiEy8qKk/edz0QLo+ML+7gSRoLmKWr2EpBfwg8"));
  SignedFileUrl u{file_signature("a.txt", "read", "", "tok", 5), "a.txt", "read", "", 5};
  EXPECT_TRUE(signature_matches(u, "tok"));
  EXPECT_FALSE(signature_matches(u, "other"));
  EXPECT_FALSE(signature_matches(u, ""));  // a sandbox without a token (secure false) is never reached
  auto changed = [&](auto f) { SignedFileUrl v = u; f(v); return signature_matches(v, "tok"); };
  EXPECT_FALSE(changed([](SignedFileUrl& v) { v.path = "b.txt"; }));
  EXPECT_FALSE(changed([](SignedFileUrl& v) { v.operation = "write"; }));
  EXPECT_FALSE(changed([](SignedFileUrl& v) { v.user = "root"; }));
  EXPECT_FALSE(changed([](SignedFileUrl& v) { v.expiration = 6; }));
  EXPECT_FALSE(changed([](SignedFileUrl& v) { v.expiration.reset(); }));
}

TEST(ServeControlRequests, NetworkUpdateAndTimeoutBodies) {
  auto u = parse_network_update(R"({"allowOut":["pypi.org"],"denyOut":["0.0.0.0/0"]})");
  ASSERT_TRUE(u) << u.error().message;
  EXPECT_EQ(u->allow_out, std::vector<std::string>{"pypi.org"});
  EXPECT_TRUE(u->deny_out.empty());
  EXPECT_FALSE(parse_network_update(R"({"rules":{}})"));
  EXPECT_FALSE(parse_network_update(R"({"allow_internet_access":true})"));
  EXPECT_EQ(*parse_timeout_body(R"({"timeout":30})", "timeout", true, 3600), std::optional<int64_t>(30));
  EXPECT_EQ(parse_timeout_body("", "timeout", true, 3600).error().message, "the request has no JSON body");
  EXPECT_EQ(parse_timeout_body("{}", "timeout", true, 3600).error().message, "timeout: missing");
  EXPECT_EQ(*parse_timeout_body("", "duration", false, 3600), std::nullopt);
  EXPECT_EQ(parse_timeout_body(R"({"duration":7200})", "duration", false, 3600).error().message,
            "duration: 7200: this tenant's limit is 3600 seconds");
}

TEST(ServeControlRequests, SnapshotAndForkBodies) {
  EXPECT_TRUE(parse_snapshot_body("")->empty());
  EXPECT_TRUE(parse_snapshot_body("{}")->empty());
  EXPECT_EQ(*parse_snapshot_body(R"({"name":"team/app:v1.2_x-y"})"), std::vector<std::string>{"team/app:v1.2_x-y"});
  for (const char* bad : {R"({"name":""})", R"({"name":"a b"})", R"({"name":"../x\n"})", R"({"name":7})", R"({"other":1})", "[]"})
    EXPECT_FALSE(parse_snapshot_body(bad)) << bad;
  EXPECT_FALSE(parse_snapshot_body(R"({"name":")" + std::string(129, 'a') + R"("})"));
  auto f = parse_fork_body("", 3600);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->timeout_s, 15);  // E2B's default
  EXPECT_EQ(f->count, 1);
  EXPECT_EQ(parse_fork_body("{}", 10)->timeout_s, 10);  // never past the tenant's limit
  f = parse_fork_body(R"({"timeout":60,"count":100})", 3600);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->timeout_s, 60);
  EXPECT_EQ(f->count, 100);
  EXPECT_EQ(parse_fork_body(R"({"count":0})", 3600).error().message, "count: expected an integer 1..100");
  for (const char* bad : {R"({"count":101})", R"({"count":-1})", R"({"count":1.5})", R"({"count":18446744073709551615})",
                          R"({"timeout":0})", R"({"timeout":7200})", R"({"templateID":"x"})"})
    EXPECT_FALSE(parse_fork_body(bad, 3600)) << bad;
}

TEST(ServeControlRequests, PauseBody) {
  // The SDK's pause({keepMemory}): {memory: bool}, or {} / nothing (keepMemory undefined).
  EXPECT_TRUE(*parse_pause_body(""));
  EXPECT_TRUE(*parse_pause_body("{}"));
  EXPECT_TRUE(*parse_pause_body(R"({"memory":null})"));
  EXPECT_TRUE(*parse_pause_body(R"({"memory":true})"));
  EXPECT_FALSE(*parse_pause_body(R"({"memory":false})"));
  EXPECT_EQ(parse_pause_body(R"({"memory":"no"})").error().message, "memory: expected true or false");
  EXPECT_EQ(parse_pause_body(R"({"keepMemory":false})").error().message, "keepMemory: unknown field (a pause takes memory)");
  EXPECT_FALSE(parse_pause_body("[]"));
}

TEST(ServeKeptPauses, AutoPauseMemoryKeptInTheRecord) {
  KeptPause k;
  k.id = "abc", k.tenant = "t", k.template_name = "base";
  k.auto_pause = true, k.auto_pause_memory = false;
  auto back = KeptPause::from_json(k.to_json());
  ASSERT_TRUE(back);
  EXPECT_TRUE(back->auto_pause);
  EXPECT_FALSE(back->auto_pause_memory);
  auto j = k.to_json();
  j.erase("autoPauseMemory");  // an earlier server's record: the memory kept, as before
  EXPECT_TRUE(KeptPause::from_json(j)->auto_pause_memory);
}

TEST(ServeControlRequests, SandboxPathsParsedWithoutRecursion) {
  auto p = parse_sandbox_path("/sandboxes/abc_D-9");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->id, "abc_D-9");
  EXPECT_EQ(p->action, "");
  p = parse_sandbox_path("/v2/sandboxes/x/connect");
  ASSERT_TRUE(p);
  EXPECT_EQ(p->id, "x");
  EXPECT_EQ(p->action, "/connect");
  EXPECT_TRUE(parse_sandbox_path("/sandboxes/" + std::string(64, 'a')));
  for (std::string bad : std::vector<std::string>{"/sandboxes/", "/sandboxes", "/sandboxes//pause", "/sandboxes/a/", "/sandboxes/a/Pause",
                          "/sandboxes/a/pause/", "/sandboxes/a/pause/x", "/sandboxes/a.b", "/v3/sandboxes/a", "/v2/v2/sandboxes/a",
                          "sandboxes/a", "/sandboxes/" + std::string(65, 'a')})
    EXPECT_FALSE(parse_sandbox_path(bad)) << bad;
  // A path far longer than the server's header limit (16 KiB): std::regex's
  // recursive matcher overflowed an 8 MiB stack at about 30 000 characters.
  EXPECT_FALSE(parse_sandbox_path("/sandboxes/a/" + std::string(1 << 20, 'a') + "A"));
  EXPECT_TRUE(parse_sandbox_path("/sandboxes/a/" + std::string(1 << 20, 'a')));
}

TEST(ServeTenants, QuotasOutOfRangeAreRefused) {
  // fuzz/serve_config's bounds: 2^64-1 sandboxes passed as -1; a timeout quota past the clock's range was taken.
  auto quota = [](const std::string& q) {
    auto t = Tenants::parse(R"({"tenants":[{"id":"a","keys":[")" + key_entry("k") + R"("],"quota":)" + q + "}]}", "t.json");
    return t ? std::string("accepted") : t.error().str();
  };
  EXPECT_NE(quota(R"({"sandboxes":18446744073709551615})").find("quota.sandboxes: expected an integer 0..100000"), std::string::npos);
  EXPECT_NE(quota(R"({"maxTimeoutSeconds":99999999999})").find("quota.maxTimeoutSeconds: expected an integer 1..315360000"),
            std::string::npos);
  EXPECT_NE(quota(R"({"maxTimeoutSeconds":0})").find("quota.maxTimeoutSeconds"), std::string::npos);
  EXPECT_EQ(quota(R"({"sandboxes":100000,"maxTimeoutSeconds":315360000})"), "accepted");
  EXPECT_NE(quota(R"({"snapshots":100001})").find("quota.snapshots: expected an integer 0..100000"), std::string::npos);
  EXPECT_NE(quota(R"({"pausedDiskMB":1.5})").find("quota.pausedDiskMB: expected an integer"), std::string::npos);
  auto t = Tenants::parse(R"({"tenants":[{"id":"a","keys":[")" + key_entry("k") + R"("],"quota":{"snapshots":3,"pausedDiskMB":64}}]})", "t.json");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->find("a")->quota.max_snapshots, 3u);
  EXPECT_EQ(t->find("a")->quota.max_paused_disk_mb, 64u);
  EXPECT_EQ(t->find("b"), nullptr);
}

// A kept pause (kept_pauses.hpp): written and read back whole; load() keeps
// only a record with its home, and drops a broken record, a record without a
// home, a home without a record and a temporary left half written.
TEST(ServeKeptPauses, WrittenReadBackAndLeftoversDropped) {
  char tmpl[] = "/tmp/exg-kept-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::filesystem::path d = tmpl;
  KeptPauses kept(d.string());
  KeptPause k;
  k.id = "abc123", k.tenant = "acme", k.template_name = "base", k.access_token = "tok", k.traffic_token = "traffic";
  k.metadata = {{"k", "v"}}, k.env_vars = {{"A", "1"}}, k.allow_out = {"example.test"};
  k.started_at = std::chrono::system_clock::time_point(std::chrono::milliseconds(1796615817000));
  k.paused_at = std::chrono::system_clock::time_point(std::chrono::milliseconds(1796615818000));  // its --pause-ttl-hours counts from here
  k.timeout = std::chrono::seconds(60), k.auto_pause = true, k.auto_resume = true;
  ASSERT_TRUE(kept.write(k));
  EXPECT_TRUE(kept.has("abc123"));
  std::filesystem::create_directory(kept.home_of("abc123"));
  KeptPause lone = k;
  lone.id = "nohome";
  ASSERT_TRUE(kept.write(lone));
  std::ofstream(d / "broken.json") << "{\"id\": \"broken\"";
  std::filesystem::create_directory(kept.home_of("broken"));
  std::filesystem::create_directory(kept.home_of("orphan"));
  std::ofstream(d / "half.json.tmp") << "{";
  auto all = kept.load();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].to_json(), k.to_json());
  std::vector<std::string> left;
  for (auto& e : std::filesystem::directory_iterator(d)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"abc123.home", "abc123.json"}));
  kept.drop_record("abc123");  // a resume: the record only
  EXPECT_FALSE(kept.has("abc123"));
  EXPECT_TRUE(std::filesystem::exists(kept.home_of("abc123")));
  kept.remove("abc123");
  EXPECT_TRUE(std::filesystem::is_empty(d));
  std::filesystem::remove_all(d);
}

TEST(ServeSnapshots, RecordKeepsItsLayerAndTheAnswerSaysWhatIsKept) {
  SnapshotRecord r;
  r.id = "snap-1", r.tenant = "acme", r.sandbox = "sb1", r.template_name = "vm", r.layer = "microvm";
  r.quarantined = {{".bashrc", "protected name"}};
  auto back = SnapshotRecord::from_json(exg::parse_json(r.to_json().dump()));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->layer, "microvm");
  // A record of an earlier server has no layer: read back all the same.
  nlohmann::json old = r.to_json();
  old.erase("layer");
  back = SnapshotRecord::from_json(old);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->layer, "");
  for (const char* layer : {"", "process", "container", "gvisor", "microvm"}) {
    std::string kept = snapshot_keeps(layer);
    EXPECT_TRUE(kept.starts_with("filesystem only: the sandbox's /home/user; not memory or processes")) << layer;
    EXPECT_EQ(kept.find("9p") != std::string::npos, std::string(layer) == "microvm") << layer << ": " << kept;
  }
}
