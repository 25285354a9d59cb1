#!/bin/bash
# run 27, call H: the final build (a module's functions listed too): the e2e programs on the
# real driver, driver_api's synchronous calls, and the data path.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
date
SLUICE_STATS=1 SLUICE_LOG_LEVEL=notice timeout 60 python3 tests/e2e/run.py --build $B/build --real-driver -v --program vector_add --program driver_api --program link_jit > $OUT/e2e-stats.txt 2>&1; echo "stats rc=$?"; grep -E "^(PASS|FAIL)|synchronous" $OUT/e2e-stats.txt | head -12
timeout 150 python3 tests/e2e/run.py --build $B/build --real-driver --large-copy-mib 256 > $OUT/e2e.txt 2>&1; echo "e2e rc=$?"; grep -cE "^PASS" $OUT/e2e.txt; grep -E "^FAIL" $OUT/e2e.txt | head
timeout 150 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 3 --out $OUT/dp.jsonl > $OUT/dp.txt 2>&1; echo "dp rc=$?"; grep -E "floor|first launch|launch \+|64 B|item|async" $OUT/dp.txt
date
