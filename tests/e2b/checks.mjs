// The check runner the SDK scripts share (sdk_basic.mjs, sdk_envd.mjs, code_interpreter.mjs):
// one line per check, "ok - ...", "skip - ... (why)" or "FAIL - ...: why", then "N passed,
// M failed"; finish() exits 1 when any failed. A check skips itself by throwing SKIP.
export const SKIP = Symbol('skip')

let passed = 0, failed = 0

// skipWhy: what a skipped check's line says in parentheses.
export async function check(name, fn, skipWhy = 'not served here') {
  try {
    await fn()
    passed++
    console.log(`ok   - ${name}`)
  } catch (e) {
    if (e === SKIP) return console.log(`skip - ${name} (${skipWhy})`)
    failed++
    // The whole message on one line (an assertion's message spans lines: cutting the stack
    // at three lines once hid the status that failed), then where it was thrown.
    const where = e && e.stack ? e.stack.split('\n').find((l) => /^\s+at /.test(l)) : undefined
    console.log(`FAIL - ${name}: ${e && e.message ? e.message.replace(/\s*\n\s*/g, ' ') : e}${where ? ' |' + where : ''}`)
  }
}

// GET PATH from HOST (a name getHost(port) gives, PORT-ID.DOMAIN) at the server of `serverUrl`:
// the name resolved to the server's address, as a DNS entry for *.DOMAIN would, and carried as
// the request's Host (and, over https, as SNI: the certificate is verified against it).
// `client`: node:http or node:https. Resolves to [status, body].
export function getByHost(client, serverUrl, host, path, headers = {}) {
  const server = new globalThis.URL(serverUrl)
  return new Promise((resolve, reject) => {
    const req = client.get({
      host, servername: host, port: server.port, path, headers,
      lookup: (name, opts, cb) => (opts && opts.all ? cb(null, [{ address: server.hostname, family: 4 }]) : cb(null, server.hostname, 4)),
    }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (d) => { body += d })
      res.on('end', () => resolve([res.statusCode, body]))
    })
    req.on('error', reject)
  })
}

export function finish() {
  console.log(`${passed} passed, ${failed} failed`)
  process.exit(failed ? 1 : 0)
}
