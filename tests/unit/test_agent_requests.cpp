// agent::request: every op's encoder, sent through the wire's bytes and read
// back by the agent's own parser (FrameReader, parse_request), gives the
// request the caller meant; the headers hold exactly the fields the callers
// wrote by hand before (the wire did not change); and what the parser refuses
// it still refuses, whoever built the header.
#include <gtest/gtest.h>
#include <signal.h>

#include "agent/protocol.hpp"

using namespace exg::agent;
using nlohmann::json;

namespace {

// The header as the agent receives it: encoded, read back from the bytes, parsed.
Request round_trip(const json& header, const std::string& payload = {}) {
  FrameReader r;
  std::string bytes = encode(Frame{Kind::Request, 7, header, payload});
  r.feed(bytes.data(), bytes.size());
  auto item = r.next();
  EXPECT_TRUE(item.frame) << (item.error ? item.error->what : "no frame");
  if (!item.frame) return {};
  std::string error;
  auto req = parse_request(*item.frame, &error);
  EXPECT_TRUE(req) << header.dump() << ": " << error;
  EXPECT_EQ(req ? req->id : 0u, 7u);
  return req.value_or(Request{});
}

std::string refusal(const json& header, const std::string& payload = {}) {
  std::string error;
  auto req = parse_request(Frame{Kind::Request, 1, header, payload}, &error);
  EXPECT_FALSE(req) << header.dump();
  return error;
}

}  // namespace

TEST(AgentRequests, StartRoundTripsThroughTheParser) {
  auto r = round_trip(request::start({.argv = {"sh", "-c", "echo hi"},
                                      .env = std::vector<std::string>{"A=1", "B=two"},
                                      .cwd = "/w",
                                      .user = "1000",
                                      .pty = true,
                                      .rows = 40,
                                      .cols = 120,
                                      .stdin_open = false}));
  EXPECT_EQ(r.op, Op::Start);
  EXPECT_EQ(r.argv, (std::vector<std::string>{"sh", "-c", "echo hi"}));
  EXPECT_EQ(r.env, (std::vector<std::string>{"A=1", "B=two"}));
  EXPECT_EQ(r.cwd, "/w");
  EXPECT_EQ(r.user.value_or(""), "1000");
  EXPECT_TRUE(r.pty);
  EXPECT_EQ(r.rows, 40);
  EXPECT_EQ(r.cols, 120);
  EXPECT_FALSE(r.stdin_open);

  // Unset: left out, the agent's defaults.
  auto d = round_trip(request::start({.argv = {"true"}}));
  EXPECT_EQ(d.argv, std::vector<std::string>{"true"});
  EXPECT_TRUE(d.env.empty());
  EXPECT_EQ(d.cwd, "");
  EXPECT_FALSE(d.user);
  EXPECT_FALSE(d.pty);
  EXPECT_EQ(d.rows, 24);
  EXPECT_EQ(d.cols, 80);
  EXPECT_TRUE(d.stdin_open);
}

TEST(AgentRequests, ProcessOpsRoundTripThroughTheParser) {
  auto in = round_trip(request::input(42), std::string("bytes\0in", 8));
  EXPECT_EQ(in.op, Op::Input);
  EXPECT_EQ(in.pid, 42);
  EXPECT_EQ(in.data, std::string("bytes\0in", 8));

  auto cs = round_trip(request::close_stdin(43));
  EXPECT_EQ(cs.op, Op::CloseStdin);
  EXPECT_EQ(cs.pid, 43);

  auto s1 = round_trip(request::signal(44, SIGTERM));
  EXPECT_EQ(s1.op, Op::Signal);
  EXPECT_EQ(s1.pid, 44);
  EXPECT_EQ(s1.signal, SIGTERM);
  EXPECT_FALSE(s1.group);
  auto s2 = round_trip(request::signal(45, "KILL", /*group=*/true));
  EXPECT_EQ(s2.signal, SIGKILL);
  EXPECT_TRUE(s2.group);
  EXPECT_EQ(round_trip(request::signal(45, "SIGHUP")).signal, SIGHUP);

  auto rs = round_trip(request::resize(46, 50, 132));
  EXPECT_EQ(rs.op, Op::Resize);
  EXPECT_EQ(rs.pid, 46);
  EXPECT_EQ(rs.rows, 50);
  EXPECT_EQ(rs.cols, 132);

  EXPECT_EQ(round_trip(request::list()).op, Op::List);
  auto at = round_trip(request::attach(47));
  EXPECT_EQ(at.op, Op::Attach);
  EXPECT_EQ(at.pid, 47);
  EXPECT_EQ(round_trip(request::shutdown()).op, Op::Shutdown);
}

