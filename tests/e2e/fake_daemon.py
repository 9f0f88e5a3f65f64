#!/usr/bin/env python3
"""A stand-in for aord on the shim side (tests of libaor.so only).

    fake_daemon.py SOCKET [--log FILE]

Listens on the Unix socket SOCKET (directory 0700, socket 0600), reads the preamble
line "AOR/1 <host|-> <ip> <port>\\n" of every connection and appends it to FILE (one line
per connection, "BAD <bytes>" for a malformed one, which is then closed). Then:
  * if the client's bytes start with an HTTP method, answers HTTP/1.1 200 with the body
    "preamble: <line>\\n" and closes;
  * otherwise writes "PRE <line>\\n" and echoes every byte back until EOF.
Prints "ready" on stdout once listening. Stops on SIGTERM/SIGINT. stdlib only.
"""
import argparse
import os
import re
import signal
import socket
import sys
import threading

PREAMBLE_RE = re.compile(rb"^AOR/1 (-|[A-Za-z0-9._:-]{1,253}) ([0-9A-Fa-f.:]{2,45}) ([0-9]{1,5})$")
HTTP_METHODS = (b"GET ", b"POST ", b"HEAD ", b"PUT ", b"DELETE ", b"OPTIONS ")
MAX_PREAMBLE = 320


def log_line(path, text):
    if path:
        with open(path, "ab") as f:
            f.write(text + b"\n")


def read_preamble(conn):
    buf = b""
    while b"\n" not in buf and len(buf) < MAX_PREAMBLE:
        chunk = conn.recv(MAX_PREAMBLE - len(buf))
        if not chunk:
            return None, buf
        buf += chunk
    line, sep, rest = buf.partition(b"\n")
    if not sep:
        return None, buf
    return line, rest


def serve(conn, log):
    try:
        line, rest = read_preamble(conn)
        if line is None and not rest:
            return  # ended before any byte: the shim's check that the daemon is up
        m = PREAMBLE_RE.match(line) if line is not None else None
        if m is None or not (1 <= int(m.group(3)) <= 65535):
            log_line(log, b"BAD " + (line if line is not None else rest)[:80])
            return
        log_line(log, line)
        data = rest
        while not (b"\n" in data or len(data) >= 8 or
                   any(data.startswith(x) for x in HTTP_METHODS)):
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
        if any(data.startswith(x) for x in HTTP_METHODS):
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                data += chunk
            body = b"preamble: " + line + b"\n"
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                         b"Content-Length: " + str(len(body)).encode() +
                         b"\r\nConnection: close\r\n\r\n" + body)
            return
        conn.sendall(b"PRE " + line + b"\n")
        if data:
            conn.sendall(data)
        while True:
            chunk = conn.recv(65536)
            if not chunk:
                break
            conn.sendall(chunk)
    except OSError:
        pass
    finally:
        conn.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("socket")
    ap.add_argument("--log")
    args = ap.parse_args()
    d = os.path.dirname(os.path.abspath(args.socket))
    os.makedirs(d, mode=0o700, exist_ok=True)
    try:
        os.unlink(args.socket)
    except FileNotFoundError:
        pass
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(args.socket)
    os.chmod(args.socket, 0o600)
    srv.listen(512)

    def stop(*_):
        try:
            os.unlink(args.socket)
        except OSError:
            pass
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print("ready", flush=True)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn, args.log), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
