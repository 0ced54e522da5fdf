# The proxy soak's clients (tests/integration/test_egress_proxy_soak.sh, bench/proxy_soak.sh):
# run in the test world's client namespace against a running `exguardian proxy`.
#
#   python3 proxy_soak.py PROXY_PID PORT TOKEN ECHO_HOST:PORT RESULT_JSON
#
# Environment: SOAK_TUNNELS (1000), SOAK_SLOW (200), SOAK_BAD (100), SOAK_VANISH (100),
# SOAK_HOLD (seconds the crowd stays, 3).
# Phases, with a well-behaved client (one absolute-form GET at a time) running throughout:
#   warm-up (a few tunnels, so the baseline includes the proxy's pipe pool), baseline (RSS, fds);
#   the crowd at once: SOAK_TUNNELS CONNECT tunnels to the echo server, each proven by an echo
#   and held open; slowloris clients sending a head byte by byte; malformed and oversized
#   heads; clients that vanish (RST) in the middle of a download; the peak RSS and fds;
#   everything closed; the proxy's RSS and fds after it settled.
# Writes what it saw as JSON; the calling script judges it. No timing is asserted here: every
# wait is bounded only so that a broken proxy cannot hang the test.
import asyncio, base64, json, os, socket, struct, sys, time

pid, port, token, echo, out_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
TUNNELS = int(os.environ.get("SOAK_TUNNELS", "1000"))
SLOW = int(os.environ.get("SOAK_SLOW", "200"))
BAD = int(os.environ.get("SOAK_BAD", "100"))
VANISH = int(os.environ.get("SOAK_VANISH", "100"))
HOLD = float(os.environ.get("SOAK_HOLD", "3"))
AUTH = b"Proxy-Authorization: Basic " + base64.b64encode(b"exguardian:" + token.encode()) + b"\r\n"
R = {"errors": []}


def proc_rss_kib():
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def proc_fds():
    return len(os.listdir(f"/proc/{pid}/fd"))


def proc_fds_not_pipes():
    """The proxy's descriptors other than pipes (its pool keeps up to 64 empty pipes for reuse)."""
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if not os.readlink(f"/proc/{pid}/fd/{fd}").startswith("pipe:"):
                n += 1
        except OSError:
            pass
    return n


def note_error(what):
    if len(R["errors"]) < 20:
        R["errors"].append(what)


async def open_proxy():
    return await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 20)


async def tunnel(i, hold_until):
    """A CONNECT tunnel to the echo server, proven by one echo, held until hold_until is set."""
    try:
        r, w = await open_proxy()
        w.write(b"CONNECT " + echo.encode() + b" HTTP/1.1\r\nHost: " + echo.encode() + b"\r\n" + AUTH + b"\r\n")
        head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 30)
        if b" 200 " not in head.split(b"\r\n")[0]:
            note_error(f"tunnel {i}: {head[:60]!r}")
            w.close()
            return False
        msg = b"ping %d\n" % i
        w.write(msg)
        got = await asyncio.wait_for(r.readline(), 30)
        ok = got == msg
        if not ok:
            note_error(f"tunnel {i}: echo {got[:40]!r}")
        await hold_until.wait()
        w.close()
        return ok
    except Exception as e:
        note_error(f"tunnel {i}: {type(e).__name__} {e}")
        return False


async def slowloris(i, stop):
    """Sends a request head one byte at a time and never finishes it; True when the proxy hung up."""
    try:
        r, w = await open_proxy()
        head = b"CONNECT " + echo.encode() + b" HTTP/1.1\r\nHost: " + echo.encode() + b"\r\nX-Slow: "
        for b in head:
            w.write(bytes([b]))
        while not stop.is_set():
            w.write(b"a")
            try:
                await w.drain()
                data = await asyncio.wait_for(r.read(4096), 0.3)
                if data == b"":
                    w.close()
                    return True  # the proxy closed the connection
            except asyncio.TimeoutError:
                continue
            except (ConnectionError, OSError):
                return True
        w.close()
        return False
    except Exception as e:
        note_error(f"slowloris {i}: {type(e).__name__} {e}")
        return False


BAD_HEADS = [
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + os.urandom(32) + b"\r\n\r\n",  # TLS to a plain port
    b"GET / HTTP/1.1\r\nHost: allowed.test\r\n\r\n",                                      # origin-form
    b"GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nX: a\x00b\r\n\r\n",     # NUL in a header
    b"CONNECT allowed.test HTTP/1.1\r\n\r\n",                                             # no port
    b"GET http://allowed.test/ HTTP/9.9\r\n\r\n",                                          # version
    b"POST http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
    b"GET http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\nX-Big: " + b"a" * 40000 + b"\r\n\r\n",  # oversized head
    b"GET http://allowed.test/" + b"p" * 70000 + b" HTTP/1.1\r\n\r\n",                   # oversized request line
]


async def malformed(i):
    """One bad head; True when the proxy answered with a 4xx and closed."""
    data = BAD_HEADS[i % len(BAD_HEADS)]
    try:
        r, w = await open_proxy()
        if data[:1].isupper() and b"\r\n" in data:  # past authentication, so the parser judges it
            line, rest = data.split(b"\r\n", 1)
            data = line + b"\r\n" + AUTH + rest
        w.write(data)
        try:
            await w.drain()
        except (ConnectionError, OSError):
            pass
        got = b""
        try:
            while True:
                b = await asyncio.wait_for(r.read(65536), 30)
                if not b:
                    break
                got += b
        except (ConnectionError, OSError):
            pass
        w.close()
        ok = got.startswith(b"HTTP/1.1 4")
        if not ok:
            note_error(f"malformed {i % len(BAD_HEADS)}: {got[:60]!r}")
        return ok
    except Exception as e:
        note_error(f"malformed {i}: {type(e).__name__} {e}")
        return False


