# The proxy soak's upstream (tests/integration/test_egress_proxy_soak.sh): a TCP server that
# echoes each line back, or, after the line "stream", sends data until the peer goes away.
#   python3 echo_server.py ADDR PORT
import asyncio, sys

CHUNK = b"x" * 65536


async def serve(r, w):
    try:
        while True:
            line = await r.readline()
            if not line:
                break
            if line == b"stream\n":
                while True:
                    w.write(CHUNK)
                    await w.drain()
            w.write(line)
            await w.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        w.close()


async def main():
    srv = await asyncio.start_server(serve, sys.argv[1], int(sys.argv[2]), backlog=4096)
    async with srv:
        await srv.serve_forever()


asyncio.run(main())
