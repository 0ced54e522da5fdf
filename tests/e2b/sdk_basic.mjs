// The unmodified `e2b` SDK against `exguardian serve` (tests/integration/test_serve.sh runs
// it with E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY pointing at the server).
//   OTHER_KEY     a second tenant's key (isolation both ways)
//   TEMPLATE      the template to create sandboxes from (default base)
//   EXPECT_PAUSE  1: pause/resume must work (the server has the sandbox's freezer cgroup)
// One line per check: "ok - ..." or "FAIL - ...: why"; exit 1 when any failed.
import assert from 'node:assert/strict'
import { Sandbox, CommandExitError, TimeoutError, NotFoundError, SandboxError } from 'e2b'

const TEMPLATE = process.env.TEMPLATE || 'base'
const OTHER_KEY = process.env.OTHER_KEY
import { SKIP, check as checkOr, finish } from './checks.mjs'
// (the one check that skips: pause needs the sandbox's freezer cgroup)
const check = (name, fn) => checkOr(name, fn, 'this server has no freezer cgroup for its sandboxes')
async function rejects(p, pred, what) {
  try {
    await p
  } catch (e) {
    if (!pred(e)) throw new Error(`${what}: wrong error ${e && e.name}: ${e && e.message}`)
    return e
  }
  throw new Error(`${what}: did not fail`)
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))

const tag = `t${Date.now()}`
const sb = await Sandbox.create(TEMPLATE, { metadata: { suite: tag, role: 'main' }, envs: { FROM_CREATE: 'created-env' }, timeoutMs: 300_000 })
const other = await Sandbox.create(TEMPLATE, { metadata: { suite: tag, role: 'second' }, timeoutMs: 300_000 })

await check('create: sandbox ids, info with metadata and state', async () => {
  assert.match(sb.sandboxId, /^[a-z0-9]{20}$/)
  const info = await sb.getInfo()
  assert.equal(info.sandboxId, sb.sandboxId)
  assert.equal(info.templateId, TEMPLATE)
  assert.deepEqual(info.metadata, { suite: tag, role: 'main' })
  assert.equal(info.state, 'running')
  assert.ok(info.endAt > info.startedAt)
})

await check('list: filtered by metadata and state', async () => {
  const items = await Sandbox.list({ query: { metadata: { suite: tag, role: 'main' } } }).nextItems()
  assert.deepEqual(items.map((s) => s.sandboxId), [sb.sandboxId])
  const both = await Sandbox.list({ query: { metadata: { suite: tag } } }).nextItems()
  assert.equal(both.length, 2)
  const paused = await Sandbox.list({ query: { metadata: { suite: tag }, state: ['paused'] } }).nextItems()
  assert.equal(paused.length, 0)
})

await check('list: paginated (limit 1, then the next token)', async () => {
  const pg = Sandbox.list({ query: { metadata: { suite: tag } }, limit: 1 })
  const first = await pg.nextItems()
  assert.equal(first.length, 1)
  assert.ok(pg.hasNext)
  const second = await pg.nextItems()
  assert.equal(second.length, 1)
  assert.notEqual(first[0].sandboxId, second[0].sandboxId)
  assert.ok(!pg.hasNext)
})

await check('run: stdout, stderr, exit code 0', async () => {
  const r = await sb.commands.run('echo out-line; echo err-line >&2')
  assert.equal(r.exitCode, 0)
  assert.equal(r.stdout, 'out-line\n')
  assert.equal(r.stderr, 'err-line\n')
})

await check('run: non-zero exit is CommandExitError with its output', async () => {
  const e = await rejects(sb.commands.run('echo before; exit 7'), (e) => e instanceof CommandExitError, 'exit 7')
  assert.equal(e.exitCode, 7)
  assert.equal(e.stdout, 'before\n')
})

await check('run: default cwd is the home, user is unprivileged, envs from create and from run', async () => {
  const r = await sb.commands.run('pwd; echo "$HOME"; id -u; echo "$FROM_CREATE"; echo "$FROM_RUN"', { envs: { FROM_RUN: 'run-env' } })
  const [pwd, home, uid, e1, e2] = r.stdout.trim().split('\n')
  assert.equal(pwd, home)
  assert.notEqual(uid, '0')
  assert.equal(e1, 'created-env')
  assert.equal(e2, 'run-env')
})