async def vanish(i):
    """Starts a download (a tunnel's stream, or GET /big), reads some, then resets the connection."""
    try:
        r, w = await open_proxy()
        if i % 25:  # (the world's origin reads all of /big into memory per request: a few only)
            w.write(b"CONNECT " + echo.encode() + b" HTTP/1.1\r\nHost: " + echo.encode() + b"\r\n" + AUTH + b"\r\n")
            await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 30)
            w.write(b"stream\n")
        else:
            w.write(b"GET http://allowed.test/big HTTP/1.1\r\nHost: allowed.test\r\n" + AUTH + b"\r\n")
        want, got = 256 * 1024 + i * 1024, 0
        while got < want:
            b = await asyncio.wait_for(r.read(65536), 30)
            if not b:
                break
            got += len(b)
        sock = w.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = RST
        w.transport.abort()
        if got < want:
            note_error(f"vanish {i}: only {got} bytes before the end")
        return got >= want
    except Exception as e:
        note_error(f"vanish {i}: {type(e).__name__} {e}")
        return False


async def well_behaved(stop, stats):
    """One request at a time, all the time; each must get the origin's answer."""
    n = 0
    while not stop.is_set():
        n += 1
        try:
            r, w = await open_proxy()
            w.write(b"GET http://allowed.test/wb-%d HTTP/1.1\r\nHost: allowed.test\r\n" % n + AUTH + b"\r\n")
            data = await asyncio.wait_for(r.read(-1), 30)
            w.close()
            if data.startswith(b"HTTP/1.1 200") and b"hello from 203.0.113.10" in data:
                stats["ok"] += 1
            else:
                stats["bad"] += 1
                note_error(f"well-behaved {n}: {data[:60]!r}")
        except Exception as e:
            stats["bad"] += 1
            note_error(f"well-behaved {n}: {type(e).__name__} {e}")
        await asyncio.sleep(0.05)


async def settle(baseline_fds, limit_s=30):
    """Waits until the proxy's descriptors but pipes are back to the baseline (or the bound runs out)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        if proc_fds_not_pipes() <= baseline_fds:
            break
        await asyncio.sleep(0.2)


async def main():
    wb_stop = asyncio.Event()
    wb = {"ok": 0, "bad": 0}
    # Warm-up: the pipe pool and the allocator's first arenas belong to the baseline.
    warm = asyncio.Event()
    ts = [asyncio.create_task(tunnel(-k, warm)) for k in range(1, 21)]
    await asyncio.sleep(0.5)
    warm.set()
    await asyncio.gather(*ts)
    await asyncio.gather(*[vanish(k) for k in range(4)])
    await asyncio.sleep(0.5)
    R["fds_before"], R["rss_before_kib"] = proc_fds(), proc_rss_kib()
    R["socket_fds_before"] = proc_fds_not_pipes()

    wb_task = asyncio.create_task(well_behaved(wb_stop, wb))
    hold = asyncio.Event()
    slow_stop = asyncio.Event()
    tun = []
    for k in range(0, TUNNELS, 100):  # in steps, so the listen backlog never overflows
        tun += [asyncio.create_task(tunnel(i, hold)) for i in range(k, min(TUNNELS, k + 100))]
        await asyncio.sleep(0.05)
    slow = [asyncio.create_task(slowloris(i, slow_stop)) for i in range(SLOW)]
    bad = await asyncio.gather(*[malformed(i) for i in range(BAD)])
    van = await asyncio.gather(*[vanish(i) for i in range(VANISH)])
    await asyncio.sleep(HOLD)
    R["fds_during"], R["rss_during_kib"] = proc_fds(), proc_rss_kib()
    # The slowloris clients are cut by the proxy's header timeout; wait for that, bounded.
    t0 = time.monotonic()
    while time.monotonic() - t0 < 60 and not all(t.done() for t in slow):
        await asyncio.sleep(0.2)
    slow_stop.set()
    slow_res = await asyncio.gather(*slow)
    hold.set()
    tun_res = await asyncio.gather(*tun)
    wb_stop.set()
    await wb_task
    await settle(R["socket_fds_before"])
    await asyncio.sleep(0.6)  # the proxy's sweep (every 250 ms here) sees it idle and trims the heap
    R["fds_after"], R["rss_after_kib"] = proc_fds(), proc_rss_kib()
    R["socket_fds_after"] = proc_fds_not_pipes()
    # And a well-behaved request after it all.
    wb_stop2 = asyncio.Event()
    after = {"ok": 0, "bad": 0}
    t = asyncio.create_task(well_behaved(wb_stop2, after))
    await asyncio.sleep(0.2)
    wb_stop2.set()
    await t
    R.update(tunnels=TUNNELS, tunnels_ok=sum(tun_res), slow=SLOW, slow_cut=sum(slow_res), bad=BAD,
             bad_refused=sum(bad), vanish=VANISH, vanish_ok=sum(van), well_behaved_ok=wb["ok"],
             well_behaved_bad=wb["bad"], after_ok=after["ok"], after_bad=after["bad"])


t_start = time.monotonic()
asyncio.run(main())
R["seconds"] = round(time.monotonic() - t_start, 1)
with open(out_path, "w") as f:
    json.dump(R, f, indent=1)
