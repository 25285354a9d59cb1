#!/bin/bash
# run 27, call I: the final build (listed functions loaded by name): the e2e programs on the
# real driver, and the synchronous calls of vector_add, driver_api and link_jit.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
date
SLUICE_STATS=1 SLUICE_LOG_LEVEL=notice timeout 60 python3 tests/e2e/run.py --build $B/build --real-driver -v --program vector_add --program driver_api --program link_jit > $OUT/e2e-stats.txt 2>&1; echo "stats rc=$?"; grep -E "^(PASS|FAIL)|synchronous" $OUT/e2e-stats.txt | head -12
timeout 150 python3 tests/e2e/run.py --build $B/build --real-driver --large-copy-mib 256 > $OUT/e2e.txt 2>&1; echo "e2e rc=$?"; grep -cE "^PASS" $OUT/e2e.txt; grep -E "^FAIL" $OUT/e2e.txt | head
date
