#!/usr/bin/env python3
"""Latency figures of sluice-bench-cuda (--latency) natively and through Sluice under several
spin settings, in alternating rounds on the same GPU machine, and a table of medians.

A setting is FRONTEND_US:BACKEND_US: $SLUICE_SPIN_US of the program and `--spin-us` of its
backend (docs/remoting.md, "Waiting for replies"). Each round runs the bench natively once and
through Sluice once per setting, each with a backend of its own.

usage: latency_sweep.py --bundle DIR --frontend DIR --bench PATH [--settings 0:0,300:200]
                        [--rounds 2] [--out DIR]"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FIGURES = ["async empty launch", "launch + synchronize", "null round trip (event query) p50",
           "null round trip (event query) p99", "cudaMalloc + cudaFree 1 MiB"]


def run_bench(a, setting, path):
    cmd = [a.bench, "--latency", "--json", path]
    env = dict(os.environ)
    if setting is not None:
        fe, be = setting.split(":")
        env["SLUICE_SPIN_US"] = fe
        cmd = [sys.executable, os.path.join(HERE, "through_sluice.py"), "--bundle", a.bundle,
               "--frontend", a.frontend, "--log-level", "warning",
               "--backend-args", "--spin-us " + be, "--"] + cmd
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=a.timeout)
    if r.returncode != 0:
        print("%s: rc %d\n%s" % (setting or "native", r.returncode, r.stdout.decode()[-2000:]))
        return {}
    with open(path) as f:
        return {o["figure"]: o["value"] for o in map(json.loads, f)}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--frontend", required=True)
    ap.add_argument("--bench", required=True, help="sluice-bench-cuda")
    ap.add_argument("--settings", default="0:0,300:0,0:200,300:200")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--out", default="/tmp/latency-sweep")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    settings = [None] + a.settings.split(",")
    got = {s: [] for s in settings}
    for rnd in range(a.rounds):
        for s in settings:
            name = (s or "native").replace(":", "-")
            got[s].append(run_bench(a, s, os.path.join(a.out, "%s-%d.jsonl" % (name, rnd))))
    print("%-36s %s" % ("figure (median of rounds)", " ".join("%14s" % (s or "native")
                                                              for s in settings)))
    for fig in FIGURES:
        cells = []
        for s in settings:
            v = [r[fig] for r in got[s] if fig in r]
            cells.append("%14s" % ("%.2f" % statistics.median(v) if v else "-"))
        print("%-36s %s" % (fig, " ".join(cells)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
