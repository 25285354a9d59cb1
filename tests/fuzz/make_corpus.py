#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target (tests/fuzz/corpus/<target>/): a few valid
inputs each, hand-encoded (protobuf from the schemas' field numbers, the envelope's call ids
from the API table). Re-run after changing what a target parses:
python3 tests/fuzz/make_corpus.py"""
import base64
import json
import os
import struct
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
    # bulk lanes: SessionOpen asking for 4, SessionAccept offering 2 (ports, 32-byte tickets), a
    # call of 4 lane pieces, a reply of 2, LaneBulk both ways (client and server kind 5)
    "open_lanes": lfield(1, vfield(1, 1) + vfield(2, 13000) + vfield(7, 4)),
    "accept_lanes": lfield(1, vfield(1, 1) + vfield(3, 42) + vfield(7, 48000) + lfield(8, bytes(32))
                           + lfield(9, varint(48001) + varint(48002))
                           + lfield(10, bytes(32)) + lfield(10, bytes(range(32)))),
    "lane_call": lfield(2, lfield(1, call(7, "cuMemcpyHtoD_v2", vfield(1, 0x7000) + vfield(3, 1 << 20),
                                          bulk=1 << 20) + vfield(7, 4) + vfield(8, 1))),
    "lane_reply": lfield(2, lfield(1, reply(9, "cuMemcpyDtoH_v2", b"") + vfield(5, 1 << 20)
                                   + vfield(11, 2))),
    "lane_bulk": lfield(5, vfield(1, 7) + vfield(2, 1) + vfield(3, 262144) + vfield(4, 262144)),
}


def sfield(num, text):
    return lfield(num, text.encode())


def b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=")


INST = "3d6b0f5e-9a1c-4e27-8f34-1b2c3d4e5f60"
PROJ = "f241e906010e4917ae8153f4fb8aa021"
CLAIMS = json.dumps({"iss": "sluice-nova-hook", "aud": "sluice-agent", "sub": INST,
                     "project_id": PROJ, "iat": 1799999990, "exp": 1800000500,
                     "jti": "5e1ce0de-0000-4000-8000-000000000001"}).encode()
HEADER = b'{"alg":"EdDSA","typ":"JWT","kid":"AAAAAAAAAAAAAAAA"}'
TOKEN = b64(HEADER) + b"." + b64(CLAIMS) + b"." + b64(bytes(64))

# fuzz_token: byte 0 picks raw token (0), claims (1, 5: with the issuer check), header (2)
TOKEN_SEEDS = {
    "raw": b"\x00" + TOKEN,
    "claims": b"\x01" + CLAIMS,
    "claims_issuer": b"\x05" + CLAIMS,
    "header": b"\x02" + HEADER,
    "claims_expired": b"\x01" + CLAIMS.replace(b"1800000500", b"1700000500"),
}

NOVA_BODY = json.dumps({"project-id": PROJ, "instance-id": INST,
                        "image-id": "fe55c69a-8b2e-4bbc-811a-9ad2023a0426", "user-data": None,
                        "hostname": "vm", "metadata": {}, "boot-roles": "member,reader"}).encode()
VENDORDATA_SEEDS = {
    "placed": NOVA_BODY,
    "unknown": NOVA_BODY.replace(INST.encode(), b"00000000-0000-4000-8000-000000000000"),
    "other_project": NOVA_BODY.replace(PROJ.encode(), b"0" * 32),
    "array": b"[1, 2, 3]",
}

AGENT = (sfield(1, "gpu1") + sfield(2, "tcp://192.0.2.1:7400") + vfield(3, 8)
         + lfield(4, sfield(1, "GPU-" + INST) + sfield(2, "H100") + vfield(3, 1 << 36))
         + sfield(5, "0.1.0"))
RECORD = (sfield(1, "11111111-0000-4000-8000-000000000001") + sfield(2, INST) + sfield(3, PROJ)
          + sfield(4, "g1.small") + sfield(5, "GPU-" + INST) + vfield(6, 1)
          + vfield(7, 1799999000 * 10**9) + vfield(8, 1799999010 * 10**9) + vfield(9, 10**9)
          + vfield(10, 10**9) + vfield(11, 5) + vfield(15, 40) + sfield(19, "events")
          + vfield(20, 1))
REGISTRY_SEEDS = {
    "register": vfield(1, 1) + lfield(10, AGENT),
    "place": vfield(1, 2) + lfield(12, sfield(1, INST) + sfield(2, PROJ) + sfield(3, "g1.small")
                                   + sfield(4, "gpu1") + vfield(5, 1799999000)),
    "remove": vfield(1, 3) + lfield(13, sfield(1, INST) + sfield(2, "gpu1") + vfield(3, 1)),
    "usage": vfield(1, 4) + lfield(14, lfield(1, RECORD)),
    "ping": vfield(1, 5) + lfield(15, vfield(1, 7)),
    "unregister": vfield(1, 6) + lfield(11, AGENT),
}


def elf64(shnum=0, phnum=0, extra=b""):
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    hdr = ident + struct.pack("<HHIQQQIHHHHHH", 2, 190, 1, 0, 64 if phnum else 0,
                              64 + 56 * phnum if shnum else 0, 0, 64, 56, phnum, 64, shnum, 0)
    ph = struct.pack("<IIQQQQQQ", 1, 5, 0, 0, 0, 64, 64, 8) * phnum
    sh = struct.pack("<IIQQQQIIQQ", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0) * shnum
    return hdr + ph + sh + extra


FATBIN = struct.pack("<IHHQ", 0xBA55ED50, 1, 16, 32) + bytes(32)
IMAGE_SEEDS = {
    "fatbin_wrapped": b"\x01" + FATBIN,
    "fatbin": b"\x02" + FATBIN,
    "elf": b"\x03" + elf64(),
    "elf_sections": b"\x03" + elf64(shnum=2, phnum=1),
    "elf_short": b"\x03" + b"\x7fEL",
    "ptx": b"\x04" + b".version 8.0\n.target sm_90\n.address_size 64\n\x00",
}

SLA = (sfield(1, "g1.small") + sfield(2, "gold") + varint(3 << 3 | 1) + struct.pack("<d", 0.5)
       + vfield(4, 1 << 30) + vfield(5, 4) + sfield(6, "GPU-" + INST))
GRANT = (sfield(1, INST) + sfield(2, PROJ) + lfield(3, bytes(range(32))) + vfield(4, 1800000000)
         + lfield(5, SLA) + sfield(6, "instance-0000002a"))
# fuzz_control: byte 0 odd = decode, add the key, handle; even = the frame as it is
CONTROL_SEEDS = {
    "grant": b"\x01" + vfield(1, 1) + lfield(10, GRANT),
    "grant_set": b"\x01" + vfield(1, 2) + lfield(15, lfield(1, GRANT) + sfield(2, "resync")),
    "grant_set_empty": b"\x01" + vfield(1, 3) + lfield(15, sfield(2, "resync")),
    "revoke": b"\x01" + vfield(1, 4) + lfield(11, sfield(1, INST) + sfield(2, "destroyed")),
    "usage_ack": b"\x01" + vfield(1, 5) + lfield(12, sfield(1, "11111111-0000-4000-8000-000000000001")),
    "ping": b"\x01" + vfield(1, 6) + lfield(14, vfield(1, 99)),
    "shutdown": b"\x01" + vfield(1, 7) + lfield(13, sfield(1, "bye")),
    "unkeyed_grant": b"\x00" + vfield(1, 8) + lfield(10, GRANT),
}
REPORT_RECORD = RECORD.replace(vfield(20, 1), b"")
REPORT_SEEDS = {
    "usage": vfield(1, 1) + lfield(11, REPORT_RECORD.replace(
        vfield(7, 1799999000 * 10**9) + vfield(8, 1799999010 * 10**9),
        vfield(7, 1700000000 * 10**9) + vfield(8, 1700000010 * 10**9))),
    "usage_final": vfield(1, 2) + lfield(11, RECORD.replace(
        vfield(7, 1799999000 * 10**9) + vfield(8, 1799999010 * 10**9),
        vfield(7, 1700000000 * 10**9) + vfield(8, 1700000010 * 10**9))),
    "opened": vfield(1, 3) + lfield(12, vfield(1, 1) + sfield(2, INST) + sfield(3, PROJ)
                                    + vfield(4, 7) + sfield(5, "")),
    "closed": vfield(1, 4) + lfield(12, vfield(1, 2) + sfield(2, INST) + sfield(3, PROJ)
                                    + vfield(4, 7) + sfield(5, "peer gone")),
    "hello": vfield(1, 5) + lfield(14, sfield(1, PROJ) + vfield(2, 4242)
                                   + sfield(3, "tcp://127.0.0.1:47001") + sfield(4, "0.1.0")),
    "ack": vfield(1, 6) + lfield(10, vfield(1, 3) + vfield(2, 1)),
}


def csr_der():
    """An EC P-256 certificate request (DER) made with the openssl command line."""
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        key = os.path.join(d, "k.pem")
        subprocess.run(["openssl", "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out",
                        key], check=True, capture_output=True)
        return subprocess.run(["openssl", "req", "-new", "-key", key, "-subj", "/CN=sluice-guest",
                               "-outform", "DER"], check=True, capture_output=True).stdout


ENROLL_INST = "6f1e0c2a-1b7d-4c55-9a0e-3f2b8d7c1e42"
CSR = csr_der()
ENROLL_SEEDS = {
    "request": b"\x00" + sfield(1, TOKEN.decode()) + lfield(2, CSR) + sfield(3, "sluice-enroll/0.1"),
    "csr": b"\x01" + CSR,
    "locate_from": b"\x02" + b"127.0.0.1",
    "locate_v6": b"\x02" + b"2001:db8::5",
    "locate_raw": b"\x00" + lfield(4, bytes(300)) + sfield(3, "sluice-enroll/0.1"),
    "request_v6": b"\x03" + sfield(1, TOKEN.decode()) + lfield(2, CSR),
}

TARGETS = {"fuzz_envelope": SEEDS, "fuzz_token": TOKEN_SEEDS, "fuzz_vendordata": VENDORDATA_SEEDS,
           "fuzz_registry": REGISTRY_SEEDS, "fuzz_image": IMAGE_SEEDS,
           "fuzz_control": CONTROL_SEEDS, "fuzz_report": REPORT_SEEDS,
           "fuzz_enroll": ENROLL_SEEDS}

for target, seeds in TARGETS.items():
    out_dir = os.path.join(ROOT, "tests/fuzz/corpus", target)
    os.makedirs(out_dir, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(out_dir, name + ".bin"), "wb") as f:
            f.write(data)
    print(f"wrote {len(seeds)} seeds to {out_dir}")
