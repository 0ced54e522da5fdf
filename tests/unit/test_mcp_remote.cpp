// exguardian mcp's client mode, its pure parts: the --server URL (loopback or
// a unix socket only), and what a failed exchange with exguardian serve says
// (the server unreachable, the key refused, the sandbox gone, a quota, envd's
// Connect errors); and the run_command / read_output results both modes build.
#include <gtest/gtest.h>

#include "mcp/command_output.hpp"
#include "mcp/serve_endpoint.hpp"
#include "mcp/serve_errors.hpp"
#include "mcp/tool_catalog.hpp"

using namespace exg::mcp;

TEST(McpServerUrl, LoopbackHttpAndUnixSockets) {
  auto u = parse_server_url("unix:/run/exg/serve.sock");
  ASSERT_TRUE(u) << u.error().str();
  EXPECT_EQ(u->unix_path, "/run/exg/serve.sock");
  EXPECT_EQ(u->host_header(), "localhost");
  auto t = parse_server_url("http://127.0.0.1:8080");
  ASSERT_TRUE(t) << t.error().str();
  EXPECT_EQ(t->address, "127.0.0.1");
  EXPECT_EQ(t->port, 8080);
  EXPECT_EQ(t->host_header(), "127.0.0.1:8080");
  auto v6 = parse_server_url("http://[::1]:9/");
  ASSERT_TRUE(v6) << v6.error().str();
  EXPECT_EQ(v6->address, "::1");
  EXPECT_EQ(v6->host_header(), "[::1]:9");
  auto lh = parse_server_url("http://localhost:3000");
  ASSERT_TRUE(lh);
  EXPECT_EQ(lh->address, "127.0.0.1");
  EXPECT_TRUE(parse_server_url("http://127.1.2.3:80"));
}

TEST(McpServerUrl, EverythingElseIsRefusedNamingWhy) {
  auto why = [](const std::string& url) {
    auto r = parse_server_url(url);
    return r ? std::string("accepted") : r.error().str();
  };
  EXPECT_NE(why("http://10.0.0.1:80").find("not a loopback address"), std::string::npos);
  EXPECT_NE(why("http://example.com:80").find("expected a loopback address"), std::string::npos);
  EXPECT_NE(why("https://127.0.0.1:443").find("https is not spoken here"), std::string::npos);
  EXPECT_NE(why("http://127.0.0.1").find("the port is missing"), std::string::npos);
  EXPECT_NE(why("http://127.0.0.1:0").find("1..65535"), std::string::npos);
  EXPECT_NE(why("http://127.0.0.1:70000").find("1..65535"), std::string::npos);
  EXPECT_NE(why("http://127.0.0.1:80/api").find("only a host and a port"), std::string::npos);
  EXPECT_NE(why("http://user@127.0.0.1:80").find("only a host and a port"), std::string::npos);
  EXPECT_NE(why("unix:relative.sock").find("unix:/absolute/path"), std::string::npos);
  EXPECT_NE(why("unix:/" + std::string(120, 'a')).find("107 bytes"), std::string::npos);
  EXPECT_NE(why("127.0.0.1:80").find("expected http://"), std::string::npos);
  EXPECT_EQ(why("ftp://127.0.0.1:21").rfind("--server ftp://127.0.0.1:21: ", 0), 0u);
}

TEST(McpServerUrl, QueryValuesArePercentEncoded) {
  EXPECT_EQ(query_escape("sub dir/a&b=c.txt"), "sub%20dir%2Fa%26b%3Dc.txt");
  EXPECT_EQ(query_escape("h\xc3\xa9"), "h%C3%A9");
  EXPECT_EQ(query_escape("A-z_0.9~"), "A-z_0.9~");
}

namespace {
HttpAnswer answer(unsigned status, std::string body = {}) {
  HttpAnswer a;
  a.status = status;
  a.body = std::move(body);
  return a;
}
}  // namespace

TEST(McpServeErrors, SuccessIsNoFailure) {
  EXPECT_FALSE(serve_failure(answer(200, "{}"), Plane::Control));
  EXPECT_FALSE(serve_failure(answer(201, "{}"), Plane::Control));
  EXPECT_FALSE(serve_failure(answer(204), Plane::Control));
  HttpAnswer s = answer(200);
  s.stream_ended = true;
  EXPECT_FALSE(serve_failure(s, Plane::Envd));
}

