#!/usr/bin/env python3
"""Probes of private export-table slots of the real driver that NVIDIA's libraries call. Run on
the GPU machine, natively (the real libcuda.so.1, not Sluice's): it records what the frontend's
tables must reproduce (docs/frontend-internals.md).

6e163fbe... [7], cuFFT's way to get the kernel of a module it loads without naming it
(frontend/exports/et_module_functions.c):
1. Loads a PTX module of three kernels and calls [7] directly: return value, what the visitor
   gets (function, third argument) against cuModuleEnumerateFunctions / cuModuleGetFunction,
   the module, the context and the library the module came from; with a NULL context too.
2. Patches [7] in the driver's table with a logging wrapper and runs torch.fft, to see the
   arguments cuFFT passes and what it gets back.

21318c60... [51] and [39], which cuBLAS calls to key its default workspace by stream
(frontend/exports/et_context_id.c): for the NULL, legacy, per-thread and a created stream, what they
return and how [39]'s value compares with cuStreamGetId.

Prints one line per fact. Not run in CI (needs the GPU)."""
import ctypes
import sys

ID = bytes.fromhex("6e163fbeb958444d835ce182aff1991e")
PTX = b""".version 8.0
.target sm_90
.address_size 64
.visible .entry k_a() { ret; }
.visible .entry k_b() { ret; }
.visible .entry k_c() { ret; }
"""

VISIT = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64)
SLOT7 = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                         ctypes.c_void_p)


def check(rc, what):
    if rc != 0:
        print(f"FAIL {what}: rc {rc}")
        sys.exit(1)


def streams(cu, ctx):
    uuid = (ctypes.c_ubyte * 16).from_buffer_copy(bytes.fromhex("21318c60971432488ca641ff7324c8f2"))
    table = ctypes.c_void_p()
    check(cu.cuGetExportTable(ctypes.byref(table), ctypes.byref(uuid)), "cuGetExportTable(21318c60)")
    slots = (ctypes.c_uint64 * 93).from_address(table.value)
    s51 = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                           ctypes.c_int)(slots[51])
    s39 = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)(slots[39])
    own = ctypes.c_void_p()
    check(cu.cuStreamCreate(ctypes.byref(own), 0), "cuStreamCreate")
    own2 = ctypes.c_void_p()
    check(cu.cuStreamCreate(ctypes.byref(own2), 1), "cuStreamCreate")
    for label, st in (("NULL", 0), ("legacy", 1), ("per-thread", 2), ("created", own.value),
                      ("created non-blocking", own2.value), ("-1", (1 << 64) - 1)):
        for c in (ctx.value, None):
            obj = ctypes.c_uint64(0xAAAA)
            r51 = s51(c, st, ctypes.byref(obj), 1 if st == 2 else 0)
            val = ctypes.c_uint64(0xBBBB)
            r39 = s39(c, ctypes.c_void_p(obj.value), ctypes.byref(val)) if r51 == 0 else None
            sid = ctypes.c_uint64(0)
            rid = cu.cuStreamGetId(ctypes.c_void_p(st), ctypes.byref(sid)) if st != (1 << 64) - 1 else None
            print(f"21318c60[51](ctx {'current' if c else 'NULL'}, stream {label}) -> {r51}, object "
                  f"{obj.value:#x} (stream handle {st:#x}); [39] -> {r39}, value {val.value:#x}; "
                  f"cuStreamGetId -> {rid}, {sid.value:#x}")
    # does the same stream give the same object and value twice, and another thread the same?
    obj = ctypes.c_uint64(0)
    s51(ctx.value, own.value, ctypes.byref(obj), 0)
    obj2 = ctypes.c_uint64(0)
    s51(ctx.value, own.value, ctypes.byref(obj2), 0)
    print(f"created stream twice: objects {obj.value:#x} {obj2.value:#x}")


