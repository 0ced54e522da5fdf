// The agent's channel protocol: frames round-trip, bad frames are errors and
// the stream goes on after them, the limits hold; requests are validated
// field by field. And the agent's loop itself, run in a child process over a
// socketpair (no sandbox: what it does with processes and files is the same
// code the sandbox's pid 1 runs).
#include <gtest/gtest.h>
#include <signal.h>
#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "agent/agent.hpp"
#include "agent/client.hpp"
#include "agent/inside_report.hpp"
#include "agent/protocol.hpp"

using namespace exg::agent;
using nlohmann::json;

namespace {

std::string u32(uint32_t v) {
  std::string s;
  for (int k = 3; k >= 0; --k) s.push_back(static_cast<char>(v >> (8 * k)));
  return s;
}

// A frame by hand: length, kind, id, header length, header, payload.
std::string raw_frame(char kind, uint32_t id, const std::string& header, const std::string& payload = {}) {
  return u32(static_cast<uint32_t>(9 + header.size() + payload.size())) + kind + u32(id) +
         u32(static_cast<uint32_t>(header.size())) + header + payload;
}

std::vector<FrameReader::Item> read_all(const std::string& bytes, size_t chunk = 0) {
  FrameReader r;
  std::vector<FrameReader::Item> out;
  auto drain = [&] {
    for (;;) {
      auto item = r.next();
      if (!item.frame && !item.error) break;
      out.push_back(std::move(item));
    }
  };
  if (chunk == 0) {
    r.feed(bytes.data(), bytes.size());
    drain();
  } else {
    for (size_t off = 0; off < bytes.size(); off += chunk) {
      r.feed(bytes.data() + off, std::min(chunk, bytes.size() - off));
      drain();
    }
  }
  return out;
}

Frame request_frame(json h, std::string payload = {}, uint32_t id = 7) {
  return Frame{Kind::Request, id, std::move(h), std::move(payload)};
}

std::optional<Request> parse(json h, std::string* err, std::string payload = {}) {
  return parse_request(request_frame(std::move(h), std::move(payload)), err);
}

}  // namespace

TEST(AgentProtocol, FramesRoundTripWithBinaryPayloads) {
  std::string payload("a\0b\xff\n", 5);
  std::string bytes = encode(request_frame({{"op", "write"}, {"path", "f"}}, payload, 42)) +
                      encode(reply_ok(42, {{"bytes", 5}})) + encode(event({{"event", "stdout"}, {"pid", 3}}, payload));
  for (size_t chunk : {size_t{0}, size_t{1}, size_t{3}, size_t{1000}}) {
    auto items = read_all(bytes, chunk);
    ASSERT_EQ(items.size(), 3u) << "chunk " << chunk;
    for (auto& i : items) ASSERT_TRUE(i.frame) << (i.error ? i.error->what : "");
    EXPECT_EQ(items[0].frame->kind, Kind::Request);
    EXPECT_EQ(items[0].frame->id, 42u);
    EXPECT_EQ(items[0].frame->header["op"], "write");
    EXPECT_EQ(items[0].frame->payload, payload);
    EXPECT_EQ(items[1].frame->kind, Kind::Reply);
    EXPECT_EQ(items[1].frame->header["ok"], true);
    EXPECT_EQ(items[2].frame->kind, Kind::Event);
    EXPECT_EQ(items[2].frame->id, 0u);
    EXPECT_EQ(items[2].frame->payload, payload);
  }
}

TEST(AgentProtocol, AFrameShorterThanItsFixedPartIsAnErrorAndTheStreamGoesOn) {
  auto items = read_all(u32(2) + "ab" + raw_frame('Q', 1, R"({"op":"list"})"));
  ASSERT_EQ(items.size(), 2u);
  ASSERT_TRUE(items[0].error);
  EXPECT_NE(items[0].error->what.find("shorter"), std::string::npos);
  ASSERT_TRUE(items[1].frame);
  EXPECT_EQ(items[1].frame->header["op"], "list");
}

