# A proxy of the user's for the egress test world (test_egress_sandbox.sh: srt's parentProxy,
# httpProxyPort, socksProxyPort, mitmProxy): HTTP CONNECT, or SOCKS5 CONNECT without
# authentication, to names it looks up in a hosts file. One log line per request:
#   "<listener> CONNECT <host:port> auth=<Proxy-Authorization or ->" / "<listener> SOCKS <host:port>"
#   python3 parent_proxy.py [--tls CERT KEY] LOG HOSTS LISTEN...     (LISTEN: tcp:ADDR:PORT or unix:PATH)
# --tls: its TCP listeners speak TLS (a proxy with an https:// URL) with that certificate and key.
import asyncio, os, socket, ssl, sys

args = sys.argv[1:]
tls = None
if args[:1] == ["--tls"]:
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(args[1], args[2])
    args = args[3:]
log_path, hosts_path = args[:2]
hosts = {}
for line in open(hosts_path):
    parts = line.split()
    for name in parts[1:]:
        hosts.setdefault(name.lower(), parts[0])


def log(line):
    with open(log_path, "a") as f:
        f.write(line + "\n")


async def pipe(r, w):
    try:
        while True:
            data = await r.read(65536)
            if not data:
                break
            w.write(data)
            await w.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        try:
            w.close()
        except OSError:
            pass


async def handle(r, w, where):
    try:
        first = await r.readexactly(1)
        if first == b"\x05":  # SOCKS5
            n = (await r.readexactly(1))[0]
            await r.readexactly(n)
            w.write(b"\x05\x00")
            ver, cmd, _, atyp = await r.readexactly(4)
            if atyp == 3:
                host = (await r.readexactly((await r.readexactly(1))[0])).decode()
            elif atyp == 1:
                host = socket.inet_ntoa(await r.readexactly(4))
            else:
                host = socket.inet_ntop(socket.AF_INET6, await r.readexactly(16))
            port = int.from_bytes(await r.readexactly(2), "big")
            log("%s SOCKS %s:%d" % (where, host, port))
            ur, uw = await asyncio.open_connection(hosts.get(host.lower(), host), port)
            w.write(b"\x05\x00\x00\x01" + bytes(6))
        else:
            head = (first + await r.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
            method, target = head[0].split(" ")[:2]
            auth = next((l.split(":", 1)[1].strip() for l in head[1:] if l.lower().startswith("proxy-authorization:")), "-")
            log("%s %s %s auth=%s" % (where, method, target, auth))
            if method != "CONNECT":
                w.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                await w.drain()
                w.close()
                return
            host, port = target.rsplit(":", 1)
            ur, uw = await asyncio.open_connection(hosts.get(host.lower(), host), int(port))
            w.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await asyncio.gather(pipe(r, uw), pipe(ur, w))
    except (ConnectionError, OSError, asyncio.IncompleteReadError, ValueError):
        w.close()


async def main():
    servers = []
    for spec in args[2:]:
        kind, _, rest = spec.partition(":")
        cb = lambda r, w, where=spec: handle(r, w, where)
        if kind == "unix":
            servers.append(await asyncio.start_unix_server(cb, rest))
            os.chmod(rest, 0o666)
        else:
            addr, port = rest.rsplit(":", 1)
            servers.append(await asyncio.start_server(cb, addr, int(port), ssl=tls))
    await asyncio.gather(*(s.serve_forever() for s in servers))


asyncio.run(main())
