#include "serve/port_relay.hpp"

#include "serve/sandbox_registry.hpp"

namespace exg::serve {

namespace {

// stdin is the request (the relay reads it until its end but never half-closes
// the connection: the server inside reads a request by its length, and the
// connection's end means the caller went away, which the code interpreter
// takes as an interrupt). Exit 111 with one line on stderr when nothing listens.
// A spare (port "-", started ahead so that a request does not wait for
// python3's start) reads "PORT WAIT\n" from stdin first.
constexpr const char* kRelay = R"PY(import os, select, socket, sys, time
if sys.argv[1] == "-":
    head = b""
    while not head.endswith(b"\n"):
        c = os.read(0, 1)
        if not c:
            sys.exit(0)
        head += c
    port, wait = int(head.split()[0]), float(head.split()[1])
else:
    port, wait = int(sys.argv[1]), float(sys.argv[2])
give_up = time.monotonic() + wait
s = None
while s is None:
    err = None
    for host in ("127.0.0.1", "::1"):
        try:
            s = socket.create_connection((host, port))
            break
        except OSError as e:
            err = e
    if s is None:
        if time.monotonic() >= give_up:
            sys.stderr.write("nothing listens on port %d in the sandbox (%s)\n" % (port, err.strerror or err))
            sys.exit(111)
        time.sleep(0.02)
watch = [0, s]
while True:
    ready = select.select(watch, [], [])[0]
    if 0 in ready:
        data = os.read(0, 65536)
        if data:
            s.sendall(data)
        else:
            watch.remove(0)
    if s in ready:
        try:
            data = s.recv(65536)
        except OSError:
            data = b""
        if not data:
            break
        view = memoryview(data)
        while view:
            view = view[os.write(1, view):]
)PY";

}  // namespace

std::string spare_relay_head(const std::string& port, int wait_s) { return port + " " + std::to_string(wait_s) + "\n"; }

std::vector<std::string> spare_relay_argv() { return {"python3", "-I", "-S", "-c", kRelay, "-"}; }

void keep_spare_relay(const std::shared_ptr<Sandbox>& sb) {
  if (!sb->agent || !sb->agent->open() || sb->killing) return;
  std::weak_ptr<Sandbox> weak = sb;
  sb->agent->call(agent::request::start({.argv = spare_relay_argv()}), {}, [weak](const agent::Frame& r) {
    auto s = weak.lock();
    if (!s || !r.header.value("ok", false) || !s->agent) return;  // none: requests start their own
    const int pid = r.header.value("pid", 0);
    s->spare_relay = pid;
    auto token = std::make_shared<uint64_t>(0);
    *token = s->agent->subscribe_process(pid, [weak, pid, token](const agent::Frame& f) {
      const std::string ev = f.header.value("event", "");
      if (ev != "exit" && ev != "closed") return;
      auto s2 = weak.lock();
      if (!s2) return;
      if (s2->spare_relay == pid) s2->spare_relay = 0;
      if (s2->agent) s2->agent->unsubscribe(*token);
    });
  });
}

std::vector<std::string> port_relay_argv(const std::string& port, int wait_s) {
  // -I -S: no site packages, user paths or environment variables: a bare interpreter starts sooner.
  return {"python3", "-I", "-S", "-c", kRelay, port, std::to_string(wait_s)};
}

}  // namespace exg::serve