TEST(AgentProtocol, AnOversizedFrameIsSkippedWithoutBeingHeld) {
  // Claims 3 MiB; what follows it is a good frame.
  const uint32_t claimed = 3 * 1024 * 1024;
  std::string big = u32(claimed) + 'Q' + u32(9) + u32(0) + std::string(claimed - 9, 'x');
  std::string bytes = big + raw_frame('Q', 2, R"({"op":"list"})");
  FrameReader r;
  std::vector<FrameReader::Item> items;
  size_t max_buffered = 0;
  for (size_t off = 0; off < bytes.size(); off += 65536) {
    r.feed(bytes.data() + off, std::min<size_t>(65536, bytes.size() - off));
    max_buffered = std::max(max_buffered, r.buffered());
    for (auto i = r.next(); i.frame || i.error; i = r.next()) items.push_back(std::move(i));
  }
  ASSERT_EQ(items.size(), 2u);
  ASSERT_TRUE(items[0].error);
  EXPECT_EQ(items[0].error->id, 9u);  // the id is still answered
  EXPECT_NE(items[0].error->what.find("larger than the limit"), std::string::npos);
  ASSERT_TRUE(items[1].frame);
  EXPECT_EQ(items[1].frame->id, 2u);
  EXPECT_LE(max_buffered, 65536u + 64);
}

TEST(AgentProtocol, BadHeadersAreErrorsNamingWhatIsWrong) {
  struct Case {
    std::string bytes, want;
  };
  std::string deep9 = std::string(9, '[') + std::string(9, ']');
  std::string deep8 = "{\"a\":" + std::string(7, '[') + std::string(7, ']') + "}";
  std::vector<Case> cases = {
      {raw_frame('X', 5, "{}"), "unknown frame kind"},
      {raw_frame('Q', 5, "{\"op\":"), "not valid JSON"},
      {raw_frame('Q', 5, "[1,2]"), "not a JSON object"},
      {raw_frame('Q', 5, "\"op\""), "not a JSON object"},
      {raw_frame('Q', 5, "{\"a\":" + deep9 + "}"), "deeper than 8"},
      {u32(9 + 2) + "Q" + u32(5) + u32(100) + "{}", "runs past the frame"},
      {u32(9 + 70000) + "Q" + u32(5) + u32(70000) + std::string(70000, ' '), "header of 70000 bytes"},
      {raw_frame('Q', 5, "{}", std::string(kMaxPayload + 1, 'p')), "payload larger"},
      {raw_frame('Q', 5, std::string("{\"op\":\"\xff\"}")), "not valid JSON"},
  };
  for (const auto& c : cases) {
    auto items = read_all(c.bytes + raw_frame('Q', 6, deep8));
    ASSERT_EQ(items.size(), 2u) << c.want;
    ASSERT_TRUE(items[0].error) << c.want;
    EXPECT_EQ(items[0].error->id, 5u) << c.want;
    EXPECT_NE(items[0].error->what.find(c.want), std::string::npos) << items[0].error->what;
    ASSERT_TRUE(items[1].frame) << "after: " << c.want;  // nesting of 8 is fine
  }
}

TEST(AgentProtocol, RandomBytesNeverCrashTheReader) {
  std::mt19937 rng(1234);
  for (int round = 0; round < 300; ++round) {
    std::string bytes(static_cast<size_t>(rng() % 4096), '\0');
    for (auto& c : bytes) c = static_cast<char>(rng());
    // Some rounds: a plausible prefix, so deeper paths are reached.
    if (round % 2 && bytes.size() > 16) {
      uint32_t len = static_cast<uint32_t>(bytes.size() - 4);
      bytes.replace(0, 4, u32(len));
      bytes[4] = "QRE"[round % 3];
      uint32_t hlen = static_cast<uint32_t>(rng() % (len - 8));
      bytes.replace(9, 4, u32(hlen));
    }
    FrameReader r;
    r.feed(bytes.data(), bytes.size());
    for (int k = 0; k < 10000; ++k) {
      auto i = r.next();
      if (!i.frame && !i.error) break;
      if (i.frame) {
        std::string err;
        (void)parse_request(*i.frame, &err);
      }
    }
    EXPECT_LE(r.buffered(), bytes.size());
  }
}

