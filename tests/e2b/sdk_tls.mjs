// `exguardian serve --tls-cert --tls-key`: the unmodified `e2b` SDK with https:// everywhere
// (tests/integration/test_serve_code_interpreter.sh starts the server on loopback with a
// certificate it made for 127.0.0.1, DOMAIN and *.DOMAIN, and trusts it through
// NODE_EXTRA_CA_CERTS): the control plane and envd over TLS, and getHost(port)'s PORT-ID.DOMAIN
// fetched over https, as E2B's own tests do (`https://${sandbox.getHost(port)}`), with the
// sandbox's traffic access token. The name is resolved to the server's loopback address here, as
// a DNS entry for *.DOMAIN would; TLS verifies the certificate against that name (SNI).
// One line per check: "ok - ..." or "FAIL - ...: why"; exit 1 when any failed.
import assert from 'node:assert/strict'
import https from 'node:https'
import { Sandbox } from 'e2b'

import { check, finish, getByHost as getHostPage } from './checks.mjs'

const URL = process.env.E2B_API_URL
assert.match(URL, /^https:\/\/127\.0\.0\.1:\d+$/, 'E2B_API_URL is the TLS server on loopback')
const getByHost = (host, path, headers) => getHostPage(https, URL, host, path, headers)

const sb = await Sandbox.create('base', { timeoutMs: 120_000 })

await check('over TLS: create, a command\'s streamed output, a file written and read back', async () => {
  const r = await sb.commands.run('for i in 1 2 3; do echo line$i; done')
  assert.equal(r.stdout, 'line1\nline2\nline3\n')
  await sb.files.write('/home/user/tls.txt', 'over tls')
  assert.equal(await sb.files.read('/home/user/tls.txt'), 'over tls')
})

await check('https://getHost(port) reaches a web server in the sandbox with its traffic token; without it, 502', async () => {
  await sb.files.write('/tmp/www/hello.txt', 'served over tls')
  await sb.commands.run('python3 -m http.server 8123 --bind 127.0.0.1 --directory /tmp/www', { background: true })
  const host = sb.getHost(8123)
  assert.equal(host, `8123-${sb.sandboxId}.${process.env.SANDBOX_DOMAIN}`)
  let status, body
  for (let i = 0; i < 50; i++) {  // the server inside starts meanwhile
    ;[status, body] = await getByHost(host, '/hello.txt', { 'E2B-Traffic-Access-Token': sb.trafficAccessToken })
    if (status === 200) break
    await new Promise((r) => setTimeout(r, 100))
  }
  assert.equal(status, 200, body)
  assert.equal(body, 'served over tls')
  const [st, b] = await getByHost(host, '/hello.txt')
  assert.equal(st, 502, b)
  assert.doesNotMatch(b, /served over tls/)
})

await check('a name the certificate does not cover is refused by the client (the check is real)', async () => {
  await assert.rejects(getByHost(`8123-${sb.sandboxId}.elsewhere.test`, '/hello.txt', { 'E2B-Traffic-Access-Token': sb.trafficAccessToken }),
    (e) => /altnames|ERR_TLS_CERT_ALTNAME_INVALID/.test(`${e.code} ${e.message}`))
})

await sb.kill()
finish()
