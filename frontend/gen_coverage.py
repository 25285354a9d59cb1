#!/usr/bin/env python3
"""Generates docs/coverage.md: every CUDA driver call of proto/api/cuda_driver.api and what
libcuda.so.1 does with it. A call's state follows from the table flags and the frontend
sources (a hand-written call is implemented when frontend/*.c defines it):

  remoted (generated)   a generated stub forwards it (async: coalesced, not answered)
  remoted (hand-written) hand code in frontend/ marshals it and the backend runs it
  local                 answered in the guest, never sent (LOCAL below)
  not supported         CUDA_ERROR_NOT_SUPPORTED, logged once (sl_fe_unsupported)

Usage: gen_coverage.py --write|--check [docs/coverage.md]"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TABLE = os.path.join(ROOT, "proto", "api", "cuda_driver.api")
FRONTEND = os.path.join(ROOT, "frontend")

# Hand-written calls answered without a round trip.
LOCAL = {
    "cuInit": "connects (lazily) and opens the session",
    "cuDriverGetVersion": "backend driver version, >= 13000; connects lazily",
    "cuDeviceGet": "SessionAccept.devices", "cuDeviceGetCount": "SessionAccept.devices",
    "cuDeviceGetName": "SessionAccept.devices", "cuDeviceGetUuid": "SessionAccept.devices",
    "cuDeviceGetUuid_v2": "SessionAccept.devices", "cuDeviceGetLuid": "SessionAccept.devices",
    "cuDeviceTotalMem": "SessionAccept.devices", "cuDeviceTotalMem_v2": "SessionAccept.devices",
    "cuDeviceGetAttribute": "SessionAccept.devices", "cuDeviceGetPCIBusId": "from attributes",
    "cuDeviceComputeCapability": "from attributes", "cuDeviceGetProperties": "from attributes",
    "cuDevicePrimaryCtxRetain": "DeviceInfo.primary_context, counted locally",
    "cuDevicePrimaryCtxRelease": "counted locally", "cuDevicePrimaryCtxRelease_v2": "counted locally",
    "cuCtxSetCurrent": "per-thread stack", "cuCtxGetCurrent": "per-thread stack",
    "cuCtxPushCurrent": "per-thread stack", "cuCtxPushCurrent_v2": "per-thread stack",
    "cuCtxPopCurrent": "per-thread stack", "cuCtxPopCurrent_v2": "per-thread stack",
    "cuCtxGetDevice": "per-thread stack", "cuCtxGetDevice_v2": "per-thread stack",
    "cuCtxGetId": "low 56 bits of the backend's context id",
    "cuGetProcAddress": "versioned resolver", "cuGetProcAddress_v2": "versioned resolver",
    "cuGetExportTable": "private tables served locally",
    "cuMemAllocHost": "guest memory, tracked; up to 4 KiB: mapped twin in the backend",
    "cuMemAllocHost_v2": "guest memory, tracked; up to 4 KiB: mapped twin in the backend",
    "cuMemHostAlloc": "guest memory, tracked; DEVICEMAP or up to 4 KiB: mapped twin in the backend",
    "cuMemFreeHost": "guest memory",
    "cuMemHostRegister": "bookkeeping; DEVICEMAP: mapped twin in the backend",
    "cuMemHostRegister_v2": "bookkeeping; DEVICEMAP: mapped twin in the backend",
    "cuMemHostUnregister": "bookkeeping",
    "cuMemHostGetDevicePointer": "the mapped twin's device address",
    "cuMemHostGetDevicePointer_v2": "the mapped twin's device address",
    "cuGetErrorName": "table generated from cuda.h's CUresult enum",
    "cuGetErrorString": "table generated from cuda.h's CUresult doxygen comments",
    "cuMemHostGetFlags": "bookkeeping",
    "cuDevicePrimaryCtxGetState": "active = retained, as natively; flags asked once, then as set",
}

NOTES = {
    "cuMemcpyDtoHAsync_v2": "completes before returning: one synchronous call (copy in stream order, the backend synchronizes the stream); over 16 MiB the stream is synchronized first",
    "cuMemcpyAsync": "host destination: completes before returning",
    "cuMemcpy2DAsync_v2": "host destination: completes before returning",
    "cuMemcpy3DAsync_v2": "host destination: completes before returning",
    "cuMemcpy": "unified addresses: guest memory is told from device memory locally",
    "cuMemcpyHtoD_v2": "split into 16 MiB calls", "cuMemcpyDtoH_v2": "split into 16 MiB calls",
    "cuPointerGetAttribute": "guest host ranges answered locally",
    "cuPointerGetAttributes": "guest host ranges answered locally",
    "cuModuleLoadData": "slLoadImage by SHA-256", "cuLibraryLoadData": "slLoadImage by SHA-256",
    "cuLaunchKernel": "parameters packed with the slParamLayout cache",
    "cuLaunchHostFunc": "runs in the guest when the backend's stream reaches it",
    "cuCtxCreate_v4": "a real context of the session's own; pushed on the calling thread; "
                      "exec-affinity/CIG params: NOT_SUPPORTED",
    "cuCtxCreate_v3": "as cuCtxCreate_v4 (exec-affinity params: NOT_SUPPORTED)",
    "cuCtxCreate_v2": "as cuCtxCreate_v4", "cuCtxCreate": "as cuCtxCreate_v4",
    "cuCtxDestroy_v2": "popped from the calling thread if current; CLS destructors run",
    "cuCtxDestroy": "as cuCtxDestroy_v2",
    "cuDevicePrimaryCtxReset_v2": "drops the context's CLS entries",
    "cuDevicePrimaryCtxReset": "as cuDevicePrimaryCtxReset_v2",
    "cuOccupancyMaxPotentialBlockSize": "with a callback: computed in the guest (remote "
                                        "MaxActiveBlocks per block size)",
    "cuOccupancyMaxPotentialBlockSizeWithFlags": "with a callback: computed in the guest",
}

# Security: never forwarded, whatever the backend's driver offers (docs/remoting.md).
REFUSED = {
    "cuIpcGetEventHandle", "cuIpcOpenEventHandle", "cuIpcGetMemHandle", "cuIpcOpenMemHandle",
    "cuIpcOpenMemHandle_v2", "cuIpcCloseMemHandle", "cuMemPoolExportPointer",
    "cuMemPoolImportPointer", "cuMemPoolExportToShareableHandle",
    "cuMemPoolImportFromShareableHandle",
}
# Refused because they cannot be remoted faithfully (not a security matter).
UNFAITHFUL = {"cuMemAllocManaged": "refused: managed memory would live on the host, out of the "
              "guest's reach (docs/remoting.md)"}


def table():
    calls = []
    cur = None
    for line in open(TABLE):
        m = re.match(r"call\s+(\d+)\s+(\S+)(.*)$", line)
        if m:
            flags = m.group(3).split()
            cur = (int(m.group(1)), m.group(2), flags)
            calls.append(cur)
    return calls


def defined_names():
    names = set()
    for f in sorted(os.listdir(FRONTEND)):
        if f.endswith(".c"):
            for m in re.finditer(r"^CUresult\s+(cu\w+)\s*\(", open(os.path.join(FRONTEND, f)).read(),
                                 re.M):
                names.add(m.group(1))
    return names


def render():
    defined = defined_names()
    rows = []
    counts = {}
    for cid, name, flags in table():
        if "internal" in flags:
            continue
        if "handwritten" not in flags:
            state = "remoted (generated)"
        elif name in LOCAL:
            state = "local"
        elif name in defined:
            state = "remoted (hand-written)"
        else:
            state = "not supported"
        counts[state] = counts.get(state, 0) + 1
        twins = [t for t in ("ptds", "ptsz") if t in flags]
        mode = "async" if "async" in flags else "sync"
        if "memo" in flags:
            mode = "sync, memo"  # answered again locally (frontend/memo.c)
        if state in ("local", "not supported"):
            mode = "-"
        note = LOCAL.get(name, "") if state == "local" else NOTES.get(name, "")
        if state == "not supported" and (name in REFUSED or name.startswith("cuMulticast")):
            note = "refused by design (security): never forwarded"
        if state == "not supported" and name in UNFAITHFUL:
            note = UNFAITHFUL[name]
        if twins:
            note = (note + "; " if note else "") + "+ _" + "/_".join(twins)
        rows.append(f"| {cid} | `{name}` | {state} | {mode} | {note} |")
    out = ["# Driver API coverage of libcuda.so.1",
           "",
           "Generated by `frontend/gen_coverage.py --write` from `proto/api/cuda_driver.api` and "
           "the frontend sources; `ctest -R frontend.coverage_doc` fails when it is stale.",
           "",
           "States: **remoted (generated)** a generated stub forwards the call; **remoted "
           "(hand-written)** hand code in `frontend/` marshals it; **local** answered in the "
           "guest without a round trip; **not supported** `CUDA_ERROR_NOT_SUPPORTED`, logged once "
           "per call name. Calls sent before a backend is reachable connect lazily; a lost "
           "connection makes every call return `CUDA_ERROR_DEVICE_UNAVAILABLE`. Mode **sync, "
           "memo**: a query whose successful answer the frontend gives again for the same "
           "arguments and context until a call flagged `unmemo` (an attribute or limit set, an "
           "unload, a context destroyed or reset) may have changed it (`frontend/memo.c`).",
           "",
           "| state | calls |", "|---|---|"]
    for k in sorted(counts):
        out.append(f"| {k} | {counts[k]} |")
    out += ["",
            "Outside the table (not cuda.h calls): `cuProfilerInitialize`, `cuProfilerStart`, "
            "`cuProfilerStop` (cudaProfiler.h; `cudaProfilerStart/Stop`) are **local**: they "
            "answer `CUDA_SUCCESS`, as the driver does when no profiler is attached; no profiler "
            "can be attached to a guest's work through Sluice (`frontend/profiler.c`).",
            "",
            "Mapped pinned memory (`cuMemHostAlloc` with `CU_MEMHOSTALLOC_DEVICEMAP`, "
            "`cudaHostAllocMapped`; `cuMemHostRegister` with `CU_MEMHOSTREGISTER_DEVICEMAP`, "
            "`cudaHostRegisterMapped`) gets a twin in the backend that the device reaches, kept "
            "coherent at call boundaries (docs/remoting.md, \"Mapped host memory\"); "
            "`cuMemHostGetDevicePointer` answers the twin's address, which equals the host "
            "pointer when the address could be shared. cudart 13 passes flags 0 for "
            "`cudaMallocHost` and `cudaHostAlloc(cudaHostAllocDefault)`; under unified "
            "addressing that memory is device-reachable too (kernels may be handed it: MAGMA "
            "does). Such allocations of at most 4 KiB get a twin as well (up to 64 KiB of "
            "them per process); larger ones stay plain guest memory, which copies reach but "
            "kernels do not: `cudaHostGetDevicePointer` of them fails, where natively it "
            "answers the pointer.",
            "",
            "| id | call | state | mode | notes |", "|---|---|---|---|---|"] + rows
    return "\n".join(out) + "\n"


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "--check"
    path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "docs", "coverage.md")
    text = render()
    if mode == "--write":
        open(path, "w").write(text)
        return 0
    try:
        cur = open(path).read()
    except OSError:
        cur = ""
    if cur != text:
        print(f"{path} is stale: run python3 frontend/gen_coverage.py --write")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