TEST(AgentProtocol, StartRequestsAreValidatedFieldByField) {
  std::string err;
  auto r = parse({{"op", "start"}, {"argv", {"sh", "-c", "echo"}}, {"env", {"A=1"}}, {"cwd", "/w"}, {"pty", true},
                  {"rows", 30}, {"cols", 100}, {"stdin", false}, {"user", "1000"}},
                 &err);
  ASSERT_TRUE(r) << err;
  EXPECT_EQ(r->op, Op::Start);
  EXPECT_EQ(r->id, 7u);
  EXPECT_EQ(r->argv.size(), 3u);
  EXPECT_EQ(r->env[0], "A=1");
  EXPECT_TRUE(r->pty);
  EXPECT_EQ(r->rows, 30);
  EXPECT_EQ(r->cols, 100);
  EXPECT_FALSE(r->stdin_open);
  EXPECT_EQ(r->user.value_or(""), "1000");

  struct Bad {
    json h;
    std::string want;
  };
  std::vector<std::string> many(kMaxArgs + 1, "x");
  std::vector<Bad> bad = {
      {{{"op", "start"}}, "missing field \"argv\""},
      {{{"op", "start"}, {"argv", json::array()}}, "\"argv\" is empty"},
      {{{"op", "start"}, {"argv", {""}}}, "program is empty"},
      {{{"op", "start"}, {"argv", {1}}}, "array of strings"},
      {{{"op", "start"}, {"argv", "sh"}}, "array of strings"},
      {{{"op", "start"}, {"argv", many}}, "more than 4096"},
      {{{"op", "start"}, {"argv", {std::string(kMaxString + 1, 'a')}}}, "longer than 64 KiB"},
      {{{"op", "start"}, {"argv", {std::string("a\0b", 3)}}}, "NUL"},
      {{{"op", "start"}, {"argv", {"sh"}}, {"env", {"NOEQUALS"}}}, "not NAME=VALUE"},
      {{{"op", "start"}, {"argv", {"sh"}}, {"env", {"=x"}}}, "not NAME=VALUE"},
      {{{"op", "start"}, {"argv", {"sh"}}, {"rows", 0}}, "out of range"},
      {{{"op", "start"}, {"argv", {"sh"}}, {"rows", -1}}, "non-negative integer"},
      {{{"op", "start"}, {"argv", {"sh"}}, {"cols", 1.5}}, "non-negative integer"},
      {{{"op", "start"}, {"argv", {"sh"}}, {"pty", "yes"}}, "true or false"},
      {{{"op", "start"}, {"argv", {"sh"}}, {"tty", true}}, "unknown field \"tty\""},
      {{{"op", "start"}, {"argv", {"sh"}}, {"cwd", 5}}, "must be a string"},
  };
  for (const auto& b : bad) {
    err.clear();
    EXPECT_FALSE(parse(b.h, &err)) << b.want;
    EXPECT_NE(err.find(b.want), std::string::npos) << "got: " << err << " want: " << b.want;
  }
}

