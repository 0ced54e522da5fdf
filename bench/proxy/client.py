#!/usr/bin/env python3
"""Clients for bench/proxy.sh.

latency PROXY|direct N   N sequential new TCP connections, each one small GET (through CONNECT
                         when a proxy host:port is given); prints JSON with per-request wall
                         times in microseconds.
idle PROXY N PID         opens N CONNECT tunnels to the origin and holds them; prints JSON with
                         the summed VmRSS (KiB) of PID and its descendants before and while held.
"""
import asyncio, json, os, socket, sys, time

ORIGIN = os.environ.get("ORIGIN", "origin.test")
TINY = os.environ.get("TINY", "/tiny")
import base64
_AUTH = os.environ.get("EXG_PROXY_AUTH")
PA = (f"Proxy-Authorization: Basic {base64.b64encode(_AUTH.encode()).decode()}\r\n" if _AUTH else "")


def read_head(s, buf=b""):
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        if not chunk:
            raise EOFError("closed before the end of the head")
        buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head, rest


def one_request(proxy):
    if proxy:
        h, p = proxy.rsplit(":", 1)
        s = socket.create_connection((h, int(p)))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.sendall(f"CONNECT {ORIGIN}:80 HTTP/1.1\r\nHost: {ORIGIN}:80\r\n{PA}\r\n".encode())
        head, rest = read_head(s)
        if not head.split(b" ", 2)[1].startswith(b"2"):
            raise RuntimeError("CONNECT refused: " + head.split(b"\r\n")[0].decode())
    else:
        s = socket.create_connection((ORIGIN, 80))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        rest = b""
    s.sendall(f"GET {TINY} HTTP/1.1\r\nHost: {ORIGIN}\r\nUser-Agent: bench\r\n\r\n".encode())
    head, body = read_head(s, rest)
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v)
    while len(body) < length:
        chunk = s.recv(65536)
        if not chunk:
            raise EOFError("short body")
        body += chunk
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError("GET failed: " + head.split(b"\r\n")[0].decode())
    s.close()


def latency(proxy, n):
    for _ in range(30):  # warm-up
        one_request(proxy)
    times = []
    for _ in range(n):
        t0 = time.perf_counter_ns()
        one_request(proxy)
        times.append((time.perf_counter_ns() - t0) / 1000.0)
    json.dump({"us": times}, sys.stdout)


def tree_rss_kib(root):
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                kids.setdefault(ppid, []).append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    total, todo, seen = 0, [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
        todo.extend(kids.get(pid, []))
    return total, len(seen)


async def idle(proxy, n, pid):
    h, p = proxy.rsplit(":", 1)
    await asyncio.sleep(0.5)
    before, nproc = tree_rss_kib(pid)
    sem = asyncio.Semaphore(64)
    held, errors = [], {}

    async def open_one():
        async with sem:
            try:
                r, w = await asyncio.wait_for(asyncio.open_connection(h, int(p)), 10)
                w.write(f"CONNECT {ORIGIN}:80 HTTP/1.1\r\nHost: {ORIGIN}:80\r\n{PA}\r\n".encode())
                head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 10)
                status = head.split(b" ", 2)[1].decode()
                if status.startswith("2"):
                    held.append(w)
                else:
                    errors[status] = errors.get(status, 0) + 1
                    w.close()
            except Exception as e:  # noqa: BLE001 - counted and reported
                k = type(e).__name__
                errors[k] = errors.get(k, 0) + 1

    t0 = time.monotonic()
    await asyncio.gather(*(open_one() for _ in range(n)))
    opened_s = time.monotonic() - t0
    await asyncio.sleep(2.0)
    during, nproc2 = tree_rss_kib(pid)
    # Still alive? A held tunnel must not have been closed by the proxy meanwhile.
    alive = sum(1 for w in held if not w.is_closing())
    for w in held:
        w.close()
    json.dump({"requested": n, "opened": len(held), "alive": alive, "errors": errors,
               "idle_rss_kib": before, "held_rss_kib": during, "processes": [nproc, nproc2],
               "open_seconds": round(opened_s, 3)}, sys.stdout)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "latency":
        latency(None if sys.argv[2] == "direct" else sys.argv[2], int(sys.argv[3]))
    elif mode == "idle":
        asyncio.run(idle(sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
    else:
        sys.exit(__doc__)
