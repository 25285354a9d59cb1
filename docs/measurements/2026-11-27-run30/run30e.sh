#!/bin/bash
# run 30, call E: busy events too (80188cb): the e2e programs on the real driver (busy_query now
# polls an event as well), busy_query with SLUICE_STATS=1, the head-of-line rows (2 rounds).
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
date; nvidia-smi --query-gpu=name --format=csv,noheader
timeout 200 python3 tests/e2e/run.py --build $B/build --real-driver --large-copy-mib 256 > $OUT/e2e.txt 2>&1; echo "e2e rc=$?"; grep -E "^FAIL" $OUT/e2e.txt | head; grep -c "^PASS" $OUT/e2e.txt
SLUICE_STATS=1 timeout 60 python3 tests/e2e/run.py --build $B/build --real-driver --program busy_query -v > $OUT/busy.txt 2>&1; echo "busy rc=$?"; grep -E "^PASS|^FAIL|answered here|busy_query:" $OUT/busy.txt | head -6
timeout 120 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 2 --bench-args "--only hol" --out $OUT/dp.jsonl > $OUT/dp.txt 2>&1; echo "dp rc=$?"; grep -E "floor|HOL" $OUT/dp.txt | tail -14
rm -f $OUT/*.backend.log
date