TEST(AgentProtocol, OtherRequestsAndTheirLimits) {
  std::string err;
  auto sig = parse({{"op", "signal"}, {"pid", 5}, {"signal", "SIGTERM"}}, &err);
  ASSERT_TRUE(sig) << err;
  EXPECT_EQ(sig->signal, SIGTERM);
  EXPECT_EQ(parse({{"op", "signal"}, {"pid", 5}, {"signal", 9}}, &err)->signal, 9);
  EXPECT_FALSE(parse({{"op", "signal"}, {"pid", 5}, {"signal", "NOPE"}}, &err));
  EXPECT_FALSE(parse({{"op", "signal"}, {"pid", 5}, {"signal", 65}}, &err));
  EXPECT_FALSE(parse({{"op", "signal"}, {"pid", 0}, {"signal", 9}}, &err));
  EXPECT_FALSE(parse({{"op", "signal"}, {"pid", 99999999}, {"signal", 9}}, &err));
  EXPECT_TRUE(parse({{"op", "signal"}, {"pid", 5}, {"signal", 9}, {"group", true}}, &err)->group);
  EXPECT_FALSE(parse({{"op", "signal"}, {"pid", 5}, {"signal", 9}}, &err)->group);
  EXPECT_FALSE(parse({{"op", "signal"}, {"pid", 5}, {"signal", 9}, {"group", "yes"}}, &err));

  auto in = parse({{"op", "input"}, {"pid", 3}}, &err, "data");
  ASSERT_TRUE(in) << err;
  EXPECT_EQ(in->data, "data");
  err.clear();
  EXPECT_FALSE(parse({{"op", "stat"}, {"path", "x"}}, &err, "data"));
  EXPECT_NE(err.find("takes no payload"), std::string::npos);

  auto w = parse({{"op", "write"}, {"path", "f"}}, &err, "x");
  ASSERT_TRUE(w);
  EXPECT_TRUE(w->truncate);
  auto wo = parse({{"op", "write"}, {"path", "f"}, {"offset", 10}}, &err, "x");
  ASSERT_TRUE(wo);
  EXPECT_FALSE(wo->truncate);
  EXPECT_EQ(wo->offset, 10u);
  EXPECT_FALSE(parse({{"op", "write"}, {"path", "f"}, {"offset", 1}, {"append", true}}, &err));
  EXPECT_FALSE(parse({{"op", "write"}, {"path", "f"}, {"mode", 070000}}, &err));
  // E2B's file metadata: names HTTP tokens, values printable ASCII, only on a write that replaces.
  auto wm = parse({{"op", "write"}, {"path", "f"}, {"metadata", {{"author", "mish"}}}}, &err, "x");
  ASSERT_TRUE(wm) << err;
  EXPECT_EQ(wm->metadata->at("author"), "mish");
  EXPECT_FALSE(parse({{"op", "write"}, {"path", "f"}, {"metadata", {{"bad key", "v"}}}}, &err));
  EXPECT_FALSE(parse({{"op", "write"}, {"path", "f"}, {"metadata", {{"", "v"}}}}, &err));
  EXPECT_FALSE(parse({{"op", "write"}, {"path", "f"}, {"metadata", {{"k", "line\nbreak"}}}}, &err));
  EXPECT_FALSE(parse({{"op", "write"}, {"path", "f"}, {"metadata", {{"k", 1}}}}, &err));
  EXPECT_FALSE(parse({{"op", "write"}, {"path", "f"}, {"metadata", "k=v"}}, &err));
  EXPECT_FALSE(parse({{"op", "write"}, {"path", "f"}, {"append", true}, {"metadata", json::object()}}, &err));

  EXPECT_TRUE(parse({{"op", "read"}, {"path", "f"}, {"length", kMaxPayload}}, &err));
  EXPECT_FALSE(parse({{"op", "read"}, {"path", "f"}, {"length", kMaxPayload + 1}}, &err));
  EXPECT_FALSE(parse({{"op", "read"}, {"path", ""}}, &err));
  EXPECT_FALSE(parse({{"op", "read"}}, &err));
  EXPECT_FALSE(parse({{"op", "rename"}, {"path", "a"}}, &err));
  EXPECT_TRUE(parse({{"op", "rename"}, {"path", "a"}, {"to", "b"}}, &err));
  EXPECT_TRUE(parse({{"op", "resize"}, {"pid", 2}, {"rows", 10}, {"cols", 10}}, &err));
  EXPECT_FALSE(parse({{"op", "resize"}, {"pid", 2}, {"rows", 10}}, &err));
  EXPECT_TRUE(parse({{"op", "list"}}, &err));
  EXPECT_FALSE(parse({{"op", "list"}, {"extra", 1}}, &err));
  EXPECT_TRUE(parse({{"op", "shutdown"}}, &err));

  err.clear();
  EXPECT_FALSE(parse({{"op", "format_disk"}}, &err));
  EXPECT_NE(err.find("unknown op"), std::string::npos);
  EXPECT_FALSE(parse({{"path", "x"}}, &err));
  EXPECT_FALSE(parse_request(Frame{Kind::Request, 0, {{"op", "list"}}, {}}, &err));  // id 0
  EXPECT_FALSE(parse_request(Frame{Kind::Event, 3, {{"op", "list"}}, {}}, &err));
}

