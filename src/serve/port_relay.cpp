#include "serve/port_relay.hpp"

namespace exg::serve {

namespace {

// stdin is the request (the relay reads it until its end but never half-closes
// the connection: the server inside reads a request by its length, and the
// connection's end means the caller went away, which the code interpreter
// takes as an interrupt). Exit 111 with one line on stderr when nothing listens.
constexpr const char* kRelay = R"PY(import os, select, socket, sys, time
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

std::vector<std::string> port_relay_argv(const std::string& port, int wait_s) {
  // -I -S: no site packages, user paths or environment variables: a bare interpreter starts sooner.
  return {"python3", "-I", "-S", "-c", kRelay, port, std::to_string(wait_s)};
}

}  // namespace exg::serve
