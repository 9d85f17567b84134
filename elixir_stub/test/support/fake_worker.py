"""A misbehaving port worker for the pool tests: announces readiness, then misbehaves on request.

Modes: `hang` (never answers), `corrupt` (answers with bytes that are not MessagePack), `exit`
(exits with status 7), `noready` (never announces readiness), `record LOG` (appends every request
body to the file LOG, so a test can prove which requests reached a worker; a request that mentions
`block` is never answered, any other is answered with a nil result). Needs only the standard library.
"""

import struct
import sys
import time

READY = b"\x81\xa5event\xa5ready"  # {"event": "ready"}


def send(body: bytes) -> None:
    sys.stdout.buffer.write(struct.pack(">I", len(body)) + body)
    sys.stdout.buffer.flush()


def reply_nil(body: bytes) -> None:
    # The request is a map whose first key is "id" (the stub's encoder writes keys sorted), so the
    # id is the integer right after it: a positive fixint, or a uint8/uint16 for larger ids.
    at = body.index(b"\xa2id") + 3
    tag = body[at]
    if tag < 0x80:
        id_bytes = bytes([tag])
    elif tag == 0xCC:
        id_bytes = body[at : at + 2]
    else:
        id_bytes = body[at : at + 3]
    send(b"\x83\xa2id" + id_bytes + b"\xa2ok\xc3\xa6result\xc0")  # {"id", "ok": true, "result": nil}


def record(log: str, body: bytes) -> None:
    with open(log, "ab") as out:
        out.write(body + b"\n")
    if b"block" in body:
        time.sleep(3600)
    reply_nil(body)


def main(mode: str, *args: str) -> None:
    if mode == "noready":
        time.sleep(3600)
    send(READY)
    while True:
        header = sys.stdin.buffer.read(4)
        if len(header) < 4:
            return
        body = sys.stdin.buffer.read(struct.unpack(">I", header)[0])
        if mode == "record":
            record(args[0], body)
        elif mode == "hang":
            time.sleep(3600)
        elif mode == "corrupt":
            send(b"\xc1\xc1 not msgpack")
        elif mode == "exit":
            sys.exit(7)


main(*sys.argv[1:])