TEST(AgentRequests, FileOpsRoundTripThroughTheParser) {
  auto st = round_trip(request::stat("a/b"));
  EXPECT_EQ(st.op, Op::Stat);
  EXPECT_EQ(st.path, "a/b");
  auto ld = round_trip(request::list_dir("/d"));
  EXPECT_EQ(ld.op, Op::ListDir);
  EXPECT_EQ(ld.path, "/d");

  auto rd = round_trip(request::read("f", 4096, 100));
  EXPECT_EQ(rd.op, Op::Read);
  EXPECT_EQ(rd.path, "f");
  EXPECT_EQ(rd.offset, 4096u);
  EXPECT_EQ(rd.length, 100u);
  EXPECT_EQ(round_trip(request::read("f", 0)).length, kMaxPayload);

  auto w = round_trip(request::write("f"), "data");
  EXPECT_EQ(w.op, Op::Write);
  EXPECT_EQ(w.path, "f");
  EXPECT_EQ(w.data, "data");
  EXPECT_TRUE(w.truncate);
  EXPECT_FALSE(w.append);
  EXPECT_EQ(w.mode, 0u);
  auto wa = round_trip(request::write("f", {.append = true, .exclusive = true, .mode = 0600}), "more");
  EXPECT_TRUE(wa.append);
  EXPECT_TRUE(wa.exclusive);
  EXPECT_FALSE(wa.truncate);
  EXPECT_EQ(wa.mode, 0600u);
  auto wo = round_trip(request::write("f", {.offset = 10}), "x");
  EXPECT_EQ(wo.offset, 10u);
  EXPECT_FALSE(wo.truncate);

  auto wm = round_trip(request::write("f", {.metadata = std::map<std::string, std::string>{{"author", "mish"}}}), "x");
  ASSERT_TRUE(wm.metadata);
  EXPECT_EQ(wm.metadata->at("author"), "mish");
  EXPECT_FALSE(w.metadata);  // none sent: the file's metadata is left as it is
  auto wclear = round_trip(request::write("f", {.metadata = std::map<std::string, std::string>{}}), "x");
  ASSERT_TRUE(wclear.metadata);
  EXPECT_TRUE(wclear.metadata->empty());

  auto mk = round_trip(request::mkdir("a/b", /*parents=*/true, 0700));
  EXPECT_EQ(mk.op, Op::Mkdir);
  EXPECT_TRUE(mk.parents);
  EXPECT_EQ(mk.mode, 0700u);
  EXPECT_FALSE(round_trip(request::mkdir("a", false)).parents);

  auto rm = round_trip(request::remove("t", /*recursive=*/true));
  EXPECT_EQ(rm.op, Op::Remove);
  EXPECT_TRUE(rm.recursive);
  EXPECT_FALSE(round_trip(request::remove("t", false)).recursive);

  auto mv = round_trip(request::rename("a", "b"));
  EXPECT_EQ(mv.op, Op::Rename);
  EXPECT_EQ(mv.path, "a");
  EXPECT_EQ(mv.to, "b");

  auto wt = round_trip(request::watch("."));
  EXPECT_EQ(wt.op, Op::Watch);
  EXPECT_EQ(wt.path, ".");
  auto uw = round_trip(request::unwatch(3));
  EXPECT_EQ(uw.op, Op::Unwatch);
  EXPECT_EQ(uw.watch, 3);
}

