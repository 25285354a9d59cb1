#!/bin/bash
# run 31, call C: where launch + sync and .item() spend their time (tests/gpu/datapath_trace.py,
# debug logs joined by seq) with the hold (5 us, the default) and without (0), SLUICE_STATS=1
# for the frames taken along.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_STATS=1; B=$PWD/.bundle
date; nvidia-smi --query-gpu=name --format=csv,noheader
for h in 5 0; do
  SLUICE_FLUSH_HOLD_US=$h timeout 200 python3 tests/gpu/datapath_trace.py --bundle $B --frontend $B/build/frontend --parts latency,first --quick --out $OUT/trace-h$h > /dev/null 2>&1; echo "hold $h rc=$?"; cat $OUT/trace-h$h/summary.txt
  rm -f $OUT/trace-h$h/backend.log
done
date
