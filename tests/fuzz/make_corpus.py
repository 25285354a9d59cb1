#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_envelope (tests/fuzz/corpus/fuzz_envelope/): a few valid
ClientMessage/ServerMessage encodings, hand-encoded from the table's call ids.
Re-run after changing the envelope: python3 tests/fuzz/make_corpus.py"""
import os
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(ROOT, "proto/gen"))
import apitable  # noqa: E402

IDS = {c.name: c.id for c in apitable.parse(os.path.join(ROOT, "proto/api/cuda_driver.api"))}


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def vfield(num, value):
    return varint(num << 3) + varint(value)


def lfield(num, payload):
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def call(seq, name, args, bulk=0):
    return (vfield(1, seq) + vfield(2, IDS[name]) + (vfield(3, bulk) if bulk else b"")
            + lfield(100 + IDS[name], args))


def reply(seq, name, out, result=0):
    return (vfield(1, seq) + vfield(2, IDS[name]) + (vfield(3, result) if result else b"")
            + lfield(100 + IDS[name], out))


SEEDS = {
    "open": lfield(1, vfield(1, 1) + vfield(2, 13000) + lfield(3, b"seed")),
    "close": lfield(3, vfield(1, 0) + lfield(2, b"bye")),
    "calls": lfield(2, lfield(1, call(1, "cuInit", b""))
                    + lfield(1, call(2, "cuMemAlloc_v2", vfield(2, 4096)))
                    + lfield(1, call(3, "cuDeviceGetAttribute", vfield(2, 16) + vfield(3, 0)))),
    "bulk": lfield(2, lfield(1, call(7, "cuMemcpyHtoD_v2", vfield(1, 0x7000) + vfield(3, 64),
                                     bulk=64))),
    "accept": lfield(1, vfield(1, 1) + vfield(2, 13000) + vfield(3, 42)),
    "replies": lfield(2, lfield(1, reply(1, "cuDriverGetVersion", vfield(1, 13000)))
                      + lfield(1, reply(2, "cuMemAlloc_v2", vfield(1, 0x7000)))),
    # SessionOpen with pid and hostname; SessionAccept with one DeviceInfo
    "open_pid": lfield(1, vfield(1, 1) + vfield(2, 13000) + vfield(4, 4242) + lfield(5, b"guest")),
    "accept_devices": lfield(1, vfield(1, 1) + vfield(2, 13000) + vfield(3, 42) + lfield(
        6, vfield(1, 0) + lfield(2, b"GPU") + lfield(3, bytes(16)) + vfield(4, 1 << 34)
        + lfield(5, varint(1024) + varint(16)) + lfield(6, bytes(8)) + vfield(8, 0x1000))),
    # HostCallback (server kind 4) and CallbackDone (client kind 4)
    "callback": lfield(4, vfield(1, 1) + vfield(2, 0x401000) + vfield(3, 0xdead)),
    "callback_done": lfield(4, vfield(1, 1)),
    # internal calls: slFence with a context, and its reply carrying printf output
    "fence": lfield(2, lfield(1, call(1, "slFence", b"") + vfield(5, 0x42))),
    "fence_reply": lfield(2, lfield(1, reply(1, "slFence", b"") + lfield(7, b"hello\n"))),
}

out_dir = os.path.join(ROOT, "tests/fuzz/corpus/fuzz_envelope")
os.makedirs(out_dir, exist_ok=True)
for name, data in SEEDS.items():
    with open(os.path.join(out_dir, name + ".bin"), "wb") as f:
        f.write(data)
print(f"wrote {len(SEEDS)} seeds to {out_dir}")
