#!/bin/bash
# run 28, call D: a synchronous call's time, leg by leg (tests/gpu/datapath_trace.py), and the
# data path with the floor measured in every round.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
date
timeout 200 python3 tests/gpu/datapath_trace.py --bundle $B --frontend $B/build/frontend --parts latency,first --quick --out $OUT/trace > $OUT/trace.txt 2>&1; echo "trace rc=$?"; cat $OUT/trace.txt
grep -E "kernels listed" $OUT/trace/backend.log | head -3
timeout 400 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 3 --out $OUT/dp.jsonl > $OUT/dp.txt 2>&1; echo "dp rc=$?"; tail -37 $OUT/dp.txt
cd $OUT && xz trace/backend.log && tar cf trace.tar trace && rm -rf trace *.backend.log
date