def main():
    cu = ctypes.CDLL("libcuda.so.1")
    check(cu.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    check(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ctx = ctypes.c_void_p()
    check(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "retain")
    check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    uuid = (ctypes.c_ubyte * 16).from_buffer_copy(ID)
    table = ctypes.c_void_p()
    check(cu.cuGetExportTable(ctypes.byref(table), ctypes.byref(uuid)), "cuGetExportTable")
    slots = (ctypes.c_uint64 * 8).from_address(table.value)
    print(f"table size {slots[0]} bytes = {slots[0] // 8} slots")
    orig = SLOT7(slots[7])

    mod = ctypes.c_void_p()
    check(cu.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(PTX)), "cuModuleLoadData")
    n = ctypes.c_uint()
    check(cu.cuModuleGetFunctionCount(ctypes.byref(n), mod), "cuModuleGetFunctionCount")
    fns = (ctypes.c_void_p * n.value)()
    check(cu.cuModuleEnumerateFunctions(fns, n, mod), "cuModuleEnumerateFunctions")
    byname = {}
    for k in (b"k_a", b"k_b", b"k_c"):
        f = ctypes.c_void_p()
        check(cu.cuModuleGetFunction(ctypes.byref(f), mod, k), "cuModuleGetFunction")
        byname[f.value] = k.decode()
    print(f"module {mod.value:#x} ctx {ctx.value:#x} count {n.value} "
          f"enumerated {[hex(x) for x in fns]} by name {{{', '.join(f'{v}: {k:#x}' for k, v in byname.items())}}}")

    def run(label, c, m):
        seen = []
        cb = VISIT(lambda op, node, owner: seen.append((op, node, owner)))
        r = orig(c, m, ctypes.cast(cb, ctypes.c_void_p), ctypes.c_void_p(0x5150))
        name = ctypes.c_char_p()
        desc = []
        for op, node, owner in seen:
            rc = cu.cuFuncGetName(ctypes.byref(name), ctypes.c_void_p(node))
            desc.append(f"(opaque {op or 0:#x}, node {node or 0:#x} [{byname.get(node, 'not by name')}, "
                        f"{'enumerated' if node in list(fns) else 'not enumerated'}, name rc {rc} "
                        f"{name.value}], owner {owner:#x} [module {owner == m}, ctx {owner == (c or 0)}])")
        print(f"{label}: returned {r}, visited {len(seen)}: {'; '.join(desc)}")
        for _, _, owner in seen:
            print(f"  owner {owner:#x} as a string: {ctypes.string_at(owner, 64).split(bytes(1))[0]!r}")
        return seen

    run("[7](ctx, module)", ctx.value, mod.value)
    run("[7](NULL, module)", None, mod.value)

    lib = ctypes.c_void_p()
    check(cu.cuLibraryLoadData(ctypes.byref(lib), ctypes.c_char_p(PTX), None, None, 0, None, None, 0),
          "cuLibraryLoadData")
    lmod = ctypes.c_void_p()
    check(cu.cuLibraryGetModule(ctypes.byref(lmod), lib), "cuLibraryGetModule")
    seen = run("[7](ctx, module of a library)", ctx.value, lmod.value)
    for _, _, owner in seen[:1]:
        print(f"library {lib.value:#x} module {lmod.value:#x}: owner is the library: {owner == lib.value}")

    # 2. what cuFFT passes: patch the slot
    libc = ctypes.CDLL(None)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    page = table.value & ~0xFFF
    if libc.mprotect(page, 0x2000, 3) != 0:
        print("cannot make the table writable; cuFFT part skipped")
        streams(cu, ctx)
        return
    calls = []

    def logged(c, m, visit, opaque):
        seen = []
        inner = VISIT(visit)

        def relay(op, node, owner):
            seen.append((node, owner))
            inner(op, node, owner)

        relay_c = VISIT(relay)
        cur = ctypes.c_void_p()
        cu.cuCtxGetCurrent(ctypes.byref(cur))
        r = orig(c, m, ctypes.cast(relay_c, ctypes.c_void_p), opaque)
        cnt = ctypes.c_uint()
        crc = cu.cuModuleGetFunctionCount(ctypes.byref(cnt), ctypes.c_void_p(m))
        calls.append(f"ctx {c or 0:#x} (current {cur.value or 0:#x}) module {m or 0:#x} "
                     f"(count rc {crc} n {cnt.value}) -> {r}, visited "
                     f"{[(hex(a or 0), hex(b)) for a, b in seen]}")
        return r

    hook = SLOT7(logged)
    slots[7] = ctypes.cast(hook, ctypes.c_void_p).value
    import torch
    x = torch.randn(1 << 16, device="cuda")
    f = torch.fft.rfft(x)
    g = torch.fft.ifft(torch.fft.fft(x.to(torch.complex64)))
    torch.cuda.synchronize()
    print(f"torch.fft ran: rfft |f| sum {float(f.abs().sum()):.6g}, ifft(fft) max err "
          f"{float((g.real - x).abs().max()):.3g}")
    print(f"cuFFT called [7] {len(calls)} times")
    for c in calls[:12]:
        print("  " + c)
    slots[7] = ctypes.cast(orig, ctypes.c_void_p).value
    streams(cu, ctx)


if __name__ == "__main__":
    main()
