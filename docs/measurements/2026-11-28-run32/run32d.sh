#!/bin/bash
# run 32, call D: where a synchronous call's CPU time goes on the GPU machine. Ad hoc (tools/, README.md):
# .gpu/lat (nvcc-built: launch + cuStreamSynchronize, kernel + 4 B DtoH + sync, 64 B HtoD in a
# loop) through Sluice on the real driver with Debian's perf (carried in .gpu/perfb) recording
# every CPU for 3 s in the middle of each loop; then natively. .gpu/prof.py.
source .bundle/env.sh; export PYTHONUNBUFFERED=1
date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
cat /proc/sys/kernel/perf_event_paranoid
timeout 200 python3 .gpu/prof.py; echo "prof rc=$?"
for m in 0 1 2; do head -60 $OUT/perf$m-dso.txt | grep -v "^#" | grep -v "^$" | head -30; done
date