await check('the sandbox as E2B users know it: user `user`, home /home/user (issue 44; not yet on the microVM)', async () => {
  if (process.env.EXG_LAYER === 'microvm') return
  // /home listed by python: gVisor's statx answers EINVAL on this host, so ls fails there on any path.
  const r = await sb.commands.run('whoami; id -un; echo "$HOME"; pwd; echo "$USER"; getent passwd user | cut -d: -f6; python3 -c "import os; print(*sorted(os.listdir(\'/home\')))"')
  assert.deepEqual(r.stdout.trim().split('\n'), ['user', 'user', '/home/user', '/home/user', 'user', '/home/user', 'user'])
  const w = await sb.files.write('e2b-home.txt', 'at home')
  assert.equal(w.path, '/home/user/e2b-home.txt')
  assert.equal((await sb.commands.run('cat /home/user/e2b-home.txt')).stdout, 'at home')
  await sb.files.write('/home/user/e2b-abs.txt', 'absolute')
  assert.equal((await sb.commands.run('cat e2b-abs.txt')).stdout, 'absolute')
  assert.equal((await sb.commands.run('pwd', { cwd: '/home/user' })).stdout.trim(), '/home/user')
  if (process.env.STATE_DIR) {  // the host's path of the home is not in the sandbox's view
    const host = `${process.env.STATE_DIR}/sandboxes/${sb.sandboxId}/home`
    const h = await sb.commands.run(`test -e ${host}/e2b-home.txt && echo seen || echo absent`)
    assert.equal(h.stdout.trim(), 'absent')
  }
})

await check('run: cwd option', async () => {
  await sb.files.makeDir('sub/dir')
  const r = await sb.commands.run('pwd', { cwd: 'sub/dir' })
  assert.match(r.stdout.trim(), /\/sub\/dir$/)
})

await check('run: stdin written, then closed', async () => {
  const h = await sb.commands.run('cat; echo done', { background: true, stdin: true })
  await sb.commands.sendStdin(h.pid, 'through-stdin\n')
  await sb.commands.closeStdin(h.pid)
  const r = await h.wait()
  assert.equal(r.stdout, 'through-stdin\ndone\n')
})

await check('run: timeout kills the command', async () => {
  const t0 = Date.now()
  await rejects(sb.commands.run('sleep 30; echo never > late.txt', { timeoutMs: 1500 }), (e) => e instanceof TimeoutError || /deadline|timeout/i.test(e.message), 'timeout')
  assert.ok(Date.now() - t0 < 15000)
  // The client gives up at its deadline; the server kills at its own, a moment later.
  let running = true
  for (let i = 0; i < 30 && running; i++) {
    running = (await sb.commands.list()).some((p) => p.args.join(' ').includes('sleep 30'))
    if (running) await sleep(100)
  }
  assert.ok(!running, 'the command still runs')
})

await check('background: list, connect again, kill', async () => {
  const h = await sb.commands.run('echo started; sleep 60', { background: true, timeoutMs: 0 })
  const ps = await sb.commands.list()
  const mine = ps.find((p) => p.pid === h.pid)
  assert.ok(mine, 'listed')
  assert.equal(mine.cmd, '/bin/bash')
  await h.disconnect()
  const again = await sb.commands.connect(h.pid, { timeoutMs: 0 })
  assert.ok(await sb.commands.kill(h.pid))
  const e = await rejects(again.wait(), (e) => e instanceof CommandExitError, 'killed')
  assert.equal(e.exitCode, -1)
  const after = await sb.commands.list()
  assert.ok(!after.some((p) => p.pid === h.pid))
  assert.equal(await sb.commands.kill(h.pid), false)
})

await check('pty: output, input, resize, exit', async () => {
  let out = ''
  const dec = new TextDecoder()
  const h = await sb.pty.create({ cols: 80, rows: 24, onData: (d) => { out += dec.decode(d) }, timeoutMs: 30000 })
  await sb.pty.sendInput(h.pid, new TextEncoder().encode('stty size; echo pty-$((6*7))\n'))
  for (let i = 0; i < 50 && !out.includes('pty-42'); i++) await sleep(100)
  assert.ok(out.includes('24 80'), `size in: ${JSON.stringify(out.slice(-200))}`)
  await sb.pty.resize(h.pid, { cols: 100, rows: 30 })
  await sb.pty.sendInput(h.pid, new TextEncoder().encode('stty size; exit 3\n'))
  const e = await rejects(h.wait(), (e) => e instanceof CommandExitError, 'exit 3')
  assert.equal(e.exitCode, 3)
  assert.ok(out.includes('30 100'), `resized: ${JSON.stringify(out.slice(-200))}`)
})

