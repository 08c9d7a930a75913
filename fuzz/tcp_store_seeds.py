#!/usr/bin/env python3
"""Writes the seeds of tcp_store_fuzzer (fuzz/corpus/tcp_store/): sessions in
the target's input format (see fuzz/tcp_store_fuzzer.cc), with the clients'
hellos and requests as wire bytes, so that mutations start from valid
messages.

    fuzz/tcp_store_seeds.py fuzz/corpus/tcp_store
"""
import hashlib
import hmac
import os
import struct
import sys

SECRET = b"fuzz secret"  # kSecret
CLIENT_LABEL = b"chorus store client proof v2"
SEND, HELLO, REQUEST, READ, TICK, DROP = range(6)
OP_SET, OP_GET, OP_ADD, OP_ABORT = 1, 2, 3, 4


def caps(key, value, queue, stored):
    """The caps byte: indices into kKeyCaps, kValueCaps, kQueueCaps, kStoredCaps."""
    return key | value << 2 | queue << 4 | stored << 6


DEFAULT_CAPS = caps(2, 2, 3, 3)  # 64, 256, 5000, 1 MiB


def server_nonce(connect):
    """The target's nonce for its connect-th connection (1-based)."""
    return bytes([connect]) * 32


def client_hello(connect, secret=SECRET, client=b"\x42" * 32, magic=0x43534843, version=2):
    proof = bytes(32)
    if secret:
        proof = hmac.new(secret, CLIENT_LABEL + server_nonce(connect) + client, hashlib.sha256).digest()
    return struct.pack("<II", magic, version) + client + proof


def request(op, key, value=b"", timeout_ms=0):
    return struct.pack("<IBIQQ", 0x53524843, op, len(key), len(value), timeout_ms) + key + value


def delta(d):
    return struct.pack("<q", d)


class Session:
    def __init__(self, secret=True, caps_byte=DEFAULT_CAPS, clock=0):
        self.b = bytearray([1 if secret else 0, caps_byte, clock])

    def step(self, action, slot, *operands):
        self.b.append(action << 3 | slot)
        self.b.extend(operands)
        return self

    def send(self, slot, data):
        for i in range(0, len(data), 255):  # one step carries at most 255 bytes
            piece = data[i:i + 255]
            self.step(SEND, slot, len(piece))
            self.b.extend(piece)
        return self

    def read(self, slot, n=0):
        return self.step(READ, slot, n)

    def tick(self, d):
        return self.step(TICK, 0, d)


def seeds():
    s = {}
    # The secret's proof, then set, get, overwrite; requests split byte-wise.
    x = Session().read(0).send(0, client_hello(1)).read(0)
    x.send(0, request(OP_SET, b"chorus/comm0/addr/1", b"10.0.0.1:29500")).read(0)
    for b in request(OP_GET, b"chorus/comm0/addr/1", timeout_ms=5000):
        x.send(0, bytes([b]))
    x.read(0).send(0, request(OP_SET, b"chorus/comm0/addr/1", b"\x00\x01\xff")).read(0)
    s["secret_set_get"] = x
    # An open store: a get that waits, answered by another client's set; a
    # wait (a get per key) that times out.
    x = Session(secret=False).read(0).read(1)
    x.send(0, client_hello(1, secret=None)).send(1, client_hello(2, secret=None)).read(0).read(1)
    x.send(1, request(OP_GET, b"late", timeout_ms=10000)).tick(5)
    x.send(0, request(OP_SET, b"late", b"here")).read(0).read(1)
    x.send(1, request(OP_GET, b"late", timeout_ms=100) + request(OP_GET, b"never", timeout_ms=100))
    x.tick(5).tick(5).read(1)
    s["open_wait_and_timeout"] = x
    # Counters: adds from two clients, a set to the largest int64, an add
    # that would overflow it, an add on text.
    x = Session().step(HELLO, 0).step(HELLO, 1).read(0).read(1)
    x.send(0, request(OP_ADD, b"counter", delta(1))).send(1, request(OP_ADD, b"counter", delta(5)))
    x.send(0, request(OP_SET, b"n", b"9223372036854775807")).send(0, request(OP_ADD, b"n", delta(1)))
    x.send(0, request(OP_ADD, b"n", delta(-7))).send(1, request(OP_ADD, b"counter", delta(-2**63)))
    x.send(1, request(OP_SET, b"t", b"12x")).send(1, request(OP_ADD, b"t", delta(1)))
    x.send(1, request(OP_GET, b"n")).read(0).read(1)
    s["counters"] = x
    # Abort: a waiter is answered with the reason, later requests too; a
    # second abort keeps the first reason.
    x = Session().step(HELLO, 0).step(HELLO, 1).step(HELLO, 2).read(0).read(1).read(2)
    x.send(0, request(OP_GET, b"never", timeout_ms=60000))
    x.send(1, request(OP_ABORT, b"", b"rank 1: bad value")).read(0).read(1)
    x.send(2, request(OP_SET, b"k", b"v")).send(1, request(OP_ABORT, b"", b"second"))
    x.send(0, request(OP_GET, b"k")).read(0).read(1).read(2)
    s["abort"] = x
    # Refusals: a wrong proof with a request behind it, a wrong version, a
    # bad magic; a client that never says hello and runs out of time.
    x = Session().read(0).send(0, client_hello(1, secret=b"guess") + request(OP_GET, b"k"))
    x.read(0).send(1, client_hello(2, version=1)).read(1).send(2, client_hello(3, magic=0))
    x.read(3).tick(201).tick(204).read(3)
    s["refusals_and_hello_deadline"] = x
    # Small caps: a client that never reads its replies, a set over the
    # store's total, a key over its cap, a malformed request.
    x = Session(caps_byte=caps(1, 1, 1, 1))
    x.step(HELLO, 0).step(HELLO, 1).step(HELLO, 2).step(HELLO, 3).read(1).read(2).read(3)
    x.send(1, request(OP_SET, b"big", b"x" * 32)).read(1)
    x.send(0, b"".join(request(OP_GET, b"big") for _ in range(4)))
    x.send(1, request(OP_SET, b"more", b"y" * 32)).read(1)
    x.send(2, request(OP_SET, b"a-key-over-16-bytes", b"v"))
    x.send(3, request(OP_GET, b"k", b"a value")).read(3)
    s["caps"] = x
    # Requests pipelined behind a get that waits run once it is answered.
    x = Session().step(HELLO, 0).step(HELLO, 1).read(0).read(1)
    x.send(1, request(OP_GET, b"k", timeout_ms=5000) + request(OP_SET, b"after", b"x"))
    x.send(0, request(OP_SET, b"k", b"v")).send(0, request(OP_GET, b"after")).read(0).read(1)
    x.step(DROP, 1).step(HELLO, 1).read(1).send(1, request(OP_GET, b"after")).read(1, 20).read(1)
    s["pipelined_behind_a_get"] = x
    # The structured request step: set, get, add, abort through it.
    x = Session().step(HELLO, 0).read(0)
    x.step(REQUEST, 0, 0, 1, 3, 0)
    x.b.extend(b"abc")
    x.step(REQUEST, 0, 1, 1, 0, 50).step(REQUEST, 0, 2, 3, 0, 0).step(REQUEST, 0, 1, 2, 0, 10)
    x.tick(2).tick(10).step(REQUEST, 0, 3, 0, 5, 0)
    x.b.extend(b"stop!")
    x.read(0)
    s["request_steps"] = x
    return s


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus", "tcp_store")
    os.makedirs(out, exist_ok=True)
    for name, session in seeds().items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(bytes(session.b))


if __name__ == "__main__":
    main()
