#!/bin/bash
# run 31, call B: as call A without the variant column (call A's failed to start: its backend's
# link was broken): the latency and first-launch rows with SLUICE_FLUSH_HOLD_US 5 (the default),
# 0, 15, then 5 again, 3 rounds each.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for h in 5 0 15 5; do
  SLUICE_FLUSH_HOLD_US=$h timeout 130 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 3 --bench-args "--only latency,first" --out $OUT/lat-h$h.jsonl >> $OUT/lat-h$h.txt 2>&1; echo "hold $h rc=$?"; grep -E "floor|launch|64 B|4 B|KiB|first" $OUT/lat-h$h.txt | tail -10
  date
done
rm -f $OUT/*.backend.log