await check('files: write and read text and bytes', async () => {
  const info = await sb.files.write('notes/a.txt', 'hello file')
  assert.equal(info.name, 'a.txt')
  assert.match(info.path, /\/notes\/a\.txt$/)
  assert.equal(await sb.files.read('notes/a.txt'), 'hello file')
  const bytes = new Uint8Array(3 * 1024 * 1024 + 17).map((_, i) => (i * 7) & 255)
  await sb.files.write('big.bin', bytes)
  const back = await sb.files.read('big.bin', { format: 'bytes' })
  assert.equal(back.length, bytes.length)
  assert.ok(Buffer.from(back).equals(Buffer.from(bytes)))
  const r = await sb.commands.run('cat notes/a.txt; wc -c < big.bin')  // (no stat(1): its statx fails under gVisor)
  assert.equal(r.stdout, `hello file${bytes.length}\n`)
})

await check('files: list, makeDir, rename, remove, exists, getInfo', async () => {
  assert.equal(await sb.files.makeDir('d1'), true)
  assert.equal(await sb.files.makeDir('d1'), false)
  await sb.files.write('d1/f.txt', 'x')
  const list = await sb.files.list('d1')
  assert.deepEqual(list.map((e) => [e.name, e.type]), [['f.txt', 'file']])
  const info = await sb.files.getInfo('d1')
  assert.equal(info.type, 'dir')
  const moved = await sb.files.rename('d1/f.txt', 'd2/g.txt')
  assert.equal(moved.name, 'g.txt')
  assert.equal(await sb.files.exists('d1/f.txt'), false)
  assert.equal(await sb.files.exists('d2/g.txt'), true)
  await sb.files.remove('d2')
  assert.equal(await sb.files.exists('d2'), false)
  await rejects(sb.files.read('no/such/file'), (e) => e instanceof NotFoundError, 'missing file')
  await rejects(sb.files.getInfo('no-such'), (e) => e instanceof NotFoundError, 'missing entry')
})

await check('files: watchDir events', async () => {
  await sb.files.makeDir('watched')
  const events = []
  const w = await sb.files.watchDir('watched', (e) => events.push(`${e.type}:${e.name}`))
  await sb.files.write('watched/new.txt', 'a')
  await sb.commands.run('rm watched/new.txt')
  for (let i = 0; i < 30 && !events.includes('remove:new.txt'); i++) await sleep(100)
  await w.stop()
  assert.ok(events.includes('create:new.txt'), events.join(','))
  assert.ok(events.includes('remove:new.txt'), events.join(','))
})

await check('files: the sandbox own view only (.., absolute paths, another sandbox\'s home)', async () => {
  await other.files.write('secret.txt', 'other-secret')
  // Its home as the host sees it (inside, every sandbox's home is /home/user).
  const otherHome = process.env.STATE_DIR ? `${process.env.STATE_DIR}/sandboxes/${other.sandboxId}/home` : (await other.commands.run('pwd')).stdout.trim()
  await rejects(sb.files.read(`${otherHome}/secret.txt`), (e) => e instanceof NotFoundError || e instanceof SandboxError, 'absolute')
  const depth = otherHome.split('/').length
  await rejects(sb.files.read(`${'../'.repeat(depth)}${otherHome.slice(1)}/secret.txt`), (e) => e instanceof NotFoundError || e instanceof SandboxError, 'dotdot')
  const r = await sb.commands.run(`cat ${otherHome}/secret.txt 2>&1; true`)
  assert.ok(!r.stdout.includes('other-secret'), r.stdout)
  await rejects(sb.files.read('/etc/shadow'), (e) => !/root:/.test(String(e.message)), 'shadow')
  await rejects(sb.files.write('/etc/exg-serve-test', 'x'), (e) => e instanceof SandboxError, 'write outside the home')
})