TEST(AgentProtocol, RepliesCarryTheErrnoByName) {
  auto f = reply_error(9, ENOENT, "open x");
  EXPECT_EQ(f.kind, Kind::Reply);
  EXPECT_EQ(f.id, 9u);
  EXPECT_EQ(f.header["ok"], false);
  EXPECT_EQ(f.header["error"], "ENOENT");
  EXPECT_EQ(f.header["errno"], ENOENT);
  EXPECT_EQ(errno_name(EROFS), "EROFS");
  EXPECT_EQ(errno_name(4095), "E4095");
  EXPECT_EQ(reply_ok(3).header["ok"], true);
}

// The agent's loop in a child process (not pid 1: it signals only what it started).
class AgentLoop : public ::testing::Test {
 protected:
  pid_t pid_ = -1;
  std::optional<Client> client_;
  std::filesystem::path dir_;
  std::optional<Frame> ready_;
  // In the agent's process, before serve(): what a layer's caller adds.
  virtual void configure(AgentConfig&) {}

  void SetUp() override {
    char tmpl[] = "/tmp/exg-agent-test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    pid_ = ::fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      ::close(sv[0]);
      AgentConfig cfg;
      cfg.channel = sv[1];
      cfg.env = {"PATH=/usr/bin:/bin", "FROM_SANDBOX=1"};
      cfg.cwd = dir_.string();
      if (::chdir(cfg.cwd.c_str()) != 0) ::_exit(3);
      configure(cfg);
      serve(cfg);
    }
    ::close(sv[1]);
    client_.emplace(exg::UniqueFd(sv[0]));
    auto ready = client_->next_event();
    ASSERT_TRUE(ready);
    EXPECT_EQ(ready->header["event"], "ready");
    ready_ = *ready;
  }
  void TearDown() override {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::filesystem::remove_all(dir_);
  }
  // Output and status of a process until its exit.
  int collect(int pid, std::string* out, std::string* err) {
    for (;;) {
      auto e = client_->next_event();
      if (!e) return -1;
      if (e->header.value("pid", 0) != pid) continue;
      std::string ev = e->header["event"];
      if (ev == "stdout") *out += e->payload;
      if (ev == "stderr") *err += e->payload;
      if (ev == "exit") return e->header["status"];
    }
  }
};

TEST_F(AgentLoop, StartsProcessesStreamsThemAndReportsTheirStatus) {
  auto r = client_->call({{"op", "start"}, {"argv", {"sh", "-c", "read x; echo \"$x $FROM_SANDBOX $EXTRA\"; echo e >&2; exit 3"}},
                          {"env", {"EXTRA=2"}}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->header["ok"], true) << r->header.dump();
  int pid = r->header["pid"];
  ASSERT_TRUE(client_->call({{"op", "input"}, {"pid", pid}}, "hello\n"));
  ASSERT_TRUE(client_->call({{"op", "close_stdin"}, {"pid", pid}}));
  std::string out, err;
  EXPECT_EQ(collect(pid, &out, &err), 3);
  EXPECT_EQ(out, "hello 1 2\n");
  EXPECT_EQ(err, "e\n");
  // Attach to it again: its output, then its exit.
  auto a = client_->call({{"op", "attach"}, {"pid", pid}});
  ASSERT_TRUE(a);
  EXPECT_EQ(a->header["running"], false);
  out.clear();
  err.clear();
  EXPECT_EQ(collect(pid, &out, &err), 3);
  EXPECT_EQ(out, "hello 1 2\n");

  auto missing = client_->call({{"op", "start"}, {"argv", {"/nonexistent/prog"}}});
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->header["error"], "ENOENT");
}

