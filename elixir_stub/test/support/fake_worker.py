"""A misbehaving port worker for the pool tests: announces readiness, then misbehaves on request.

Modes: `hang` (never answers), `corrupt` (answers with bytes that are not MessagePack), `exit`
(exits with status 7), `noready` (never announces readiness). Needs only the standard library.
"""

import struct
import sys
import time

READY = b"\x81\xa5event\xa5ready"  # {"event": "ready"}


def send(body: bytes) -> None:
    sys.stdout.buffer.write(struct.pack(">I", len(body)) + body)
    sys.stdout.buffer.flush()


def main(mode: str) -> None:
    if mode == "noready":
        time.sleep(3600)
    send(READY)
    while True:
        header = sys.stdin.buffer.read(4)
        if len(header) < 4:
            return
        sys.stdin.buffer.read(struct.unpack(">I", header)[0])
        if mode == "hang":
            time.sleep(3600)
        elif mode == "corrupt":
            send(b"\xc1\xc1 not msgpack")
        elif mode == "exit":
            sys.exit(7)


main(sys.argv[1])
