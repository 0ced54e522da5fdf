// The code interpreter's server (code_interpreter.hpp): its Python program,
// written into the sandbox at its start, and the start itself.
#include "serve/code_interpreter.hpp"

#include <cstdlib>
#include <utility>

#include "serve/sandbox_registry.hpp"

namespace exg::serve {

namespace {

// Run as `python3 PROGRAM --port 49999 --sandbox ID` (the id only names the
// process for whoever looks at the host's process list); `PROGRAM kernel FD`
// is one context's kernel, its messages on FD.
constexpr const char* kProgram = R"PY(import ast, base64, json, os, select, signal, socket, subprocess, sys, threading, traceback, uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

KEEPALIVE_S = 10


def kernel_main():
    # One context's kernel: requests on stdin (a JSON line each), its messages
    # on fd 3; fd 1 and 2 are pipes the server reads as stdout and stderr, so
    # that what a subprocess writes is output too.
    msgs = os.fdopen(int(sys.argv[2]), "w", buffering=1)
    # An interrupt (the caller went away) is for the code running, never for the kernel's own loop.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    count = 0

    def send(m):
        msgs.write(json.dumps(m) + "\n")

    send({"type": "ready", "pid": os.getpid()})

    def formats(value):
        out = {"text": repr(value)}
        for attr, key, binary in (("_repr_html_", "html", False), ("_repr_markdown_", "markdown", False),
                                  ("_repr_svg_", "svg", False), ("_repr_png_", "png", True),
                                  ("_repr_jpeg_", "jpeg", True), ("_repr_latex_", "latex", False),
                                  ("_repr_json_", "json", False)):
            fn = getattr(value, attr, None)
            if not callable(fn):
                continue
            try:
                r = fn()
            except Exception:
                continue
            if r is None:
                continue
            if binary and isinstance(r, bytes):
                r = base64.b64encode(r).decode()
            out[key] = r
        return out

    for line in sys.stdin:
        req = json.loads(line)
        count += 1
        # The sandbox's envVars, once, at the kernel's first run after the hand-over (E2B's: envd's /envs).
        os.environ.update(req.get("sandbox_env") or {})
        saved = {}
        for k, v in (req.get("env_vars") or {}).items():
            saved[k] = os.environ.get(k)
            os.environ[k] = str(v)
        send({"type": "number_of_executions", "execution_count": count})
        try:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            tree = ast.parse(req.get("code", ""), "<cell>", "exec")
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr):
                last = ast.Expression(tree.body.pop().value)
            exec(compile(tree, "<cell>", "exec"), namespace)
            if last is not None:
                value = eval(compile(last, "<cell>", "eval"), namespace)
                if value is not None:
                    namespace["_"] = value
                    sys.stdout.flush(), sys.stderr.flush()
                    send(dict(type="result", is_main_result=True, **formats(value)))
        except BaseException as e:  # KeyboardInterrupt too: the interrupt of a client that left
            if isinstance(e, SystemExit):
                pass
            tb = traceback.format_exception(type(e), e, e.__traceback__)
            # The kernel's own frame is not the user's.
            tb = [t for t in tb if "kernel_main" not in t]
            send({"type": "error", "name": type(e).__name__, "value": str(e), "traceback": "".join(tb)})
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            try:
                sys.stdout.flush(), sys.stderr.flush()
            except Exception:
                pass
            send({"type": "done"})


# A JavaScript context's kernel (node -e JS_KERNEL FD): the same requests and messages; the
# cell runs in a vm context of its own (top-level bindings persist between cells), its
# completion value is the result, SIGINT breaks a running cell (breakOnSigint).
JS_KERNEL = r"""
const fs = require('fs'), vm = require('vm'), util = require('util'), readline = require('readline')
const fd = Number(process.argv[1])
process.on('SIGINT', () => {})
const send = (m) => fs.writeSync(fd, JSON.stringify(m) + '\n')
send({ type: 'ready', pid: process.pid })
const ctx = vm.createContext({ console, require, process, Buffer, URL, TextEncoder, TextDecoder,
  setTimeout, setInterval, clearTimeout, clearInterval, setImmediate, queueMicrotask })
let count = 0
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  const req = JSON.parse(line)
  count++
  Object.assign(process.env, req.sandbox_env || {})
  const saved = {}
  for (const [k, v] of Object.entries(req.env_vars || {})) { saved[k] = process.env[k]; process.env[k] = String(v) }
  send({ type: 'number_of_executions', execution_count: count })
  try {
    const value = vm.runInContext(req.code || '', ctx, { filename: '<cell>', breakOnSigint: true })
    if (value !== undefined) send({ type: 'result', is_main_result: true, text: util.inspect(value) })
  } catch (e) {
    const obj = e !== null && typeof e === 'object'
    send({ type: 'error', name: obj && e.name ? String(e.name) : 'Error', value: obj && 'message' in e ? String(e.message) : String(e),
           traceback: obj && e.stack ? String(e.stack).split('\n').filter((l) => !/\(node:|\[eval\]/.test(l)).join('\n') : String(e) })
  } finally {
    for (const [k, v] of Object.entries(saved)) { if (v === undefined) delete process.env[k]; else process.env[k] = v }
    send({ type: 'done' })
  }
})
"""

LANGUAGES = {"python": "python", "py": "python", "python3": "python", "js": "javascript", "javascript": "javascript"}


class Context:
    def __init__(self, language, cwd):
        self.id = str(uuid.uuid4())
        self.language = language
        self.cwd = cwd
        self.lock = threading.Lock()
        self.start()

