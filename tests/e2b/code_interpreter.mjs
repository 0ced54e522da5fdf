// The unmodified `@e2b/code-interpreter` SDK against `exguardian serve`
// (tests/integration/test_serve_code_interpreter.sh runs it with E2B_API_URL,
// E2B_SANDBOX_URL and E2B_API_KEY pointing at the server).
//   OTHER_KEY  a second tenant's key: it must never reach the first one's port 49999
//   TEMPLATE   the template (default: none given, the SDK's own code-interpreter-v1)
//   HOST_VIEW  0: the interpreter's processes are not the host's (gVisor): not looked at from the host
// The sandbox is created with envVars (FROM_CREATE); the first runCode prints "info sandbox ID kernel PID"
// (the shell matches it with the server's log: a warm pool's kernel, started before the create).
// One line per check: "ok - ..." or "FAIL - ...: why"; exit 1 when any failed.
import assert from 'node:assert/strict'
import fs from 'node:fs'
import http from 'node:http'
import { Sandbox, TimeoutError } from '@e2b/code-interpreter'

const OTHER_KEY = process.env.OTHER_KEY
const URL = process.env.E2B_SANDBOX_URL
import { check, finish, SKIP, getByHost as getHostPage } from './checks.mjs'

const opts = { timeoutMs: 300_000, envs: { FROM_CREATE: 'at create' } }
const sb = process.env.TEMPLATE ? await Sandbox.create(process.env.TEMPLATE, opts) : await Sandbox.create(opts)

