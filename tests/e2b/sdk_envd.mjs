// envd's behaviour where E2B's own SDK tests expect it (issue 44, part 2), driven by the
// unmodified `e2b` SDK against `exguardian serve` (tests/integration/test_serve_code_interpreter.sh
// runs it on the server it already has: E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY; OTHER_KEY, a
// second tenant's key, must not reach the first one's snapshots).
// Two `base` sandboxes: one for the checks, a second one (newer) for the list order, then
// killed while a command runs.
// One line per check: "ok - ..." or "FAIL - ...: why"; exit 1 when any failed.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { Sandbox, TimeoutError, FilesystemEventType, SandboxNotFoundError } from 'e2b'

import { check, finish } from './checks.mjs'
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

await check('E2B\'s base template: `python` beside `python3`, also from a subprocess', async () => {
  assert.equal((await sb.commands.run('python -c "import sys; print(sys.version_info[0])"')).stdout.trim(), '3')
  const sub = await sb.commands.run(`python3 -c "import subprocess; print(subprocess.run(['python', '-c', 'print(6 * 7)'], capture_output=True, text=True).stdout.strip())"`)
  assert.equal(sub.stdout.trim(), '42')
})

await check('E2B\'s base template: `sudo` on the process layer refuses with the words of a `root` request, exit 1', async () => {
  let err
  try { await sb.commands.run('sudo id -u') } catch (e) { err = e }
  assert.ok(err, 'sudo id -u succeeded')
  assert.equal(err.exitCode, 1)
  assert.match(err.stderr, /^sudo: user root: refused: the process layer runs the sandbox's commands on the host's kernel/)
  assert.equal(err.stdout, '')
  // The same words as a command asked to run as root.
  let asRoot
  try { await sb.commands.run('id -u', { user: 'root' }) } catch (e) { asRoot = e }
  assert.ok(asRoot && String(asRoot.message).includes(err.stderr.trim().replace(/^sudo: /, '')), String(asRoot))
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

await check('files: a watch with includeEntry (envd 0.6.3) carries the entry; allowNetworkMounts (0.6.4) watches as before', async () => {
  await sb.files.makeDir('watched-entry')
  await sb.files.write('watched-entry/e.txt', 'one')
  const seen = []
  const h = await sb.files.watchDir('watched-entry', (e) => seen.push(e), { includeEntry: true, allowNetworkMounts: true })
  await sb.files.write('watched-entry/e.txt', 'two, longer')
  await until(`a write event: ${seen.map((e) => e.type)}`, () => seen.some((e) => e.type === FilesystemEventType.WRITE && e.name === 'e.txt'))
  const ev = seen.find((e) => e.type === FilesystemEventType.WRITE && e.name === 'e.txt')
  assert.equal(ev.entry.name, 'e.txt')
  assert.equal(ev.entry.path, '/home/user/watched-entry/e.txt')
  assert.equal(ev.entry.type, 'file')
  await sb.files.remove('watched-entry/e.txt')
  await until('a remove event', () => seen.some((e) => e.type === FilesystemEventType.REMOVE))
  assert.equal(seen.find((e) => e.type === FilesystemEventType.REMOVE).entry, undefined)  // gone: no entry
  await h.stop()
})

await check('files: metadata (envd 0.6.2) on write, info, listing, rename; an overwrite clears it; xattrs set inside show', async () => {
  const md = { author: 'mish', purpose: 'upload' }
  assert.deepEqual((await sb.files.write('md/a.txt', 'a', { metadata: md })).metadata, md)
  assert.deepEqual((await sb.files.write('md/b.txt', 'b', { metadata: md, useOctetStream: true })).metadata, md)
  assert.deepEqual((await sb.files.getInfo('md/a.txt')).metadata, md)
  assert.deepEqual((await sb.files.getInfo('md/b.txt')).metadata, md)
  const many = await sb.files.writeFiles([{ path: 'md/c.txt', data: 'c' }, { path: 'md/d.txt', data: 'd' }], { metadata: { source: 'suite' } })
  for (const i of many) assert.deepEqual((await sb.files.getInfo(i.path)).metadata, { source: 'suite' })
  assert.deepEqual((await sb.files.list('md')).find((e) => e.name === 'a.txt').metadata, md)
  assert.deepEqual((await sb.files.rename('md/a.txt', 'md/renamed.txt')).metadata, md)
  assert.equal((await sb.files.write('md/renamed.txt', 'again')).metadata, undefined)
  assert.equal((await sb.files.getInfo('md/renamed.txt')).metadata, undefined)
  await sb.commands.run(`python3 -c "import os; os.setxattr('/home/user/md/c.txt', 'user.e2b.author', b'inside')"`)
  assert.deepEqual((await sb.files.getInfo('md/c.txt')).metadata, { author: 'inside', source: 'suite' })
})

await check('files: signed URLs (no sandbox id): read and upload; expired, altered and unsigned refused', async () => {
  await sb.files.write('signed.txt', 'mine')
  await late.files.write('signed.txt', 'the other sandbox')
  const url = await sb.downloadUrl('signed.txt', { useSignatureExpiration: 10_000 })
  assert.ok(!url.includes(sb.sandboxId), url)
  let r = await fetch(url)
  assert.equal(r.status, 200)
  assert.equal(await r.text(), 'mine')
  r = await fetch(await late.downloadUrl('signed.txt'))  // no expiration: the other sandbox's own file
  assert.equal(await r.text(), 'the other sandbox')
  r = await fetch(await sb.downloadUrl('signed.txt', { useSignatureExpiration: -10_000 }))
  assert.equal(r.status, 401)
  assert.deepEqual(await r.json(), { code: 401, message: 'signature is already expired' })
  const other = new URL(url)
  other.searchParams.set('path', '/etc/passwd')
  r = await fetch(other)
  assert.equal(r.status, 401)
  assert.deepEqual(await r.json(), { code: 401, message: 'invalid signature' })
  r = await fetch(url, { method: 'POST', body: 'x' })  // a read's signature does not write
  assert.equal(r.status, 401)
  const unsigned = new URL(url)
  unsigned.searchParams.delete('signature')
  assert.equal((await fetch(unsigned)).status, 401)
  const form = new FormData()
  form.append('file', 'uploaded through a signed URL')
  r = await fetch(await sb.uploadUrl('up/signed.txt', { useSignatureExpiration: 10_000 }), { method: 'POST', body: form })
  assert.equal(r.status, 200)
  assert.deepEqual(await r.json(), [{ name: 'signed.txt', path: '/home/user/up/signed.txt', type: 'file' }])
  assert.equal(await sb.files.read('up/signed.txt'), 'uploaded through a signed URL')
})

await check('network.maskRequestHost (a string, as E2B types it): the Host a port of the sandbox receives', async () => {
  const m = await Sandbox.create('base', { network: { maskRequestHost: 'custom-host.example.com:${PORT}' }, timeoutMs: 120_000 })
  try {
    assert.equal((await m.getInfo()).network?.maskRequestHost, 'custom-host.example.com:${PORT}')
    await m.commands.run(`python3 -c "
import http.server
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        open('/tmp/host.txt', 'w').write(self.headers['Host'])
        self.send_response(200); self.end_headers()
    def log_message(self, *a): pass
http.server.HTTPServer(('127.0.0.1', 8080), H).handle_request()
"`, { background: true })
    let r
    for (let i = 0; i < 50; i++) {
      r = await fetch(process.env.E2B_SANDBOX_URL, { headers: { 'E2b-Sandbox-Id': m.sandboxId, 'E2b-Sandbox-Port': '8080', 'X-API-KEY': process.env.E2B_API_KEY } })
      if (r.status === 200) break
      await sleep(100)
    }
    assert.equal(r.status, 200)
    assert.equal((await m.files.read('/tmp/host.txt')), 'custom-host.example.com:8080')
  } finally {
    await m.kill()
  }
  const bad = await fetch(`${process.env.E2B_API_URL}/sandboxes`, { method: 'POST', headers: { 'X-API-KEY': process.env.E2B_API_KEY, 'Content-Type': 'application/json' },
    body: JSON.stringify({ templateID: 'base', network: { maskRequestHost: true } }) })
  assert.equal(bad.status, 400)
  assert.match((await bad.json()).message, /network\.maskRequestHost: expected a string/)
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

// Snapshots and fork (issue 44 part 3): filesystem only, and the seed's warning: a planted .bashrc line
// and git hook in the sandbox's home must not travel into the sandboxes made from its snapshot.
const api = (path, init = {}) =>
  fetch(`${process.env.E2B_API_URL}${path}`, { ...init, headers: { 'X-API-KEY': process.env.E2B_API_KEY, 'Content-Type': 'application/json' } })
await check('snapshots: a sandbox made from one has its files, not the planted .bashrc line and git hook; listed, deleted; another tenant neither sees, uses nor deletes it', async () => {
  await sb.files.write('/home/user/snap/data.txt', 'kept')
  await sb.commands.run('git init -q /home/user/snap/repo && printf "#!/bin/sh\\necho planted-hook\\n" > /home/user/snap/repo/.git/hooks/pre-commit && ' +
    'chmod +x /home/user/snap/repo/.git/hooks/pre-commit && echo "echo planted-bashrc" >> /home/user/.bashrc')
  assert.equal(await sb.files.exists('/home/user/.bashrc'), true)  // planted for real before the snapshot
  assert.equal(await sb.files.exists('/home/user/snap/repo/.git/hooks/pre-commit'), true)
  const snap = await sb.createSnapshot({ name: `${tag}-snap` })
  assert.ok(snap.snapshotId.length > 0)
  assert.deepEqual(snap.names, [`${tag}-snap`])
  const from = await Sandbox.create(snap.snapshotId, { timeoutMs: 120_000 })
  try {
    assert.notEqual(from.sandboxId, sb.sandboxId)
    assert.equal(await from.files.read('/home/user/snap/data.txt'), 'kept')
    assert.equal(await from.files.exists('/home/user/snap/repo/.git/HEAD'), true)
    assert.equal(await from.files.exists('/home/user/.bashrc'), false)
    assert.equal(await from.files.exists('/home/user/snap/repo/.git/hooks/pre-commit'), false)
    assert.doesNotMatch((await from.commands.run('bash -i -c true 2>&1; echo done')).stdout, /planted/)
    // Its own copy: its user writes it, the original keeps its file.
    await from.files.write('/home/user/snap/data.txt', 'changed')
    assert.equal(await sb.files.read('/home/user/snap/data.txt'), 'kept')
  } finally {
    await from.kill()
  }
  // The source sandbox keeps its files (the sweep works on the copy).
  assert.equal(await sb.files.exists('/home/user/.bashrc'), true)
  const byName = await Sandbox.listSnapshots({ name: `${tag}-snap` }).nextItems()
  assert.deepEqual(byName.map((s) => s.snapshotId), [snap.snapshotId])
  assert.deepEqual(await Sandbox.listSnapshots({ name: `${tag}-none` }).nextItems(), [])
  assert.ok((await sb.listSnapshots().nextItems()).some((s) => s.snapshotId === snap.snapshotId))
  // Another tenant's key: the snapshot is not listed, not a template it can create from, not its to delete.
  const theirs = { 'X-API-KEY': process.env.OTHER_KEY, 'Content-Type': 'application/json' }
  const listed = await (await fetch(`${process.env.E2B_API_URL}/snapshots`, { headers: theirs })).json()
  assert.ok(Array.isArray(listed) && !listed.some((s) => s.snapshotID === snap.snapshotId), JSON.stringify(listed))
  const made = await fetch(`${process.env.E2B_API_URL}/sandboxes`, { method: 'POST', headers: theirs, body: JSON.stringify({ templateID: snap.snapshotId }) })
  assert.equal(made.status, 404, `another tenant created from the snapshot: ${made.status} ${await made.text()}`)
  const removed = await fetch(`${process.env.E2B_API_URL}/templates/${snap.snapshotId}`, { method: 'DELETE', headers: theirs })
  assert.notEqual(removed.status, 204, 'another tenant deleted the snapshot')
  assert.ok((await sb.listSnapshots().nextItems()).some((s) => s.snapshotId === snap.snapshotId), 'still there after their delete')
  assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true)
  assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false)
  await assert.rejects(Sandbox.create(snap.snapshotId), /404|not found/i)
})

await check('snapshots: the answer says what is kept and what the sweep quarantined; a bad name 400', async () => {
  const r = await api(`/sandboxes/${sb.sandboxId}/snapshots`, { method: 'POST', body: '{}' })
  assert.equal(r.status, 201)
  const j = await r.json()
  assert.match(j.kept, /^filesystem only/)
  const paths = j.quarantined.map((q) => q.path).sort()
  assert.ok(paths.includes('.bashrc'), JSON.stringify(j.quarantined))
  assert.ok(paths.includes('snap/repo/.git/hooks/pre-commit'), JSON.stringify(j.quarantined))
  assert.equal(await Sandbox.deleteSnapshot(j.snapshotID), true)
  const bad = await api(`/sandboxes/${sb.sandboxId}/snapshots`, { method: 'POST', body: '{"name": "a b"}' })
  assert.equal(bad.status, 400)
})

await check('fork: the fork has the files (not the planted ones) and is independent; the original runs on', async () => {
  await sb.files.write('/home/user/state.txt', 'state before fork')
  const forks = await sb.fork()
  assert.equal(forks.length, 1)
  const fk = forks[0]
  assert.ok(fk instanceof Sandbox, String(fk))
  try {
    assert.notEqual(fk.sandboxId, sb.sandboxId)
    assert.equal(await sb.isRunning(), true)
    assert.equal(await fk.files.read('/home/user/state.txt'), 'state before fork')
    assert.equal(await fk.files.exists('/home/user/.bashrc'), false)
    await fk.files.write('/home/user/state.txt', 'modified in fork')
    assert.equal(await sb.files.read('/home/user/state.txt'), 'state before fork')
    assert.deepEqual((await Sandbox.listSnapshots().nextItems()).filter((s) => s.snapshotId.startsWith('snap-')).length, 0)
  } finally {
    await fk.kill()
  }
  const bad = await api(`/sandboxes/${sb.sandboxId}/fork`, { method: 'POST', body: '{"count": 0}' })
  assert.equal(bad.status, 400)
  // As E2B: a bad body is 400 before the sandbox is looked up, not "sandbox not found" (the SDK 2.51.0
  // raises a 400 as SandboxError; E2B's newer test wants InvalidArgumentError, checked in the SDK itself).
  await assert.rejects(Sandbox.fork('sbx-test', { count: 0 }), (e) => !(e instanceof SandboxNotFoundError) && /^400: count/.test(e.message))
})

await check('each sandbox boots with its own boot id; a filesystem-only pause ends its processes, keeps its files, and connect boots it again', async () => {
  const bootOf = async (s) => (await s.commands.run('cat /proc/sys/kernel/random/boot_id')).stdout.trim()
  const host = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim()
  const before = await bootOf(sb), other = await bootOf(late)
  assert.match(before, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
  assert.notEqual(before, host, 'the host kernel\'s boot id is not the sandbox\'s')
  assert.notEqual(before, other, 'two sandboxes, two boots')
  assert.equal(await bootOf(sb), before, 'the same boot between two commands')
  await sb.files.write('/home/user/fs_only.txt', 'kept')
  await sb.commands.run('sleep 600', { background: true })
  assert.match((await sb.commands.run('ps -eo args')).stdout, /sleep 600/)
  // Its supervisor (whose command line names the sandbox) runs on the host until the pause.
  // (pgrep without a shell: no command line but the supervisor's holds its control socket's path)
  const onHost = () => {
    try { return Number(execFileSync('pgrep', ['-cf', '--', `/sandboxes/${sb.sandboxId}/control.sock`]).toString().trim()) } catch (e) { return e.status === 1 ? 0 : NaN }
  }
  assert.ok(onHost() > 0, 'the sandbox\'s supervisor is seen on the host before the pause')
  await sb.pause({ keepMemory: false })
  assert.equal((await sb.getInfo()).state, 'paused')
  assert.equal(await sb.isRunning(), false)
  assert.equal(onHost(), 0, 'nothing of the paused sandbox runs on the host')
  await sb.connect()
  assert.equal(await sb.isRunning(), true)
  assert.equal(await sb.files.read('/home/user/fs_only.txt'), 'kept')
  const after = await bootOf(sb)
  assert.notEqual(after, before, 'a new boot after the resume')
  const ps = (await sb.commands.run('ps -eo args')).stdout
  assert.doesNotMatch(ps, /sleep 600/, 'the process of the boot before is not back')
})

await check('an endpoint this server does not offer: 501 saying so (not 404, "sandbox not found")', async () => {
  const r = await fetch(`${process.env.E2B_API_URL}/templates`, { headers: { 'X-API-KEY': process.env.E2B_API_KEY } })
  assert.equal(r.status, 501)
  assert.match((await r.json()).message, /^not served by exguardian serve: GET \/templates/)
})

await check('a kill while a command runs ends its stream: TimeoutError, killed or reached its end of life', async () => {
  const cmd = await late.commands.run('sleep 60', { background: true })
  await late.kill()
  const err = await cmd.wait().catch((e) => e)
  assert.ok(err instanceof TimeoutError, `${err && err.name}: ${err && err.message}`)
  assert.match(err.message, /sandbox was killed or reached its end of life/)
})

await sb.kill()
finish()