    def start(self):
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        msg_r, msg_w = os.pipe()
        argv = [sys.executable, __file__, "kernel"] if self.language == "python" else ["node", "-e", JS_KERNEL]
        try:
            self.proc = subprocess.Popen(argv + [str(msg_w)], stdin=subprocess.PIPE, stdout=out_w,
                                         stderr=err_w, pass_fds=(msg_w,), cwd=self.cwd, start_new_session=True)
        except OSError as e:
            for fd in (out_r, err_r, msg_r):
                os.close(fd)
            raise
        finally:
            for fd in (out_w, err_w, msg_w):
                os.close(fd)
        self.out, self.err, self.msg = out_r, err_r, msg_r
        self.msg_buf = b""
        # A kernel started after the hand-over has the sandbox's envVars from its start.
        self.env_given = handed_over.is_set()
        # Up once it says so (its imports done): the first run then waits for nothing.
        while b"\n" not in self.msg_buf:
            data = os.read(msg_r, 65536) if select.select([msg_r], [], [], 60)[0] else b""
            if not data:
                self.stop()
                raise OSError("the %s kernel ended (or said nothing for 60 s) before it was ready" % self.language)
            self.msg_buf += data
        raw, self.msg_buf = self.msg_buf.split(b"\n", 1)
        self.kernel_pid = json.loads(raw).get("pid")