// A shell's children end with it when the signal names the group (a timeout of `sh -c "sleep 100"`).
TEST_F(AgentLoop, SignalToTheGroupReachesTheShellsChildren) {
  auto r = client_->call({{"op", "start"}, {"argv", {"sh", "-c", "sleep 100 & echo $!; wait"}}, {"stdin", false}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->header["ok"], true) << r->header.dump();
  int pid = r->header["pid"];
  std::string first;
  while (first.find('\n') == std::string::npos) {
    auto e = client_->next_event();
    ASSERT_TRUE(e);
    ASSERT_EQ(e->header.value("event", ""), "stdout") << e->header.dump();
    first += e->payload;
  }
  int child = std::stoi(first);
  ASSERT_TRUE(client_->call({{"op", "signal"}, {"pid", pid}, {"signal", "KILL"}, {"group", true}}));
  std::string out, err;
  EXPECT_EQ(collect(pid, &out, &err), 128 + SIGKILL);
  // The sleep, orphaned, is gone too (or a zombie its new parent has yet to reap).
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    std::ifstream st("/proc/" + std::to_string(child) + "/stat");
    std::string line;
    std::getline(st, line);
    auto close = line.rfind(')');
    gone = !st || close == std::string::npos || line.substr(close + 2, 1) == "Z";
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(gone) << "sleep " << child << " outlived its group's SIGKILL";
}

TEST_F(AgentLoop, SignalsListsAndAPty) {
  auto r = client_->call({{"op", "start"}, {"argv", {"sleep", "100"}}, {"stdin", false}});
  ASSERT_TRUE(r);
  int pid = r->header["pid"];
  auto l = client_->call({{"op", "list"}});
  ASSERT_TRUE(l);
  ASSERT_EQ(l->header["processes"].size(), 1u);
  EXPECT_EQ(l->header["processes"][0]["pid"], pid);
  ASSERT_TRUE(client_->call({{"op", "signal"}, {"pid", pid}, {"signal", "TERM"}}));
  std::string out, err;
  EXPECT_EQ(collect(pid, &out, &err), 128 + SIGTERM);
  auto gone = client_->call({{"op", "signal"}, {"pid", pid}, {"signal", "TERM"}});
  EXPECT_EQ(gone->header["error"], "ESRCH");

  auto t = client_->call({{"op", "start"}, {"argv", {"sh", "-c", "test -t 0 && stty size"}}, {"pty", true},
                          {"rows", 12}, {"cols", 34}});
  ASSERT_TRUE(t);
  ASSERT_EQ(t->header["ok"], true) << t->header.dump();
  out.clear();
  EXPECT_EQ(collect(t->header["pid"], &out, &err), 0);
  EXPECT_NE(out.find("12 34"), std::string::npos) << out;
}

TEST_F(AgentLoop, FileRequests) {
  ASSERT_EQ(client_->call({{"op", "mkdir"}, {"path", "a/b"}, {"parents", true}})->header["ok"], true);
  ASSERT_EQ(client_->call({{"op", "write"}, {"path", "a/b/f"}}, "0123456789")->header["ok"], true);
  ASSERT_EQ(client_->call({{"op", "write"}, {"path", "a/b/f"}, {"append", true}}, "AB")->header["ok"], true);
  auto rd = client_->call({{"op", "read"}, {"path", "a/b/f"}, {"offset", 8}, {"length", 100}});
  EXPECT_EQ(rd->payload, "89AB");
  EXPECT_EQ(rd->header["eof"], true);
  EXPECT_EQ(rd->header["size"], 12);
  auto st = client_->call({{"op", "stat"}, {"path", "a/b/f"}});
  EXPECT_EQ(st->header["type"], "file");
  EXPECT_EQ(st->header["size"], 12);
  auto ls = client_->call({{"op", "list_dir"}, {"path", "a/b"}});
  ASSERT_EQ(ls->header["entries"].size(), 1u);
  EXPECT_EQ(ls->header["entries"][0]["name"], "f");
  // E2B's file metadata: kept as user.e2b.* attributes, replaced by a write that gives it (the
  // file's other attributes untouched), moved with a rename; a filesystem without user
  // attributes (tmpfs before Linux 6.6) cannot hold it.
  bool user_xattrs = ::setxattr((dir_ / "a/b/f").c_str(), "user.other", "o", 1, 0) == 0;
  if (user_xattrs) {
    ASSERT_EQ(::setxattr((dir_ / "a/b/f").c_str(), "user.e2b.stale", "s", 1, 0), 0);
    auto wm = client_->call({{"op", "write"}, {"path", "a/b/f"}, {"metadata", {{"author", "mish"}}}}, "0123456789AB");
    ASSERT_EQ(wm->header["ok"], true) << wm->header.dump();
    EXPECT_EQ(client_->call({{"op", "stat"}, {"path", "a/b/f"}})->header["metadata"], json({{"author", "mish"}}));
    char v[8];
    EXPECT_EQ(::getxattr((dir_ / "a/b/f").c_str(), "user.other", v, sizeof v), 1);
  }
  ASSERT_EQ(client_->call({{"op", "rename"}, {"path", "a/b/f"}, {"to", "a/g"}})->header["ok"], true);
  if (user_xattrs) {
    EXPECT_EQ(client_->call({{"op", "stat"}, {"path", "a/g"}})->header["metadata"], json({{"author", "mish"}}));
    ASSERT_EQ(client_->call({{"op", "write"}, {"path", "a/g"}, {"metadata", json::object()}}, "0123456789AB")->header["ok"], true);
    EXPECT_FALSE(client_->call({{"op", "stat"}, {"path", "a/g"}})->header.contains("metadata"));
  }
  EXPECT_EQ(client_->call({{"op", "stat"}, {"path", "a/b/f"}})->header["error"], "ENOENT");
  // A FIFO under a file's name never blocks the agent.
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0644), 0);
  EXPECT_EQ(client_->call({{"op", "read"}, {"path", "fifo"}})->header["error"], "EINVAL");
  EXPECT_EQ(client_->call({{"op", "write"}, {"path", "fifo"}}, "x")->header["ok"], false);  // ENXIO: no reader
  // Recursive removal removes a symlink, never what it points to.
  std::filesystem::create_directory(dir_ / "keep");
  std::ofstream(dir_ / "keep" / "k") << "k";
  std::filesystem::create_directory_symlink(dir_ / "keep", dir_ / "a" / "link");
  EXPECT_EQ(client_->call({{"op", "remove"}, {"path", "a"}})->header["error"], "ENOTEMPTY");
  EXPECT_EQ(client_->call({{"op", "remove"}, {"path", "a"}, {"recursive", true}})->header["ok"], true);
  EXPECT_TRUE(std::filesystem::exists(dir_ / "keep" / "k"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "a"));

  auto w = client_->call({{"op", "watch"}, {"path", "keep"}});
  ASSERT_EQ(w->header["ok"], true) << w->header.dump();
  ASSERT_EQ(client_->call({{"op", "write"}, {"path", "keep/new"}}, "n")->header["ok"], true);
  auto e = client_->next_event();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->header["event"], "watch");
  EXPECT_EQ(e->header["name"], "new");
  EXPECT_EQ(e->header["mask"][0], "create");
}