await check('runCode at once: the create\'s envVars are in the kernel (as E2B\'s envd gives them), and in a command', async () => {
  const e = await sb.runCode('import os\n(os.getpid(), os.environ.get("FROM_CREATE"))')
  assert.equal(e.error, undefined)
  const [pid, env] = e.text.replace(/[()' ]/g, '').split(',')
  console.log(`info sandbox ${sb.sandboxId} kernel ${pid}`)
  assert.equal(env, 'atcreate')
  assert.equal((await sb.commands.run('echo "$FROM_CREATE"')).stdout, 'at create\n')
})

await check('create: the SDK\'s default template, code-interpreter-v1', async () => {
  const info = await sb.getInfo()
  assert.equal(info.templateId, process.env.TEMPLATE || 'code-interpreter-v1')
})

await check('runCode: state kept between calls; the last expression is the result (text 42)', async () => {
  const a = await sb.runCode('x = 41')
  assert.equal(a.error, undefined)
  assert.deepEqual(a.results, [])
  const b = await sb.runCode('x + 1')
  assert.equal(b.error, undefined)
  assert.equal(b.text, '42')
  assert.equal(b.results.length, 1)
  assert.ok(b.results[0].isMainResult)
  assert.ok(b.executionCount > a.executionCount, `execution counts ${a.executionCount}, ${b.executionCount}`)
})

await check('runCode: print goes to stdout, sys.stderr and a subprocess\'s output too, streamed to the callbacks', async () => {
  const seen = []
  const e = await sb.runCode('import sys, subprocess\nprint("hello")\nprint("warn", file=sys.stderr)\nsubprocess.run(["echo", "from-child"])',
    { onStdout: (m) => seen.push(['out', m.line]), onStderr: (m) => seen.push(['err', m.line]) })
  assert.equal(e.error, undefined)
  assert.equal(e.logs.stdout.join(''), 'hello\nfrom-child\n')
  assert.equal(e.logs.stderr.join(''), 'warn\n')
  assert.ok(seen.some(([k, l]) => k === 'out' && l.includes('hello')) && seen.some(([k, l]) => k === 'err' && l.includes('warn')))
})

await check('runCode: an exception is an error with name, value and traceback; state survives it', async () => {
  const e = await sb.runCode('y = 1\nraise ValueError("bad value")')
  assert.equal(e.error.name, 'ValueError')
  assert.equal(e.error.value, 'bad value')
  assert.match(e.error.traceback, /ValueError: bad value/)
  assert.equal((await sb.runCode('x, y')).text, '(41, 1)')
})

await check('runCode: env vars for one execution only', async () => {
  const e = await sb.runCode('import os\nos.environ["ONLY_HERE"]', { envs: { ONLY_HERE: 'yes' } })
  assert.equal(e.text, "'yes'")
  const after = await sb.runCode('os.environ.get("ONLY_HERE", "unset"), os.environ.get("FROM_CREATE")')
  assert.equal(after.text, "('unset', 'at create')")
  const over = await sb.runCode('os.environ["FROM_CREATE"]', { envs: { FROM_CREATE: 'this run' } })
  assert.equal(over.text, "'this run'")
  assert.equal((await sb.runCode('os.environ["FROM_CREATE"]')).text, "'at create'")
})

await check('runCode: a value with _repr_html_ comes back as html too', async () => {
  const e = await sb.runCode('class T:\n    def _repr_html_(self): return "<b>t</b>"\nT()')
  assert.equal(e.results[0].html, '<b>t</b>')
  assert.ok(e.results[0].formats().includes('html'))
})

await check('JavaScript: state kept between cells, console.log to stdout, the completion value as the result, errors', async () => {
  const a = await sb.runCode('let a = 40\nconsole.log("from js")', { language: 'js' })
  assert.equal(a.error, undefined)
  assert.equal(a.logs.stdout.join(''), 'from js\n')
  assert.equal((await sb.runCode('a + 2', { language: 'js' })).text, '42')
  assert.equal((await sb.runCode('process.env.FROM_CREATE', { language: 'js' })).text, "'at create'")
  const e = await sb.runCode('null.x', { language: 'js' })
  assert.equal(e.error.name, 'TypeError')
  assert.match(e.error.traceback, /<cell>:1/)
  const ctx = await sb.createCodeContext({ language: 'js' })
  assert.equal((await sb.runCode('typeof a', { context: ctx })).text, "'undefined'")  // a context of its own
  await sb.removeCodeContext(ctx)
})

await check('contexts: create, own state, list, restart (state gone), remove', async () => {
  const ctx = await sb.createCodeContext({ cwd: '/tmp' })
  assert.equal(ctx.language, 'python')
  assert.equal(ctx.cwd, '/tmp')
  await sb.runCode('z = "in ctx"', { context: ctx })
  assert.equal((await sb.runCode('z, __import__("os").getcwd()', { context: ctx })).text, "('in ctx', '/tmp')")
  assert.equal((await sb.runCode('z')).error.name, 'NameError')  // the default context has its own namespace
  assert.ok((await sb.listCodeContexts()).some((c) => c.id === ctx.id))
  await sb.restartCodeContext(ctx)
  assert.equal((await sb.runCode('z', { context: ctx })).error.name, 'NameError')
  await sb.removeCodeContext(ctx.id)
  assert.ok(!(await sb.listCodeContexts()).some((c) => c.id === ctx.id))
})

await check('runCode: a caller that goes away interrupts the kernel (the next call is not stuck behind it; state kept)', async () => {
  await assert.rejects(sb.runCode('import time\ntime.sleep(60)', { timeoutMs: 1000 }), (e) => e instanceof TimeoutError)
  // Had the sleep gone on, this call would wait behind it for a minute and time out.
  const e = await sb.runCode('x', { timeoutMs: 20_000, requestTimeoutMs: 20_000 })
  assert.equal(e.text, '41')
})

// What the caller's credentials reach: the raw protocol, as the SDK sends it.
async function execute(headers, sandboxId = sb.sandboxId) {
  const res = await fetch(`${URL}/execute`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', 'E2b-Sandbox-Id': sandboxId, 'E2b-Sandbox-Port': '49999', ...headers },
    body: JSON.stringify({ code: 'x' }),
  })
  return [res.status, await res.text()]
}

await check('port 49999: another tenant\'s key, its sandbox\'s tokens, or none reach nothing (502, as an unknown sandbox)', async () => {
  const theirs = await Sandbox.create({ apiKey: OTHER_KEY, timeoutMs: 120_000 })
  try {
    for (const [what, h] of [['no credentials', {}], ['the other tenant\'s key', { 'X-API-KEY': OTHER_KEY }],
      ['the other sandbox\'s traffic token', { 'E2B-Traffic-Access-Token': theirs.trafficAccessToken }],
      ['the other sandbox\'s envd token', { 'X-Access-Token': theirs.envdAccessToken }]]) {
      const [status, body] = await execute(h)
      assert.equal(status, 502, `${what}: ${status} ${body}`)
      // (not /41/: the 502 names the sandbox, and a random id of 20 [a-z0-9] holds "41" about one time
      // in 70: with four tries here, about one run in 17 failed)
      assert.doesNotMatch(body, /"text"/, `${what}: ${body}`)
      assert.equal(JSON.parse(body).code, 502, body)
    }
    // And their own sandbox answers them (its own state, not ours).
    assert.equal((await theirs.runCode('"theirs"')).text, "'theirs'")
    assert.equal((await theirs.runCode('x')).error.name, 'NameError')
  } finally {
    await theirs.kill()
  }
  const [status, body] = await execute({ 'E2B-Traffic-Access-Token': sb.trafficAccessToken })
  assert.equal(status, 200, body)
  assert.match(body, /"text": "41"/)
})

await check('another port: a web server a command started is reached; a port where nothing listens is 502', async () => {
  await sb.files.write('/tmp/www/hello.txt', 'served from inside')
  await sb.commands.run('python3 -m http.server 8123 --bind 127.0.0.1 --directory /tmp/www', { background: true })
  let res
  for (let i = 0; i < 100; i++) {
    res = await fetch(`${URL}/hello.txt`, { headers: { 'E2b-Sandbox-Id': sb.sandboxId, 'E2b-Sandbox-Port': '8123', 'E2B-Traffic-Access-Token': sb.trafficAccessToken } })
    if (res.status === 200) break
    await new Promise((r) => setTimeout(r, 100))
  }
  assert.equal(res.status, 200)
  assert.equal(await res.text(), 'served from inside')
  const none = await fetch(`${URL}/`, { headers: { 'E2b-Sandbox-Id': sb.sandboxId, 'E2b-Sandbox-Port': '8124', 'E2B-Traffic-Access-Token': sb.trafficAccessToken } })
  assert.equal(none.status, 502)
  assert.match(await none.text(), /nothing listens on port 8124/)
})

// getHost(port): the host name E2B gives a port, PORT-ID.DOMAIN (the server's --domain, which the
// create answered as `domain`). The name is resolved to the server's loopback address here, as a
// DNS entry for *.DOMAIN would; the request carries it as its Host, as a browser would.
const getByHost = (host, path, headers) => getHostPage(http, URL, host, path, headers)

await check('getHost(port): PORT-ID.DOMAIN reaches the web server with the traffic token; another tenant\'s credentials and none do not', async () => {
  if (!process.env.SANDBOX_DOMAIN) throw SKIP
  const host = sb.getHost(8123)
  assert.equal(host, `8123-${sb.sandboxId}.${process.env.SANDBOX_DOMAIN}`)
  const [status, body] = await getByHost(host, '/hello.txt', { 'E2B-Traffic-Access-Token': sb.trafficAccessToken })
  assert.equal(status, 200, body)
  assert.equal(body, 'served from inside')
  const theirs = await Sandbox.create({ apiKey: OTHER_KEY, timeoutMs: 120_000 })
  try {
    for (const [what, h] of [['no credentials', {}], ['the other tenant\'s key', { 'X-API-KEY': OTHER_KEY }],
      ['the other sandbox\'s traffic token', { 'E2B-Traffic-Access-Token': theirs.trafficAccessToken }],
      ['the other sandbox\'s envd token', { 'X-Access-Token': theirs.envdAccessToken }]]) {
      const [st, b] = await getByHost(host, '/hello.txt', h)
      assert.equal(st, 502, `${what}: ${st} ${b}`)
      assert.doesNotMatch(b, /served from inside/, what)
    }
    // Their own token on their own sandbox's name reaches their sandbox, not ours (nothing listens there).
    const [st, b] = await getByHost(theirs.getHost(8123), '/hello.txt', { 'E2B-Traffic-Access-Token': theirs.trafficAccessToken })
    assert.equal(st, 502, b)
    assert.match(b, /nothing listens on port 8123/)
    // A header naming another sandbox than the Host does is refused, not followed.
    const [st2, b2] = await getByHost(host, '/hello.txt', { 'E2B-Traffic-Access-Token': sb.trafficAccessToken, 'E2b-Sandbox-Id': theirs.sandboxId })
    assert.equal(st2, 400, b2)
  } finally {
    await theirs.kill()
  }
}, 'the server runs without --domain')

await check('another port: the caller\'s credentials never reach the sandbox (a server inside echoes the headers it got)', async () => {
  const start = await sb.runCode(`import http.server, json, threading
class Echo(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = json.dumps({k.lower(): v for k, v in self.headers.items()}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a):
        pass
echo = http.server.ThreadingHTTPServer(("127.0.0.1", 8125), Echo)
threading.Thread(target=echo.serve_forever, daemon=True).start()`)
  assert.equal(start.error, undefined)
  const secrets = { 'X-API-KEY': process.env.E2B_API_KEY, 'X-Access-Token': sb.envdAccessToken, 'E2B-Traffic-Access-Token': sb.trafficAccessToken }
  for (const [name, value] of Object.entries(secrets)) {
    const res = await fetch(`${URL}/echo?q=1`, { headers: { 'E2b-Sandbox-Id': sb.sandboxId, 'E2b-Sandbox-Port': '8125', 'X-Custom': 'kept', [name]: value } })
    const body = await res.text()
    assert.equal(res.status, 200, `${name}: ${body}`)
    const got = JSON.parse(body)
    assert.equal(got['x-custom'], 'kept')
    for (const v of Object.values(secrets)) assert.ok(!body.includes(v), `${name}: a credential reached the sandbox: ${body}`)
    assert.ok(!('e2b-sandbox-id' in got) && !('e2b-sandbox-port' in got), body)
  }
})

// The interpreter on the host's side: the process whose command line names this sandbox.
function interpreterPids(id) {
  const pids = []
  for (const p of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    let cmd = ''
    try { cmd = fs.readFileSync(`/proc/${p}/cmdline`, 'latin1') } catch { continue }
    if (cmd.includes('.exg-code-interpreter.py\0') && cmd.includes(`\0--sandbox\0${id}`)) pids.push(p)
  }
  return pids
}

await check('the interpreter runs inside the sandbox (its pid namespace, not the host\'s) and ends with it', async () => {
  if (process.env.HOST_VIEW === '0') {
    const e = await sb.runCode('import os\nos.getppid()')
    assert.ok(Number(e.text) < 100, `the interpreter is pid ${e.text} inside`)
    return await sb.kill()
  }
  const inside = await sb.runCode('import os\n(os.getppid(), os.readlink("/proc/self/ns/pid"))')
  const [ppid, ns] = inside.text.replace(/[()' ]/g, '').split(',')
  const pids = interpreterPids(sb.sandboxId)
  assert.equal(pids.length, 1, `interpreter processes for ${sb.sandboxId} on the host: ${pids}`)
  assert.notEqual(ns, fs.readlinkSync('/proc/self/ns/pid'), 'the kernel is in the host\'s pid namespace')
  assert.ok(Number(ppid) < Number(pids[0]) || Number(ppid) < 100, `the kernel's parent is pid ${ppid} inside, the server is ${pids[0]} on the host`)
  const nspid = fs.readFileSync(`/proc/${pids[0]}/status`, 'utf8').match(/^NSpid:\s+(.*)$/m)[1].trim().split(/\s+/)
  assert.ok(nspid.length >= 2, `NSpid ${nspid}: not in a pid namespace of its own`)
  assert.equal(nspid[nspid.length - 1], ppid, 'the kernel\'s parent inside is the server the host sees')
  await sb.kill()
  assert.deepEqual(interpreterPids(sb.sandboxId), [], 'left running after the kill')
})

finish()