    def stop(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        self.proc.wait()
        for fd in (self.out, self.err, self.msg):
            os.close(fd)
        self.proc.stdin.close()

    def json(self):
        return {"id": self.id, "language": self.language, "cwd": self.cwd}


contexts = {}
defaults = {}
contexts_lock = threading.Lock()
# The hand-over (serve's line on stdin when the sandbox gets its tenant; at once when it had one
# from its start): the sandbox's envVars. A warm pool's interpreter waits for it with its default
# kernel up; no run starts before it.
handed_over = threading.Event()
sandbox_env = {}


def default_context(language):
    with contexts_lock:
        ctx = defaults.get(language)
        if ctx is None:
            ctx = Context(language, os.environ.get("HOME") or os.getcwd())
            contexts[ctx.id] = ctx
            defaults[language] = ctx
        return ctx


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def log_message(self, *args):
        pass

    def answer(self, status, body=None):
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        return json.loads(raw) if raw.strip() else {}

    def do_GET(self):
        if self.path.split("?")[0] == "/health":
            return self.answer(200, "OK")
        if self.path.split("?")[0] == "/contexts":
            with contexts_lock:
                return self.answer(200, [c.json() for c in contexts.values()])
        self.answer(404, {"error": "no such path"})

    def do_DELETE(self):
        parts = self.path.split("?")[0].strip("/").split("/")
        if len(parts) == 2 and parts[0] == "contexts":
            with contexts_lock:
                ctx = contexts.pop(parts[1], None)
                for lang, d in list(defaults.items()):
                    if d is ctx:
                        del defaults[lang]
            if ctx is None:
                return self.answer(404, {"error": "context %s not found" % parts[1]})
            ctx.stop()
            return self.answer(200)
        self.answer(404, {"error": "no such path"})

    def do_POST(self):
        parts = self.path.split("?")[0].strip("/").split("/")
        try:
            req = self.body()
        except ValueError as e:
            return self.answer(400, {"error": "the body is not JSON: %s" % e})
        if parts == ["contexts"]:
            language = LANGUAGES.get((req.get("language") or "python").lower())
            if language is None:
                return self.answer(400, {"error": "language %s: python and javascript contexts are served here" % req.get("language")})
            try:
                ctx = Context(language, req.get("cwd") or os.environ.get("HOME") or os.getcwd())
            except OSError as e:
                return self.answer(400, {"error": "language %s: its kernel does not start here: %s" % (language, e)})
            with contexts_lock:
                contexts[ctx.id] = ctx
            return self.answer(200, ctx.json())
        if len(parts) == 3 and parts[0] == "contexts" and parts[2] == "restart":
            with contexts_lock:
                ctx = contexts.get(parts[1])
            if ctx is None:
                return self.answer(404, {"error": "context %s not found" % parts[1]})
            with ctx.lock:
                ctx.stop()
                ctx.start()
            return self.answer(200)
        if parts == ["execute"]:
            return self.execute(req)
        self.answer(404, {"error": "no such path"})

    def execute(self, req):
        if req.get("context_id"):
            with contexts_lock:
                ctx = contexts.get(req["context_id"])
            if ctx is None:
                return self.answer(404, {"error": "context %s not found" % req["context_id"]})
        else:
            language = LANGUAGES.get((req.get("language") or "python").lower())
            if language is None:
                return self.answer(400, {"error": "language %s: python and javascript are served here" % req.get("language")})
            try:
                ctx = default_context(language)
            except OSError as e:
                return self.answer(400, {"error": "language %s: its kernel does not start here: %s" % (language, e)})
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson")
        self.end_headers()
        self.wfile.flush()
        client_alive = True

        def out(m):
            nonlocal client_alive
            if not client_alive:
                return
            try:
                self.wfile.write((json.dumps(m) + "\n").encode())
                self.wfile.flush()
            except OSError:
                client_alive = False

        handed_over.wait()
        with ctx.lock:
            first = {} if ctx.env_given else {"sandbox_env": sandbox_env}
            ctx.env_given = True
            line = json.dumps({"code": req.get("code", ""), "env_vars": req.get("env_vars") or {}, **first}) + "\n"
            try:
                ctx.proc.stdin.write(line.encode())
                ctx.proc.stdin.flush()
            except OSError:
                out({"type": "error", "name": "KernelDied", "value": "the context's kernel has ended (restart it)", "traceback": ""})
                return
            conn = self.connection
            interrupted = False
            while True:
                watch = [ctx.out, ctx.err, ctx.msg] + ([conn] if client_alive else [])
                ready = select.select(watch, [], [], KEEPALIVE_S)[0]
                if not ready:
                    out({"type": "keepalive"})
                    continue
                if conn in ready:
                    try:
                        gone = conn.recv(1, socket.MSG_PEEK) == b""
                    except OSError:
                        gone = True
                    if gone:  # the caller went away: interrupt the code, as Jupyter's interrupt
                        client_alive = False
                        if not interrupted:
                            interrupted = True
                            try:
                                os.kill(ctx.proc.pid, signal.SIGINT)
                            except OSError:
                                pass
                for fd, kind in ((ctx.out, "stdout"), (ctx.err, "stderr")):
                    if fd in ready:
                        data = os.read(fd, 65536)
                        if data:
                            out({"type": kind, "text": data.decode(errors="replace")})
                if ctx.msg in ready:
                    data = os.read(ctx.msg, 65536)
                    if not data:
                        out({"type": "error", "name": "KernelDied", "value": "the kernel ended", "traceback": ""})
                        break
                    ctx.msg_buf += data
                    finished = False
                    while b"\n" in ctx.msg_buf:
                        raw, ctx.msg_buf = ctx.msg_buf.split(b"\n", 1)
                        m = json.loads(raw)
                        if m["type"] == "done":
                            finished = True
                        else:
                            out(m)
                    if finished:
                        # What the code wrote before it ended is in the pipes now.
                        for fd, kind in ((ctx.out, "stdout"), (ctx.err, "stderr")):
                            while select.select([fd], [], [], 0)[0]:
                                data = os.read(fd, 65536)
                                if not data:
                                    break
                                out({"type": kind, "text": data.decode(errors="replace")})
                        break
            out({"type": "end_of_execution"})


def say(line):
    # To serve (the agent's stdout events of this process): one line each.
    os.write(1, (line + "\n").encode())


def await_hand_over(kernel):
    # Before the hand-over a kernel that ends ends the interpreter (serve replaces a warm sandbox
    # whose interpreter ended); the hand-over answers whether the kernel is alive to be handed out.
    def watch():
        kernel.proc.wait()
        if not handed_over.is_set():
            say("kernel-ended %s" % kernel.proc.returncode)
            os._exit(3)
    threading.Thread(target=watch, daemon=True).start()
    line = sys.stdin.readline()
    try:
        envs = json.loads(line).get("envs") or {}
    except ValueError:
        envs = None
    if not isinstance(envs, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in envs.items()):
        say("refused the hand-over is not {\"envs\": {NAME: VALUE}}")
        os._exit(2)
    sandbox_env.update(envs)
    os.environ.update(envs)  # kernels started from now on have them from their start
    alive = kernel.proc.poll() is None
    handed_over.set()
    say("taken" if alive else "kernel-ended %s" % kernel.proc.returncode)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "kernel":
        return kernel_main()
    port = int(sys.argv[sys.argv.index("--port") + 1]) if "--port" in sys.argv else 49999
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()  # calls wait for the hand-over
    kernel = default_context("python")  # up before the first call, before the hand-over in a warm pool
    say("ready %s" % kernel.kernel_pid)
    await_hand_over(kernel)
    threading.Event().wait()


main()
)PY";

}  // namespace

