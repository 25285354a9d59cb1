#!/bin/bash
# run 28, call B: the memo's attribute setters scoped (matmul), slLoadImage's phases in the
# worker's debug line, and the latency rows with and without the guest's sender thread.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
date
timeout 200 python3 .gpu/trace28.py > $OUT/trace-run.txt 2>&1; echo "trace rc=$?"; cat $OUT/trace-summary.txt | head -60
xz -dc $OUT/trace-backend.log.xz | grep -E "kernels listed" | head
DP="python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend"
timeout 300 $DP --rounds 2 --out $OUT/dp.jsonl > $OUT/dp.txt 2>&1; echo "dp rc=$?"; tail -36 $OUT/dp.txt
for v in 1 0 1 0; do
  SLUICE_SENDER=$v timeout 200 $DP --rounds 3 --bench-args "--only latency" --out $OUT/lat-sender$v.jsonl > $OUT/lat.txt 2>&1; echo "SLUICE_SENDER=$v rc=$?"; grep -E "floor|launch|64 B|item|DtoH" $OUT/lat.txt
done
cd $OUT && tar cJf traces.tar.xz trace-first.txt trace-matmul.txt lat-sender*.jsonl && rm trace-first.txt trace-matmul.txt lat-sender*.jsonl
date
