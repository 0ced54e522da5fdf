// envd's behaviour where E2B's own SDK tests expect it (issue 44, part 2), driven by the
// unmodified `e2b` SDK against `exguardian serve` (tests/integration/test_serve_code_interpreter.sh
// runs it on the server it already has: E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY).
// Two `base` sandboxes: one for the checks, a second one (newer) for the list order, then
// killed while a command runs.
// One line per check: "ok - ..." or "FAIL - ...: why"; exit 1 when any failed.
import assert from 'node:assert/strict'
import { Sandbox, TimeoutError, FilesystemEventType } from 'e2b'

let failed = 0, passed = 0
async function check(name, fn) {
  try {
    await fn()
    passed++
    console.log(`ok   - ${name}`)
  } catch (e) {
    failed++
    console.log(`FAIL - ${name}: ${e && e.stack ? e.stack.split('\n').slice(0, 3).join(' | ') : e}`)
  }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms))
async function until(what, pred) {
  for (let i = 0; i < 100 && !pred(); i++) await sleep(100)
  assert.ok(pred(), what)
}

const tag = `envd${Date.now()}`
const sb = await Sandbox.create('base', { metadata: { suite: tag }, timeoutMs: 300_000 })
await sleep(20) // two different start times, in milliseconds
const late = await Sandbox.create('base', { metadata: { suite: tag }, timeoutMs: 300_000 })

await check('files: a relative path is under /home/user; a listing is in path order', async () => {
  for (const n of ['zeta', 'alpha', 'mid']) await sb.files.write(`sorted/${n}.txt`, n)
  await sb.files.makeDir('sorted/beta')
  const w = await sb.files.write('sorted/gamma.txt', 'g')
  assert.equal(w.path, '/home/user/sorted/gamma.txt')
  const names = (await sb.files.list('sorted')).map((e) => e.name)
  assert.deepEqual(names, ['alpha.txt', 'beta', 'gamma.txt', 'mid.txt', 'zeta.txt'])
})

await check('files: removing a path that is not there succeeds (RemoveAll)', async () => {
  await sb.files.remove('never-was-here.txt')
  assert.equal(await sb.files.exists('never-was-here.txt'), false)
})

await check('files: a symlink\'s info carries its resolved, absolute target', async () => {
  await sb.files.write('target.txt', 't')
  await sb.commands.run('ln -s target.txt link.txt && ln -s link.txt link2.txt')
  const info = await sb.files.getInfo('link2.txt')
  assert.equal(info.name, 'link2.txt')
  assert.equal(info.symlinkTarget, '/home/user/target.txt')
})

await check('files: gzip upload and download (Content-Encoding), and a plain read of a gzip upload', async () => {
  const text = 'compressed '.repeat(500)
  const info = await sb.files.write('gz.txt', text, { gzip: true })
  assert.equal(info.path, '/home/user/gz.txt')
  assert.equal(await sb.files.read('gz.txt', { gzip: true }), text)
  assert.equal(await sb.files.read('gz.txt'), text)
  assert.equal((await sb.commands.run('wc -c < gz.txt')).stdout.trim(), String(text.length))
  // A body that is not gzip is refused, not stored.
  const r = await fetch(`${process.env.E2B_SANDBOX_URL}/files?path=bad.gz`, {
    method: 'POST',
    headers: { 'E2b-Sandbox-Id': sb.sandboxId, 'X-API-KEY': process.env.E2B_API_KEY, 'Content-Type': 'application/octet-stream', 'Content-Encoding': 'gzip' },
    body: 'not gzip at all',
  })
  assert.equal(r.status, 400)
  assert.equal(await sb.files.exists('bad.gz'), false)
})

await check('files: a recursive watch sees nested changes, and directories made after it started', async () => {
  await sb.files.makeDir('watched/nested')
  const events = []
  const h = await sb.files.watchDir('watched', (e) => events.push(`${e.type}:${e.name}`), { recursive: true })
  await sb.files.write('watched/nested/f.txt', 'x')
  await until(`nested write: ${events}`, () => events.includes(`${FilesystemEventType.WRITE}:nested/f.txt`))
  await sb.files.makeDir('watched/later')
  await until(`new dir: ${events}`, () => events.includes(`${FilesystemEventType.CREATE}:later`))
  await sb.files.write('watched/later/g.txt', 'y')
  await until(`write in the new dir: ${events}`, () => events.includes(`${FilesystemEventType.WRITE}:later/g.txt`))
  await h.stop()
})

await check('list: newest first; order asc; startedAfter; template (none silently ignored)', async () => {
  const ids = (items) => items.map((s) => s.sandboxId)
  assert.deepEqual(ids(await Sandbox.list({ query: { metadata: { suite: tag } } }).nextItems()), [late.sandboxId, sb.sandboxId])
  assert.deepEqual(ids(await Sandbox.list({ query: { metadata: { suite: tag } }, order: 'asc' }).nextItems()), [sb.sandboxId, late.sandboxId])
  const info = await late.getInfo()
  assert.deepEqual(ids(await Sandbox.list({ query: { metadata: { suite: tag }, startedAfter: info.startedAt } }).nextItems()), [late.sandboxId])
  assert.deepEqual(ids(await Sandbox.list({ query: { metadata: { suite: tag }, startedAfter: new Date(info.startedAt.getTime() + 1000) } }).nextItems()), [])
  assert.equal((await Sandbox.list({ query: { metadata: { suite: tag }, template: 'base' } }).nextItems()).length, 2)
  assert.equal((await Sandbox.list({ query: { metadata: { suite: tag }, template: 'no-such-template' } }).nextItems()).length, 0)
  const bad = await fetch(`${process.env.E2B_API_URL}/v2/sandboxes?order=sideways`, { headers: { 'X-API-KEY': process.env.E2B_API_KEY } })
  assert.equal(bad.status, 400)
})

await check('metrics: a time range holding now has the sample, one before the sandbox none', async () => {
  const now = Date.now()
  const m = await sb.getMetrics({ start: new Date(now - 5000), end: new Date(now) })
  assert.equal(m.length, 1)
  assert.ok(m[0].memTotal > 0)
  const none = await sb.getMetrics({ start: new Date(now - 3600_000), end: new Date(now - 1800_000) })
  assert.deepEqual(none, [])
})

await check('an endpoint this server does not offer: 501 saying so (not 404, "sandbox not found")', async () => {
  const r = await fetch(`${process.env.E2B_API_URL}/snapshots`, { headers: { 'X-API-KEY': process.env.E2B_API_KEY } })
  assert.equal(r.status, 501)
  assert.match((await r.json()).message, /^not served by exguardian serve: GET \/snapshots/)
})

await check('a kill while a command runs ends its stream: TimeoutError, killed or reached its end of life', async () => {
  const cmd = await late.commands.run('sleep 60', { background: true })
  await late.kill()
  const err = await cmd.wait().catch((e) => e)
  assert.ok(err instanceof TimeoutError, `${err && err.name}: ${err && err.message}`)
  assert.match(err.message, /sandbox was killed or reached its end of life/)
})

await sb.kill()
console.log(`${passed} passed, ${failed} failed`)
process.exit(failed ? 1 : 0)
