#!/bin/bash
# run 28, call A: the data path at main (baseline of the session, with the new figures), and the
# calls of the first-launch, matmul and latency parts traced in the guest and in the worker.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
date; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
timeout 200 python3 .gpu/trace28.py > $OUT/trace-run.txt 2>&1; echo "trace rc=$?"; cat $OUT/trace-summary.txt | head -80
timeout 300 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 2 --lanes 4 --out $OUT/dp.jsonl > $OUT/dp.txt 2>&1; echo "dp rc=$?"; tail -40 $OUT/dp.txt
cd $OUT && tar cJf traces.tar.xz trace-first.txt trace-matmul.txt trace-latency.txt && rm trace-first.txt trace-matmul.txt trace-latency.txt
date
