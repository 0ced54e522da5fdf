// The agent's channel protocol (docs/agent-protocol.md): length-prefixed
// frames, each a kind, a request id, a JSON header and a raw payload. Shared by
// the agent (pid 1 inside the sandbox) and its clients on the host. The reader
// is bounded: a frame past the limits is skipped byte by byte (never held in
// memory) and answered with an error; bad headers are errors, never a crash.
// Header-only dependencies (nlohmann): the static agent links none of exg_core.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace exg::agent {

// Limits (the same on both sides).
inline constexpr size_t kPrefixBytes = 4;            // u32 big-endian: bytes that follow
inline constexpr size_t kFixedBytes = 9;             // kind (1) + id (4) + header length (4)
inline constexpr size_t kMaxHeader = 64 * 1024;      // JSON header
inline constexpr size_t kMaxPayload = 1024 * 1024;   // raw bytes: stdin, file contents, output
inline constexpr size_t kMaxFrame = kFixedBytes + kMaxHeader + kMaxPayload;
inline constexpr size_t kMaxJsonDepth = 8;           // nesting of the header's arrays and objects
inline constexpr size_t kMaxArgs = 4096;             // argv entries, env entries
inline constexpr size_t kMaxString = 64 * 1024;      // one argv/env entry, a path
inline constexpr size_t kMaxProcesses = 256;         // started processes the agent tracks at once
inline constexpr size_t kMaxExited = 32;             // exited ones kept for attach
inline constexpr size_t kMaxWatches = 64;            // inotify watches
inline constexpr size_t kMaxListEntries = 10000;     // entries one `list_dir` reply carries
inline constexpr size_t kTailBytes = 64 * 1024;      // output kept per stream for attach

enum class Kind : uint8_t { Request = 'Q', Reply = 'R', Event = 'E' };

struct Frame {
  Kind kind = Kind::Request;
  uint32_t id = 0;          // request id (> 0); replies echo it; events carry 0
  nlohmann::json header;    // always an object
  std::string payload;
};

// The wire bytes of a frame. The header is serialised compactly; the caller
// keeps header and payload within the limits (encode() does not check).
std::string encode(const Frame& f);

// A bad frame: what is wrong, and the request id when it could be read (0 otherwise).
struct FrameError {
  uint32_t id = 0;
  std::string what;
};

// Incremental reader: feed() bytes as they arrive, then take frames with
// next() until it returns nothing. An error result is one bad frame (already
// consumed or being skipped); the stream goes on after it.
class FrameReader {
 public:
  void feed(const char* data, size_t n);
  struct Item {
    std::optional<Frame> frame;
    std::optional<FrameError> error;
  };
  // Nothing (both empty) when no whole frame is buffered yet.
  Item next();
  size_t buffered() const { return buf_.size() - pos_; }

 private:
  std::string buf_;
  size_t pos_ = 0;
  uint64_t skip_ = 0;  // bytes of an oversized frame still to discard
};

// Requests, validated: every op and field the agent understands, typed and
// within the limits. Unknown ops and fields, wrong types and out-of-range
// values are errors naming the field.
enum class Op {
  Start, Input, CloseStdin, Signal, Resize, List, Attach,
  Stat, ListDir, Read, Write, Mkdir, Remove, Rename, Watch, Unwatch,
  Shutdown,
};
const char* to_string(Op op);

struct Request {
  Op op = Op::List;
  uint32_t id = 0;
  // start
  std::vector<std::string> argv, env;  // env: NAME=VALUE over the sandbox's environment
  std::string cwd;                     // empty: the sandbox's working directory
  std::optional<std::string> user;     // the sandbox's own user only (name or number)
  bool pty = false;
  uint16_t rows = 24, cols = 80;
  bool stdin_open = true;
  // process ops
  int pid = 0;
  int signal = 0;
  bool group = false;  // signal: the process's whole group (it leads one: every start is setsid)
  // file ops
  std::string path, to;
  uint64_t offset = 0;
  uint64_t length = kMaxPayload;
  bool append = false, truncate = true, parents = false, recursive = false, exclusive = false;
  uint32_t mode = 0;  // write/mkdir: 0 means the default (0644 / 0755)
  int watch = 0;      // unwatch
  std::string data;   // input, write: the payload
  // write: the file's E2B metadata (user.e2b.NAME extended attributes) replaced by these
  std::optional<std::map<std::string, std::string>> metadata;
};

// A request frame -> Request, or a one-line error (the agent replies with it, errno EINVAL).
std::optional<Request> parse_request(const Frame& f, std::string* error);

// Request headers, built from typed arguments: the one place a client writes
// an op's name and field names (parse_request above is the one place that
// reads them; tests/unit/test_agent_protocol.cpp holds each encoder to it).
// A field left unset is left out of the header: the agent's default applies.
namespace request {

struct Start {
  std::vector<std::string> argv;
  std::optional<std::vector<std::string>> env;  // NAME=VALUE over the sandbox's environment
  std::optional<std::string> cwd;
  std::optional<std::string> user;
  bool pty = false;  // sent only when true
  std::optional<unsigned> rows, cols;
  bool stdin_open = true;  // always sent
};
nlohmann::json start(const Start& s);
nlohmann::json input(int pid);  // the bytes are the frame's payload
nlohmann::json close_stdin(int pid);
// `group`: the process's whole group first (sent only when true).
nlohmann::json signal(int pid, int sig, bool group = false);
nlohmann::json signal(int pid, std::string_view name, bool group = false);  // "KILL", "SIGTERM"
nlohmann::json resize(int pid, unsigned rows, unsigned cols);
nlohmann::json list();
nlohmann::json attach(int pid);
nlohmann::json stat(const std::string& path);
nlohmann::json list_dir(const std::string& path);
nlohmann::json read(const std::string& path, uint64_t offset, std::optional<uint64_t> length = std::nullopt);
struct Write {
  bool append = false, exclusive = false;  // each sent only when true
  std::optional<uint64_t> offset;
  uint32_t mode = 0;  // new files; 0: not sent (0644)
  // E2B's file metadata: the file's user.e2b.* attributes replaced by these (a write that replaces it only)
  std::optional<std::map<std::string, std::string>> metadata;
};
nlohmann::json write(const std::string& path, const Write& w = {});  // the bytes are the payload
nlohmann::json mkdir(const std::string& path, bool parents, uint32_t mode = 0);  // mode 0: not sent (0755)
nlohmann::json remove(const std::string& path, bool recursive);
nlohmann::json rename(const std::string& path, const std::string& to);
nlohmann::json watch(const std::string& path);
nlohmann::json unwatch(int watch);
nlohmann::json shutdown();

// The supervisor's own two (docs/agent-protocol.md, "The session front end"):
// answered by the session's relay, never the agent.
inline constexpr char kAuditTags[] = "audit_tags";
inline constexpr char kSetNetwork[] = "set_network";
nlohmann::json audit_tags(const std::map<std::string, std::string>& tags);
nlohmann::json set_network(const std::vector<std::string>& allow, const std::vector<std::string>& deny);

}  // namespace request

// A signal by number (1..64) or name ("TERM", "SIGTERM"); 0 when unknown.
int signal_number(const nlohmann::json& v);

// Reply and event headers.
Frame reply_ok(uint32_t id, nlohmann::json header = nlohmann::json::object(), std::string payload = {});
Frame reply_error(uint32_t id, int err, const std::string& message);
Frame event(nlohmann::json header, std::string payload = {});

// "ENOENT" for 2, ...; "E<n>" for an errno without a name here.
std::string errno_name(int err);

}  // namespace exg::agent
