// srt's HTTP proxy (the one `srt` runs in-process for a sandboxed command), started on its own
// for bench/proxy.sh. srt's standalone entry (dist/proxy-main.js, `srt proxy`) runs "proxy-only"
// mode, which needs an external decider and refuses every CONNECT it does not TLS-terminate
// (refuseOpaqueTunnels: true), so it cannot carry a plain CONNECT tunnel; this uses the same
// createHttpProxyServer with srt's resolved-address guard, as sandbox-manager.js does.
// Usage: SRT_DIR=<dir holding node_modules> node srt-proxy.mjs PORT HOST ALLOWED_IP
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';

const [port, host, allowedIp] = process.argv.slice(2);
const dist = join(process.env.SRT_DIR, 'node_modules/@anthropic-ai/sandbox-runtime/dist/sandbox');
const { createHttpProxyServer } = await import(pathToFileURL(join(dist, 'http-proxy.js')).href);
const { createResolvedAddressGuard } = await import(pathToFileURL(join(dist, 'resolved-address-guard.js')).href);

// The origin's TEST-NET address sits on the namespace's lo, so it is "one of this host's
// addresses": allow that one address explicitly (as exguardian's policy does with allowedCidrs).
const guard = createResolvedAddressGuard({ allowedDomains: [host, allowedIp], deniedDomains: [] });
const server = createHttpProxyServer({
  filter: async (p, h) => h.toLowerCase() === host,
  lookupFor: p => guard.lookupFor(p),
});
server.listen(Number(port), '127.0.0.1', () => console.error(`srt proxy: serving 127.0.0.1:${port}`));
process.on('SIGTERM', () => process.exit(0));
