#!/usr/bin/env python3
"""Ad hoc (run 28, call K): sluice-bench-datapath --only latency through Sluice, the backend at
info: the session thread's own account of the async launches (its time per launch, how many
frames had the next one queued behind them) against the bench's figures."""
import os, subprocess, sys, tempfile
sys.path.insert(0, "tests/gpu")
from run_samples import guest_library_path, start_backend
B = os.path.abspath(".bundle"); OUT = os.environ["OUT"]
work = tempfile.mkdtemp(prefix="k-")
os.environ["SLUICE_LOG_LEVEL"] = "info"
be, cfg = start_backend(B, work, "/usr/local/nvidia/lib64/libcuda.so.1", [])
env = dict(os.environ, LD_LIBRARY_PATH=guest_library_path(B + "/build/frontend") + ":/usr/local/cuda/lib64",
           SLUICE_CONFIG_DIR=cfg, SLUICE_LOG_LEVEL="warning", SLUICE_STATS="1")
bench = B + "/build/tests/bench/sluice-bench-datapath"
nat = dict(os.environ, LD_LIBRARY_PATH="/usr/local/cuda/lib64:" + os.environ.get("LD_LIBRARY_PATH", ""))
with open(OUT + "/launchinfo.txt", "w") as f:
    for k in range(2):
        for mode, e in (("native", nat), ("sluice", env)):
            p = subprocess.run([bench, "--only", "latency"], env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
            f.write("==== %s %d rc %d\n" % (mode, k, p.returncode))
            f.write("\n".join(l for l in p.stdout.decode(errors="replace").splitlines() if "async" in l or "stats" in l) + "\n")
be.terminate(); be.wait(10)
with open(OUT + "/launchinfo.txt", "a") as f:
    for l in open(work + "/backend.log"):
        if "time went most" in l or "frames took" in l or "DIAG" in l:
            f.write(l.split(" [project")[0] + "\n")
print(open(OUT + "/launchinfo.txt").read())
