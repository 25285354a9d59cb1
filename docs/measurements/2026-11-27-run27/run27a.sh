#!/bin/bash
# run 27, call A (sixteenth session): main at 815b6ab. Data path (layout with the handle, image
# hints, direct-channel DtoH slots), first-launch checks, teardown on the real driver, 64 sessions.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
nvidia-smi -L; date
SLUICE_STATS=1 SLUICE_LOG_LEVEL=notice timeout 60 python3 tests/e2e/run.py --build $B/build --real-driver -v --program vector_add > $OUT/e2e-first.txt 2>&1; echo "first rc=$?"; grep -E "^(PASS|FAIL)|slLoadImage|slParamLayout|synchronous" $OUT/e2e-first.txt | head
timeout 60 python3 tests/e2e/run.py --build $B/build --real-driver --image-store > $OUT/e2e-store.txt 2>&1; echo "store rc=$?"; tail -3 $OUT/e2e-store.txt
timeout 240 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 2 --lanes 4 --out $OUT/dp.jsonl > $OUT/dp.txt 2>&1; echo "dp rc=$?"; cat $OUT/dp.txt | tail -40
date
timeout 90 python3 tests/e2e/teardown.py --build $B/build --real-driver --sessions 64 --part teardown > $OUT/td.txt 2>&1; echo "td rc=$?"; tail -8 $OUT/td.txt
timeout 90 python3 tests/e2e/teardown.py --build $B/build --real-driver --sessions 8 --part queued >> $OUT/td.txt 2>&1; echo "tdq rc=$?"; tail -5 $OUT/td.txt
date
timeout 150 python3 tests/gpu/sharing_bench.py --bundle $B --frontend $B/build/frontend --tenants 1 --sessions 64 --mix heavy=5,light=2,copy=1 --seconds 20 --out $OUT/share.jsonl > $OUT/share.txt 2>&1; echo "share rc=$?"; tail -30 $OUT/share.txt
date