// The same fields the callers wrote by hand before the encoder: nothing on the wire changed.
TEST(AgentRequests, HeadersHoldTheFieldsTheCallersSentBefore) {
  EXPECT_EQ(request::start({.argv = {"ls"}, .env = std::vector<std::string>{}, .cwd = "/h", .stdin_open = false}),
            json::parse(R"({"op":"start","argv":["ls"],"env":[],"cwd":"/h","stdin":false})"));
  EXPECT_EQ(request::start({.argv = {"sh"}, .pty = true, .rows = 24, .cols = 80}),
            json::parse(R"({"op":"start","argv":["sh"],"pty":true,"rows":24,"cols":80,"stdin":true})"));
  EXPECT_EQ(request::signal(5, "KILL", true), json::parse(R"({"op":"signal","pid":5,"signal":"KILL","group":true})"));
  EXPECT_EQ(request::signal(5, 15), json::parse(R"({"op":"signal","pid":5,"signal":15})"));
  EXPECT_EQ(request::input(5), json::parse(R"({"op":"input","pid":5})"));
  EXPECT_EQ(request::write("f", {.append = true}), json::parse(R"({"op":"write","path":"f","append":true})"));
  EXPECT_EQ(request::write("f"), json::parse(R"({"op":"write","path":"f"})"));
  EXPECT_EQ(request::read("f", 0), json::parse(R"({"op":"read","path":"f","offset":0})"));
  EXPECT_EQ(request::mkdir("d", true), json::parse(R"({"op":"mkdir","path":"d","parents":true})"));
  EXPECT_EQ(request::remove("d", false), json::parse(R"({"op":"remove","path":"d","recursive":false})"));
  EXPECT_EQ(request::shutdown(), json::parse(R"({"op":"shutdown"})"));
  EXPECT_EQ(request::audit_tags({{"tenant", "acme"}}), json::parse(R"({"op":"audit_tags","tags":{"tenant":"acme"}})"));
  EXPECT_EQ(request::set_network({"a.example"}, {}), json::parse(R"({"op":"set_network","allow":["a.example"],"deny":[]})"));
}

// The encoder types the fields, not their values: what the parser refuses
// (and what no encoder builds: an unknown op, a stray field) is refused as before.
TEST(AgentRequests, WhatTheParserRefusesIsStillRefused) {
  EXPECT_EQ(refusal(request::stat("")), "stat: field \"path\" is empty");
  EXPECT_EQ(refusal(request::rename("a", "")), "rename: field \"to\" is empty");
  EXPECT_EQ(refusal(request::start({.argv = {}})), "field \"argv\" is empty");
  EXPECT_EQ(refusal(request::start({.argv = {"x"}, .env = std::vector<std::string>{"NOEQUALS"}})),
            "field \"env\": \"NOEQUALS\" is not NAME=VALUE");
  EXPECT_EQ(refusal(request::resize(1, 0, 80)), "resize: field \"rows\" out of range 1..1000");
  EXPECT_EQ(refusal(request::signal(1, "NOSUCH")), "signal: field \"signal\": unknown signal");
  EXPECT_EQ(refusal(request::input(0)), "input: field \"pid\" out of range 1..4194304");
  EXPECT_EQ(refusal(request::list(), "payload"), "op \"list\" takes no payload");
  auto stray = request::stat("f");
  stray["follow"] = true;
  EXPECT_EQ(refusal(stray), "stat: unknown field \"follow\"");
  EXPECT_EQ(refusal(json{{"op", "frobnicate"}}), "unknown op \"frobnicate\"");
  EXPECT_EQ(refusal(json::object()), "missing field \"op\" (a string)");
  // The supervisor's own two never reach the agent: its parser does not know them.
  EXPECT_EQ(refusal(request::audit_tags({{"tenant", "t"}})), "unknown op \"audit_tags\"");
  EXPECT_EQ(refusal(request::set_network({}, {})), "unknown op \"set_network\"");
}