await check('user root is refused with a clear error', async () => {
  await rejects(sb.commands.run('id', { user: 'root' }), (e) => /root/.test(e.message) && /host's kernel|allowRoot/.test(e.message), 'root')
})

await check('another tenant: not found, both ways', async () => {
  assert.ok(OTHER_KEY, 'OTHER_KEY set')
  await rejects(Sandbox.getInfo(sb.sandboxId, { apiKey: OTHER_KEY }), (e) => e instanceof NotFoundError, 'getInfo')
  await rejects(Sandbox.connect(sb.sandboxId, { apiKey: OTHER_KEY }), (e) => e instanceof NotFoundError, 'connect')
  assert.equal(await Sandbox.kill(sb.sandboxId, { apiKey: OTHER_KEY }), false)
  const theirs = await Sandbox.list({ apiKey: OTHER_KEY, query: { metadata: { suite: tag } } }).nextItems()
  assert.equal(theirs.length, 0)
  const mine = await Sandbox.create(TEMPLATE, { apiKey: OTHER_KEY, metadata: { suite: tag } })
  await rejects(Sandbox.getInfo(mine.sandboxId), (e) => e instanceof NotFoundError, 'the other way')
  assert.equal((await mine.commands.run('echo theirs')).stdout, 'theirs\n')
  await mine.kill()
})

await check('metrics: cpu and memory of the sandbox', async () => {
  await sb.commands.run('head -c 20000000 /dev/zero | md5sum')
  const m = await sb.getMetrics()
  assert.ok(m.length >= 1)
  assert.ok(m[0].memTotal > 0)
  assert.ok(m[0].cpuCount >= 1)
})

await check('pause and resume (connect): processes and files kept', async () => {
  if (process.env.EXPECT_PAUSE !== '1') throw SKIP
  // (written aside and renamed: a read between `>`'s truncation and its write saw an empty file, 0)
  const h = await sb.commands.run('i=0; while true; do i=$((i+1)); echo $i > counter.new; mv counter.new counter; sleep 0.1; done', { background: true, timeoutMs: 0 })
  await sleep(500)
  await sb.pause()
  assert.equal((await sb.getInfo()).state, 'paused')
  const items = await Sandbox.list({ query: { metadata: { suite: tag, role: 'main' }, state: ['paused'] } }).nextItems()
  assert.equal(items.length, 1)
  const again = await Sandbox.connect(sb.sandboxId)
  assert.equal((await again.getInfo()).state, 'running')
  const a = Number(await again.files.read('counter'))
  await sleep(600)
  const b = Number(await again.files.read('counter'))
  assert.ok(b > a, `the loop goes on after resume (${a} -> ${b})`)
  await again.commands.kill(h.pid)
})

// E2B's lifecycle (the SDK's create option, issue 44): onTimeout 'pause' pauses at the timeout instead
// of killing; autoResume: the owner's next request resumes it, never another tenant's.
const COUNTER = 'i=0; while true; do i=$((i+1)); echo $i > counter.new; mv counter.new counter; sleep 0.1; done'
async function pausedByTimeout(s) {
  let state
  for (let i = 0; i < 150 && state !== 'paused'; i++) {
    await sleep(200)
    state = (await Sandbox.getInfo(s.sandboxId)).state
  }
  assert.equal(state, 'paused', 'paused at its timeout, not killed')
}

await check('lifecycle onTimeout pause + autoResume: paused at its timeout, processes kept; the owner\'s request resumes it, another tenant\'s does not', async () => {
  if (process.env.EXPECT_PAUSE !== '1') throw SKIP
  const s = await Sandbox.create(TEMPLATE, { metadata: { suite: tag, role: 'autopause' }, timeoutMs: 5_000, lifecycle: { onTimeout: 'pause', autoResume: true } })
  try {
    assert.deepEqual((await s.getInfo()).lifecycle, { onTimeout: 'pause', autoResume: true })
    const h = await s.commands.run(COUNTER, { background: true, timeoutMs: 0 })
    await pausedByTimeout(s)
    const theirs = await fetch(`${process.env.E2B_SANDBOX_URL}/files?path=counter`, { headers: { 'E2b-Sandbox-Id': s.sandboxId, 'X-API-KEY': OTHER_KEY } })
    assert.equal(theirs.status, 502, 'another tenant\'s key reaches nothing')
    assert.equal((await Sandbox.getInfo(s.sandboxId)).state, 'paused', 'another tenant\'s request resumed it')
    const a = Number(await s.files.read('counter'))
    assert.equal((await s.getInfo()).state, 'running', 'resumed by the read')
    await sleep(600)
    const b = Number(await s.files.read('counter'))
    assert.ok(b > a, `the loop goes on after the resume (${a} -> ${b})`)
    assert.ok((await s.commands.list()).some((p) => p.pid === h.pid), 'the loop is the process started before the pause')
    // Its timeout runs again from the resume: paused again, not killed.
    await pausedByTimeout(s)
    // A signed download URL (the SDK's downloadUrl: no sandbox id in it) resumes it too.
    const res = await fetch(await s.downloadUrl('counter', { useSignatureExpiration: 30_000 }))
    assert.equal(res.status, 200, await res.clone().text())
    assert.match(await res.text(), /^\d+\n$/)
    assert.equal((await Sandbox.getInfo(s.sandboxId)).state, 'running', 'resumed by the signed URL')
  } finally {
    await s.kill()
  }
})

await check('lifecycle onTimeout pause without autoResume: paused at its timeout, a command refused until connect resumes it', async () => {
  if (process.env.EXPECT_PAUSE !== '1') throw SKIP
  const s = await Sandbox.create(TEMPLATE, { metadata: { suite: tag, role: 'autopause2' }, timeoutMs: 3_000, lifecycle: { onTimeout: 'pause' } })
  try {
    assert.deepEqual((await s.getInfo()).lifecycle, { onTimeout: 'pause', autoResume: false })
    await s.files.write('kept.txt', 'before the pause')
    await pausedByTimeout(s)
    await rejects(s.files.read('kept.txt', { requestTimeoutMs: 10_000 }), (e) => e instanceof Error, 'a read of the paused sandbox')
    assert.equal((await Sandbox.getInfo(s.sandboxId)).state, 'paused', 'a request resumed it without autoResume')
    const again = await Sandbox.connect(s.sandboxId, { timeoutMs: 60_000 })
    assert.equal(await again.files.read('kept.txt'), 'before the pause')
  } finally {
    await s.kill()
  }
})

await check('lifecycle autoResume: a request for a port of the paused sandbox (its traffic token) resumes it and is answered', async () => {
  if (process.env.EXPECT_PAUSE !== '1') throw SKIP
  const s = await Sandbox.create(TEMPLATE, { metadata: { suite: tag, role: 'autopause3' }, timeoutMs: 5_000, lifecycle: { onTimeout: 'pause', autoResume: true } })
  try {
    await s.files.write('www/index.html', 'served after the resume')
    await s.commands.run('python3 -m http.server 8131 --bind 127.0.0.1 --directory www', { background: true, timeoutMs: 0 })
    const get = () => fetch(`${process.env.E2B_SANDBOX_URL}/index.html`,
      { headers: { 'E2b-Sandbox-Id': s.sandboxId, 'E2b-Sandbox-Port': '8131', 'E2B-Traffic-Access-Token': s.trafficAccessToken } })
    for (let i = 0; i < 100 && (await get()).status !== 200; i++) await sleep(100)
    await pausedByTimeout(s)
    const res = await get()
    assert.equal(res.status, 200)
    assert.equal(await res.text(), 'served after the resume')
    assert.equal((await Sandbox.getInfo(s.sandboxId)).state, 'running', 'resumed by the port request')
  } finally {
    await s.kill()
  }
})

await check('lifecycle: the SDK\'s own refusal (autoResume without pause) and the default (kill)', async () => {
  await rejects(Sandbox.create(TEMPLATE, { lifecycle: { onTimeout: 'kill', autoResume: true } }), (e) => /autoResume/.test(e.message), 'autoResume with kill')
  assert.deepEqual((await sb.getInfo()).lifecycle, { onTimeout: 'kill', autoResume: false })
})

await check('8 sandboxes at once, each running a command', async () => {
  const many = await Promise.all(Array.from({ length: 8 }, (_, i) =>
    Sandbox.create(TEMPLATE, { apiKey: OTHER_KEY, metadata: { suite: tag, role: `many${i}` } })))
  assert.equal(new Set(many.map((s) => s.sandboxId)).size, 8)
  const outs = await Promise.all(many.map((s, i) => s.commands.run(`echo n${i}; id -u`)))
  outs.forEach((r, i) => assert.equal(r.stdout.split('\n')[0], `n${i}`))
  // each its own uid where the layer picks one (the process layer does)
  if (process.env.EXPECT_OWN_UIDS === '1') assert.equal(new Set(outs.map((r) => r.stdout.split('\n')[1])).size, 8)
  assert.deepEqual(await Promise.all(many.map((s) => s.kill())), Array(8).fill(true))
})

await check('setTimeout: expiry kills the sandbox', async () => {
  const s = await Sandbox.create(TEMPLATE, { metadata: { suite: tag, role: 'short' } })
  await s.setTimeout(2000)
  const endAt = (await s.getInfo()).endAt
  assert.ok(endAt.getTime() - Date.now() < 3000)
  await sleep(4000)
  await rejects(s.getInfo(), (e) => e instanceof NotFoundError, 'expired')
})

await check('kill: gone from get and list', async () => {
  assert.equal(await other.kill(), true)
  await rejects(Sandbox.getInfo(other.sandboxId), (e) => e instanceof NotFoundError, 'killed')
  const items = await Sandbox.list({ query: { metadata: { suite: tag } } }).nextItems()
  assert.deepEqual(items.map((s) => s.sandboxId), [sb.sandboxId])
  await sb.kill()
  assert.equal(await Sandbox.kill(sb.sandboxId), false)
})

finish()