const char* code_interpreter_program() { return kProgram; }

namespace {

// Everything waiting on the interpreter gets `why`; it is no more.
void interpreter_ended(CodeInterpreter& ci, const std::string& why) {
  if (ci.ended) return;
  ci.ended = true;
  for (auto* waiter : {&ci.on_ready, &ci.on_taken})
    if (auto w = std::exchange(*waiter, nullptr)) w(why);
  if (ci.on_end) std::exchange(ci.on_end, nullptr)(why);
}

// One line of the interpreter's stdout (the program's say()).
void interpreter_said(CodeInterpreter& ci, const std::string& line) {
  if (line.starts_with("ready ")) {
    ci.ready = true;
    ci.kernel_pid = std::atoll(line.c_str() + 6);
    if (auto w = std::exchange(ci.on_ready, nullptr)) w(std::nullopt);
  } else if (line == "taken") {
    ci.taken = true;
    if (auto w = std::exchange(ci.on_taken, nullptr)) w(std::nullopt);
  } else if (line.starts_with("kernel-ended") || line.starts_with("refused")) {
    const std::string why = "the code interpreter's kernel ended (" + line + ")";
    for (auto* waiter : {&ci.on_ready, &ci.on_taken})
      if (auto w = std::exchange(*waiter, nullptr)) w(why);
  }
}

}  // namespace

