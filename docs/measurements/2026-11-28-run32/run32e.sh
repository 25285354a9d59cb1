#!/bin/bash
# run 32, call E: each thread's CPU time per synchronous call, every spin off (work and wake-ups
# only), then with the default spins; perf's profile of each window. Ad hoc (.gpu/prof2.py,
# .gpu/lat, Debian's perf in .gpu/perfb; tools/ and README.md), the figures in README.md.
source .bundle/env.sh; export PYTHONUNBUFFERED=1
date; nvidia-smi --query-gpu=name --format=csv,noheader
SPIN=0 timeout 100 python3 .gpu/prof2.py; echo "spin 0 rc=$?"
SPIN=300 timeout 100 python3 .gpu/prof2.py; echo "spin 300 rc=$?"
date
