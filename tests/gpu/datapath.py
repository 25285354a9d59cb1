#!/usr/bin/env python3
"""The data-path figures natively and through Sluice in one call, with the channel floor, on the
GPU machine (docs/performance.md, "The data path"). Not a test: a benchmark run by hand there.

Runs sluice-bench-datapath --rounds times, alternating native and Sluice (and, with
--variant-bundle, a second build through a backend of its own: a same-call A/B), and after each
round sluice-bench-channel --processes --latency for the floor (the TLS channel's 64-byte round
trip between two processes; the goals use the median of the rounds). Prints the medians over the rounds with each goal and whether it is
met; writes every figure as JSON lines to --out.

usage: datapath.py --bundle DIR --frontend DIR --out FILE [--rounds N] [--variant-bundle DIR]
                   [--variant-backend-args ARGS] [--bench-args "--only latency,matmul"]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from run_samples import guest_library_path, start_backend  # noqa: E402

LATENCY = ["launch + cuStreamSynchronize (tiny kernel)", "64 B cuMemcpyHtoD",
           "kernel + 4 B DtoH (.item())"]
HOL = ["HOL: sync of an idle stream", "HOL: cuMemAlloc 1 MiB",
       "HOL: 4 KiB copy + sync on another stream", "HOL: launch + sync on another stream",
       "HOL: cuStreamQuery of the busy stream"]


def goal(fig, native, value, floor):
    """(goal text, met) for one figure, as the issue states it."""
    if fig in LATENCY:
        bound = native + floor + 10
        return "<= native + floor + 10 = %.1f" % bound, value <= bound
    if fig == "cuMemAlloc + cuMemFree 1 MiB":
        return "<= 90 us", value <= 90
    if "pageable HtoD" in fig:
        return ">= 0.6x native", value >= 0.6 * native
    if "pageable DtoH" in fig:
        return ">= 0.5x native", value >= 0.5 * native
    if "page-locked" in fig:
        return ">= 12 GB/s", value >= 12
    if fig == "async empty launch":
        return "<= 1.1x native", value <= 1.1 * native
    if fig.startswith("first launch"):
        return "<= 0.3 ms", value <= 0.3
    if fig.endswith("fp32 matmul"):
        return "<= 1.02x native", value <= 1.02 * native
    if fig in HOL:
        return "<= 2x native", value <= max(2 * native, native + 1)
    if fig == "HOL: that query answered NOT_READY":
        return "= 1", value == 1
    return "", None


def run_bench(bench, env, out_json, timeout, args=()):
    p = subprocess.run([bench, "--json", out_json] + list(args), env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=timeout)
    figs = {}
    if os.path.exists(out_json):
        for line in open(out_json):
            r = json.loads(line)
            figs[r["figure"]] = (r["value"], r["unit"])
    return p.returncode, p.stdout.decode(errors="replace"), figs


def channel_floor(bin_dir, env):
    exe = os.path.join(bin_dir, "sluice-bench-channel")
    with tempfile.NamedTemporaryFile(suffix=".json") as j:
        subprocess.run([exe, "--processes", "--latency", "--json", j.name], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
        for line in open(j.name):
            r = json.loads(line)
            if r.get("transport") == "tls":
                return r["p50_us"]
    return float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--frontend", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=240)
    ap.add_argument("--driver", default="/usr/local/nvidia/lib64/libcuda.so.1")
    ap.add_argument("--variant-bundle", help="a second build (its backend and libcuda.so.1)")
    ap.add_argument("--backend-args", default="")
    ap.add_argument("--variant-backend-args", default=None,
                    help="the variant's backend arguments (default: --backend-args); with "
                         "--variant-bundle the same bundle, an A/B of a backend option")
    ap.add_argument("--bench-args", default="",
                    help="arguments of sluice-bench-datapath (e.g. --only latency,matmul)")
    ap.add_argument("--lanes", type=int, default=0,
                    help="also run the same build with SLUICE_LANES=N (bulk lanes): a 'lanesN' "
                         "column beside 'sluice' (SLUICE_LANES=1), same backend, same rounds")
    a = ap.parse_args()
    bundle = os.path.abspath(a.bundle)
    bench = os.path.join(bundle, "build", "tests", "bench", "sluice-bench-datapath")
    work = tempfile.mkdtemp(prefix="sluice-datapath-")
    modes = [("native", None, None)]
    be, cfg = start_backend(bundle, os.path.join(work, "s"), a.driver, a.backend_args.split())
    modes.append(("sluice", cfg, a.frontend))
    lanes_mode = "lanes%d" % a.lanes if a.lanes >= 2 else None
    if lanes_mode:
        modes.append((lanes_mode, cfg, a.frontend))
    vbe = None
    if a.variant_bundle:
        vb = os.path.abspath(a.variant_bundle)
        vargs = a.backend_args if a.variant_backend_args is None else a.variant_backend_args
        vbe, vcfg = start_backend(vb, os.path.join(work, "v"), a.driver, vargs.split())
        modes.append(("variant", vcfg, os.path.join(vb, "build", "frontend")))
    results = {m: {} for m, _, _ in modes}
    floors = []
    cuda_libs = "/usr/local/cuda/lib64"
    try:
        with open(a.out, "a") as out:
            for r in range(a.rounds):
                for mode, cfgdir, frontend in modes:
                    env = dict(os.environ)
                    env["LD_LIBRARY_PATH"] = cuda_libs + ":" + env.get("LD_LIBRARY_PATH", "")
                    if cfgdir:
                        env["LD_LIBRARY_PATH"] = guest_library_path(frontend) + ":" + cuda_libs
                        env["SLUICE_CONFIG_DIR"] = cfgdir
                        env["SLUICE_LOG_LEVEL"] = "warning"
                        env["SLUICE_LANES"] = str(a.lanes) if mode == lanes_mode else "1"
                    rc, text, figs = run_bench(bench, env, os.path.join(
                        work, "%s-%d.json" % (mode, r)), a.timeout, a.bench_args.split())
                    if rc != 0:
                        print("%s round %d: rc %s\n%s" % (mode, r, rc, text[-3000:]))
                    for fig, (v, unit) in figs.items():
                        results[mode].setdefault(fig, (unit, []))[1].append(v)
                        out.write(json.dumps({"round": r, "mode": mode, "figure": fig,
                                              "value": v, "unit": unit}) + "\n")
                # the floor drifts with the machine (64-88 us across the calls of run 28): it
                # is measured in every round, beside the figures it is the goal of
                f = channel_floor(os.path.dirname(bench), dict(os.environ))
                floors.append(f)
                out.write(json.dumps({"round": r, "figure": "channel floor (TLS, two processes) p50",
                                      "unit": "us", "value": f}) + "\n")
            floor = statistics.median(floors)
    finally:
        for b in (be, vbe):
            if b:
                b.terminate()
                b.wait(timeout=10)
        os.system("cp %s/s/backend.log %s.backend.log 2>/dev/null" % (work, a.out))
        if vbe:
            os.system("cp %s/v/backend.log %s.variant.backend.log 2>/dev/null" % (work, a.out))
    print("\nchannel floor (TLS in ZeroMQ, 64 B, two processes) p50: %.1f us (median of the "
          "rounds: %s)" % (floor, ", ".join("%.1f" % f for f in floors)))
    hdr = "%-50s %10s %10s" % ("figure (medians of %d rounds)" % a.rounds, "native", "sluice")
    if lanes_mode:
        hdr += " %10s" % lanes_mode
    if a.variant_bundle:
        hdr += " %10s" % "variant"
    print(hdr + "  %-6s %-30s %s" % ("unit", "goal", "met"))
    met_all = True
    for fig, (unit, vals) in results["native"].items():
        nat = statistics.median(vals)
        row = "%-50s %10.3f" % (fig[:50], nat)
        verdict = ""
        for mode in [m for m, _, _ in modes if m != "native"]:
            sv = results[mode].get(fig)
            if not sv:
                row += " %10s" % "-"
                continue
            med = statistics.median(sv[1])
            row += " %10.3f" % med
            if mode == "sluice":
                g, met = goal(fig, nat, med, floor)
                if met is not None:
                    verdict = "%-30s %s" % (g, "yes" if met else "NO")
                    met_all = met_all and met
        print(row + "  %-6s %s" % (unit, verdict))
    print("\nevery goal met" if met_all else "\nsome goals are not met")
    return 0


if __name__ == "__main__":
    sys.exit(main())