TEST_F(AgentLoop, BadFramesGetErrorsAndTheChannelStaysUsable) {
  ASSERT_TRUE(client_->send_raw(u32(3) + "abc" + raw_frame('Q', 4, "{nope") + raw_frame('Q', 5, R"({"op":"x"})") +
                                raw_frame('Q', 6, R"({"op":"list"})")));
  for (uint32_t want : {0u, 4u, 5u}) {
    auto f = client_->next();
    ASSERT_TRUE(f);
    EXPECT_EQ(f->id, want);
    EXPECT_EQ(f->header["ok"], false);
    EXPECT_EQ(f->header["error"], "EINVAL");
  }
  auto ok = client_->next();
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->id, 6u);
  EXPECT_EQ(ok->header["ok"], true);
  // Shutdown: a reply, then the agent exits 0.
  auto s = client_->call({{"op", "shutdown"}});
  ASSERT_TRUE(s);
  int status = 0;
  ASSERT_EQ(::waitpid(pid_, &status, 0), pid_);
  pid_ = -1;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// The microVM guest's agent: the walls its init applied in the ready event,
// and the pids limit's refusals (its cgroup's pids.events, which the host
// cannot read) as "limit" events. A file stands in for pids.events here (the
// guest's real cgroup is tested in tests/integration/test_microvm.sh).
class AgentLoopInAGuest : public AgentLoop {
 protected:
  void configure(AgentConfig& cfg) override {
    std::string events = (dir_ / "pids.events").string();
    std::ofstream(events) << "max 0\n";
    cfg.walls = {{"seccomp", "the filter"}, {"pids", "limit 64"}};
    cfg.pids_events = ::open(events.c_str(), O_RDONLY | O_CLOEXEC);
    cfg.pids_notify = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (cfg.pids_events < 0 || ::inotify_add_watch(cfg.pids_notify, events.c_str(), IN_MODIFY) < 0) ::_exit(4);
    cfg.pids_max = 64;
  }
  void refused(int n) {
    int fd = ::open((dir_ / "pids.events").c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    std::string line = "max " + std::to_string(n) + "\n";  // one digit: the same length every time
    ASSERT_EQ(::pwrite(fd, line.data(), line.size(), 0), static_cast<ssize_t>(line.size()));
    ::close(fd);
  }
};

TEST_F(AgentLoopInAGuest, ReportsItsWallsAndThePidsLimitsRefusals) {
  InsideReport inside;
  ASSERT_TRUE(ready_);
  EXPECT_FALSE(inside.take(*ready_));  // the ready event is the front end's too
  EXPECT_EQ(inside.walls(), (std::vector<std::string>{"pids: limit 64", "seccomp: the filter"}));
  EXPECT_EQ(inside.pids_refused(), 0u);

  refused(3);
  auto e = client_->next_event();
  ASSERT_TRUE(e);
  EXPECT_EQ(e->header["event"], "limit");
  EXPECT_EQ(e->header["limit"], "pids");
  EXPECT_EQ(e->header["max"], 64);
  EXPECT_EQ(e->header["refused"], 3);
  EXPECT_TRUE(inside.take(*e));
  EXPECT_EQ(inside.pids_refused(), 3u);

  // 4 is not twice 3: not sent at once, but exactly before the next exit.
  refused(4);
  auto r = client_->call({{"op", "start"}, {"argv", {"true"}}, {"stdin", false}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->header["ok"], true) << r->header.dump();
  int pid = r->header["pid"];
  for (;;) {
    auto f = client_->next_event();
    ASSERT_TRUE(f);
    if (f->header["event"] == "exit" && f->header["pid"] == pid) break;
    if (inside.take(*f)) {
      EXPECT_EQ(f->header["refused"], 4);
    }
  }
  EXPECT_EQ(inside.pids_refused(), 4u);
}
