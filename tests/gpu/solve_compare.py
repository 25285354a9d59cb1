#!/usr/bin/env python3
"""Where torch.linalg.solve through Sluice departs from native (docs/pytorch.md, "solve").

    solve_compare.py save FILE       natively: every configuration's tensors into FILE
    solve_compare.py compare FILE    through Sluice: the same, compared with FILE

A configuration is the linear-algebra library PyTorch is told to prefer (default, cusolver,
magma) and TF32 off or on. For each one it keeps the inputs, the LU factors and pivots, and
the solution of the pytorch_steps.py "solve" step, and `compare` prints the largest
difference of each against native, and which native configuration (if any) the Sluice
solution equals bit for bit. Runs on the GPU machine, not in CI."""
import sys

import torch

N = 1024


def one(lib, tf32):
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.preferred_linalg_library(lib)
    torch.manual_seed(1234)
    torch.cuda.manual_seed_all(1234)
    a = torch.randn(N, N, device="cuda")
    b = torch.randn(N, N, device="cuda")
    m = a + N * torch.eye(N, device="cuda")
    lu, piv = torch.linalg.lu_factor(m)
    x = torch.linalg.solve(m, b)
    torch.cuda.synchronize()
    return {"A": m.cpu(), "b": b.cpu(), "LU": lu.cpu(), "piv": piv.cpu(), "x": x.cpu()}


def all_configs(report):
    """Runs each configuration and hands its tensors to report(key, tensors) at once, so that
    a configuration that kills the process leaves the earlier ones reported."""
    out = {}
    for lib in ("default", "cusolver", "magma"):
        for tf32 in (False, True):
            key = f"{lib}/tf32={'on' if tf32 else 'off'}"
            try:
                out[key] = one(lib, tf32)
            except Exception as e:  # a library the wheel lacks, or a failure through Sluice
                print(f"{key}: {type(e).__name__}: {e}", flush=True)
                continue
            report(key, out[key])
    return out


def diff(p, q):
    if p.shape != q.shape:
        return "shape differs"
    if p.dtype != q.dtype:
        return "dtype differs"
    if torch.equal(p, q):
        return "equal"
    d = (p.double() - q.double()).abs()
    return f"max |diff| {float(d.max()):.3g} at {int(d.argmax())}, {int((d > 0).sum())} differ"


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("save", "compare"):
        print(__doc__)
        return 2
    mode, path = sys.argv[1], sys.argv[2]
    native = torch.load(path) if mode == "compare" else {}

    def report(key, r):
        print(f"{mode} {key}: sum(x) {float(r['x'].sum()):.6f}", flush=True)
        if key not in native:
            return
        parts = [f"{name} {diff(r[name], native[key][name])}" for name in ("A", "b", "LU", "piv", "x")]
        print(f"{key} against native: " + "; ".join(parts))
        same = [k for k, n in native.items() if torch.equal(r["x"], n["x"])]
        print(f"{key}: x equals native {same or 'none'}", flush=True)

    res = all_configs(report)
    if mode == "save":
        torch.save(res, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