TEST(McpServeErrors, EachClassSaysWhatItMeans) {
  HttpAnswer refused;
  refused.transport_error = "cannot connect to exguardian serve at http://127.0.0.1:1: Connection refused";
  EXPECT_EQ(serve_failure(refused, Plane::Control).value(), refused.transport_error);
  EXPECT_EQ(serve_failure(HttpAnswer{}, Plane::Control).value(), "no answer from exguardian serve");

  auto key = serve_failure(answer(401, R"({"code":401,"message":"invalid X-API-KEY"})"), Plane::Control).value();
  EXPECT_EQ(key, "exguardian serve refused the API key (401: invalid X-API-KEY): check the --api-key-file");
  auto token = serve_failure(answer(401, R"({"code":401,"message":"missing or wrong X-Access-Token"})"), Plane::Envd).value();
  EXPECT_NE(token.find("access token"), std::string::npos);

  auto gone = answer(404, R"({"code":404,"message":"sandbox abc not found"})");
  EXPECT_NE(serve_failure(gone, Plane::Control).value().find("the sandbox has ended"), std::string::npos);
  EXPECT_TRUE(sandbox_gone(gone, Plane::Control));
  EXPECT_FALSE(sandbox_gone(gone, Plane::Envd));  // envd's 404 is a file's
  EXPECT_NE(serve_failure(gone, Plane::Envd).value().find("no such file or directory in the sandbox"), std::string::npos);
  auto proxy = answer(502, R"({"code":502,"message":"sandbox abc not found"})");
  EXPECT_TRUE(sandbox_gone(proxy, Plane::Envd));
  EXPECT_NE(serve_failure(proxy, Plane::Envd).value().find("gone from exguardian serve (502"), std::string::npos);

  EXPECT_EQ(serve_failure(answer(429, R"({"code":429,"message":"quota: tenant a may hold 1 sandboxes at once"})"), Plane::Control).value(),
            "a quota of exguardian serve (429: quota: tenant a may hold 1 sandboxes at once)");
  EXPECT_EQ(serve_failure(answer(400, R"({"code":400,"message":"timeout: 99: this tenant's limit is 60 seconds"})"), Plane::Control).value(),
            "exguardian serve refused the request (400: timeout: 99: this tenant's limit is 60 seconds)");
  EXPECT_EQ(serve_failure(answer(500, R"({"code":500,"message":"the sandbox did not start: x"})"), Plane::Control).value(),
            "exguardian serve failed (500: the sandbox did not start: x)");
  EXPECT_NE(serve_failure(answer(403, R"({"code":403,"message":"/etc/x: EROFS: Read-only file system"})"), Plane::Envd).value().find("EROFS"),
            std::string::npos);
  // Not JSON (a proxy's page): its first line, bounded.
  auto html = serve_failure(answer(503, "<html>\nbusy</html>" + std::string(1000, 'x')), Plane::Control).value();
  EXPECT_EQ(html.rfind("exguardian serve failed (503: <html> busy</html>", 0), 0u);
  EXPECT_LT(html.size(), 400u);
}

TEST(McpServeErrors, ConnectErrorsOfEnvd) {
  // A unary call's error body, and a stream's end message.
  auto unary = serve_failure(answer(404, R"({"code":"not_found","message":"path /home/u/x not found"})"), Plane::Envd).value();
  EXPECT_EQ(unary, "path /home/u/x not found (not_found): no such file, directory or process in the sandbox");
  HttpAnswer s = answer(200);
  s.stream_ended = true;
  s.rpc_error = RpcEnd{"permission_denied", "start /x: EACCES: Permission denied"};
  EXPECT_NE(serve_failure(s, Plane::Envd).value().find("EACCES: Permission denied (permission_denied): refused by the sandbox's policy"),
            std::string::npos);
  HttpAnswer cut = answer(200);
  cut.transport_error = "exguardian serve's stream ended inside a message";
  EXPECT_EQ(serve_failure(cut, Plane::Envd).value(), cut.transport_error);
}

TEST(McpCommandOutput, RunResultNotesWhatWasCut) {
  RunOutcome o;
  o.exit_code = 137, o.signal = 9, o.timed_out = true, o.timeout_s = 1.5;
  o.out = "abc", o.out_bytes = 10, o.err = "e", o.err_bytes = 1;
  o.more_note = "Refusals are elsewhere.";
  auto r = run_result(o);
  EXPECT_EQ(r["exit_code"], 137);
  EXPECT_EQ(r["signal"], 9);
  EXPECT_TRUE(r["stdout_truncated"].get<bool>());
  EXPECT_FALSE(r["stderr_truncated"].get<bool>());
  EXPECT_EQ(r["note"], "killed after its timeout of 1.5 s. stdout truncated: 3 of 10 bytes kept. Raise max_output_bytes, or redirect "
                       "the output to a file and read_file it. Refusals are elsewhere.");
  RunOutcome clean;
  auto c = run_result(clean);
  EXPECT_FALSE(c.contains("note"));
  EXPECT_TRUE(c["signal"].is_null());
  EXPECT_TRUE(c["refusals"].is_array());
}

TEST(McpCommandOutput, BackgroundOutputIsBoundedAndHandedOverOnce) {
  BackgroundOutput b;
  b.pid = 7;
  std::string big(kBackgroundBuffer + 10, 'x');
  b.add(false, big);
  b.add(true, "err");
  int woken = 0;
  b.on_exit.push_back([&] { ++woken; });
  b.exited(4, 0);
  b.exited(5, 0);  // once
  EXPECT_EQ(woken, 1);
  auto r = b.take();
  EXPECT_EQ(r["stdout"].get<std::string>().size(), kBackgroundBuffer);
  EXPECT_EQ(r["dropped_bytes"], 10);
  EXPECT_EQ(r["stderr"], "err");
  EXPECT_EQ(r["exit_code"], 4);
  EXPECT_FALSE(r["running"].get<bool>());
  auto again = b.take();
  EXPECT_EQ(again["stdout"], "");
  EXPECT_EQ(again["dropped_bytes"], 0);
}
