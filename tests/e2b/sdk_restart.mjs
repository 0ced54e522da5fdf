// A pause kept across a restart of `exguardian serve`, driven by the unmodified `e2b` SDK
// (tests/integration/test_serve.sh runs it against the restarted server: E2B_API_URL,
// E2B_SANDBOX_URL, E2B_API_KEY).
//   KEPT_ID    the sandbox paused before the server stopped; its home holds kept.txt ("before-stop")
//              and a planted .bashrc line the restart's sweep must have taken out
//   OTHER_KEY  a second tenant's key: it never sees or reaches the sandbox
import assert from 'node:assert/strict'
import { Sandbox, NotFoundError } from 'e2b'

import { check, finish } from './checks.mjs'

const ID = process.env.KEPT_ID
const OTHER_KEY = process.env.OTHER_KEY

await check('restart: the paused sandbox is listed, paused; another tenant neither lists nor connects to it', async () => {
  const mine = await Sandbox.list({ query: { state: ['paused'] } }).nextItems()
  assert.ok(mine.some((s) => s.sandboxId === ID && s.state === 'paused'), JSON.stringify(mine))
  const theirs = await Sandbox.list({ apiKey: OTHER_KEY }).nextItems()
  assert.ok(!theirs.some((s) => s.sandboxId === ID))
  await assert.rejects(Sandbox.connect(ID, { apiKey: OTHER_KEY }), (e) => e instanceof NotFoundError)
})

await check('restart: Sandbox.connect starts it again (same id); its file is there, the planted .bashrc line is not', async () => {
  const s = await Sandbox.connect(ID, { timeoutMs: 60_000 })
  assert.equal(s.sandboxId, ID)
  assert.equal((await s.getInfo()).state, 'running')
  const r = await s.commands.run('cat kept.txt; cat .bashrc 2>/dev/null; pwd')
  assert.equal(r.stdout.split('\n')[0], 'before-stop')
  assert.doesNotMatch(r.stdout, /planted-bashrc/)
  await s.files.write('after.txt', 'written after the restart')
  assert.equal(await s.files.read('after.txt'), 'written after the restart')
})

await check('restart: Sandbox.kill ends it; it is gone', async () => {
  assert.equal(await Sandbox.kill(ID), true)
  await assert.rejects(Sandbox.getInfo(ID), (e) => e instanceof NotFoundError)
})

finish()