void start_code_interpreter(const std::shared_ptr<Sandbox>& sb, std::function<void(std::optional<std::string> error)> ready,
                            std::function<void(const std::string& why)> ended) {
  if (!sb->agent) return ready("the sandbox has no agent");
  auto ci = std::make_shared<CodeInterpreter>();
  ci->on_ready = std::move(ready);
  ci->on_end = std::move(ended);
  sb->interpreter = ci;
  auto fail = [ci](const std::string& why) {
    ci->on_end = nullptr;  // never started: only its start is told
    interpreter_ended(*ci, why);
  };
  agent::request::Write w{.mode = 0500};
  sb->agent->call(agent::request::write(kCodeInterpreterPath, w), kProgram, [sb, ci, fail](const agent::Frame& r) {
    if (!r.header.value("ok", false)) return fail("write " + std::string(kCodeInterpreterPath) + ": " + reply_error_text(r));
    // stdin open: the hand-over's line goes there.
    agent::request::Start h{.argv = {"python3", kCodeInterpreterPath, "--port", kCodeInterpreterPort, "--sandbox", sb->id}};
    sb->agent->call(agent::request::start(h), {}, [sb, ci, fail](const agent::Frame& s) {
      if (!s.header.value("ok", false))
        return fail("start python3 " + std::string(kCodeInterpreterPath) + ": " + reply_error_text(s) +
                    (reply_errno(s) == "ENOENT" ? " (the code interpreter needs python3 in the sandbox)" : ""));
      ci->pid = s.header.value("pid", 0);
      std::weak_ptr<CodeInterpreter> weak = ci;
      sb->agent->subscribe_process(ci->pid, [weak](const agent::Frame& f) {
        auto c = weak.lock();
        if (!c) return;
        const std::string ev = f.header.value("event", "");
        if (ev == "stdout") {
          c->partial += f.payload;
          for (size_t nl; (nl = c->partial.find('\n')) != std::string::npos;) {
            std::string line = c->partial.substr(0, nl);
            c->partial.erase(0, nl + 1);
            interpreter_said(*c, line);
          }
          if (c->partial.size() > 4096) c->partial.clear();
        } else if (ev == "exit") {
          interpreter_ended(*c, "the code interpreter ended (status " + f.header.value("status", nlohmann::json()).dump() + ")");
        } else if (ev == "closed") {
          interpreter_ended(*c, "the sandbox's agent went away");
        }
      });
    });
  });
}

void hand_over_code_interpreter(const std::shared_ptr<Sandbox>& sb, std::function<void(std::optional<std::string> error)> done) {
  auto ci = sb->interpreter;
  if (!ci || ci->ended || !ci->ready || !sb->agent) return done("the code interpreter is not running");
  if (ci->taken || ci->on_taken) return done("the code interpreter was handed over already");
  ci->on_taken = std::move(done);
  nlohmann::json envs = nlohmann::json::object();
  for (const auto& [k, v] : sb->env_vars) envs[k] = v;
  sb->agent->call(agent::request::input(ci->pid), nlohmann::json{{"envs", envs}}.dump() + "\n", [ci](const agent::Frame& r) {
    if (r.header.value("ok", false)) return;
    if (auto w = std::exchange(ci->on_taken, nullptr)) w("the hand-over to the code interpreter: " + reply_error_text(r));
  });
}

}  // namespace exg::serve
