#!/usr/bin/python3
"""The client side of a CRI streaming exec, as kubectl exec speaks to kubelet's streaming server
(containerd's, at the URL the CRI Exec call returns): a WebSocket (RFC 6455) with the
v4.channel.k8s.io subprotocol, written here with the standard library. Each binary message's first
byte is its channel: 0 stdin, 1 stdout, 2 stderr, 3 the exec's status (a metav1.Status as JSON),
4 terminal resizes ({"Width": W, "Height": H}).

    cri_stream.py URL [--resize WxH] [--stdin TEXT] [--until TEXT]

prints what the command wrote (stdout, and stderr) and ends with the command's exit status: 0 for
status Success, the ExitCode cause of a NonZeroExitCode failure; 2 for anything else, with the
status on stderr. The same for an attach's URL (CRI Attach), whose stream ends with the container;
--until: 0 as soon as the output has TEXT (an attach to a container that runs on).

    cri_stream.py URL --port-forward [--stdin TEXT] [--until TEXT]

the URL of a CRI PortForward of one port (kubelet's WebSocket port forwarding: channel 0 the
connection's data, 1 its errors, each opened by the port's number, 2 bytes little-endian): TEXT sent
to the port, what comes back printed; 0 once TEXT of --until came back (or the connection ended
without an error), 2 with the error channel's text on stderr.
"""
import base64
import json
import os
import socket
import struct
import sys
import urllib.parse


def send_frame(sock, payload, opcode=2):
    mask = os.urandom(4)  # a client's frames are masked
    head = bytes([0x80 | opcode])
    n = len(payload)
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 1 << 16:
        head += bytes([0x80 | 126]) + struct.pack("!H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", n)
    sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))


def read_exact(f, n):
    data = f.read(n)
    if len(data) != n:
        raise EOFError("connection closed")
    return data


def read_frame(f):
    """(opcode, payload) of the next whole message (continuations joined)."""
    opcode, payload = None, b""
    while True:
        b0, b1 = read_exact(f, 2)
        n = b1 & 0x7F
        if n == 126:
            n = struct.unpack("!H", read_exact(f, 2))[0]
        elif n == 127:
            n = struct.unpack("!Q", read_exact(f, 8))[0]
        mask = read_exact(f, 4) if b1 & 0x80 else None
        data = read_exact(f, n)
        if mask:
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        if b0 & 0x0F:
            opcode = b0 & 0x0F
        payload += data
        if b0 & 0x80:
            return opcode, payload


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit("usage: cri_stream.py URL [--resize WxH] [--stdin TEXT]")
    url = urllib.parse.urlsplit(args[0])
    resize = stdin = None
    if "--resize" in args:
        w, h = args[args.index("--resize") + 1].split("x")
        resize = {"Width": int(w), "Height": int(h)}
    if "--stdin" in args:
        stdin = args[args.index("--stdin") + 1].encode()
    until = args[args.index("--until") + 1].encode() if "--until" in args else None
    port_forward = "--port-forward" in args
    sock = socket.create_connection((url.hostname, url.port or 80), timeout=60)
    key = base64.b64encode(os.urandom(16)).decode()
    path = url.path + ("?" + url.query if url.query else "")
    sock.sendall(("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
                  "Sec-WebSocket-Protocol: v4.channel.k8s.io\r\n\r\n" % (path, url.netloc, key)).encode())
    f = sock.makefile("rb")
    status_line = f.readline().decode(errors="replace").strip()
    headers = {}
    while True:
        line = f.readline().decode(errors="replace").strip()
        if not line:
            break
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    if " 101 " not in status_line + " " or headers.get("sec-websocket-protocol") != "v4.channel.k8s.io":
        print("cri_stream: no WebSocket: %s %s" % (status_line, headers), file=sys.stderr)
        sys.exit(2)
    if resize:
        send_frame(sock, b"\x04" + json.dumps(resize).encode())
    if stdin is not None:
        send_frame(sock, b"\x00" + stdin)
    status = None
    seen, opened, error = b"", set(), b""
    while True:
        try:
            opcode, payload = read_frame(f)
        except (EOFError, OSError):
            break
        if opcode == 8:  # close
            break
        if opcode == 9:  # ping
            send_frame(sock, payload, opcode=10)
            continue
        if opcode not in (1, 2) or not payload:
            continue
        channel, data = payload[0], payload[1:]
        if port_forward:
            if channel not in opened:  # the port's number first on each channel
                opened.add(channel)
                data = data[2:]
            if channel == 1:
                error += data
                continue
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
            seen += data
            if until and until in seen:
                sys.exit(0)
            continue
        if channel in (1, 2):
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
            seen += data
            if until and until in seen:
                sys.exit(0)
        elif channel == 3 and data:
            status = json.loads(data)
    if port_forward:
        if error or (until and until not in seen):
            print("cri_stream: port forward: %s" % error.decode(errors="replace"), file=sys.stderr)
            sys.exit(2)
        sys.exit(0)
    if status is None:
        print("cri_stream: no status from the server", file=sys.stderr)
        sys.exit(2)
    if status.get("status") == "Success":
        sys.exit(0)
    for cause in status.get("details", {}).get("causes", []):
        if cause.get("reason") == "ExitCode":
            sys.exit(int(cause["message"]))
    print("cri_stream: %s" % json.dumps(status), file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    main()
