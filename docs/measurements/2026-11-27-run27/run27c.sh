#!/bin/bash
# run 27, call C (sixteenth session): main at 39c4143. The channel's descriptor check (64 guests
# opening at once), the abandoned session's final record and the native teardown reference,
# the library kernels listed with their load (first launch rows), the e2e programs.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
nvidia-smi -L; date
SLUICE_STATS=1 SLUICE_LOG_LEVEL=notice timeout 60 python3 tests/e2e/run.py --build $B/build --real-driver -v --program vector_add > $OUT/e2e-first.txt 2>&1; echo "first rc=$?"; grep -E "^(PASS|FAIL)|synchronous" $OUT/e2e-first.txt | head -4
timeout 200 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 2 --lanes 4 --out $OUT/dp.jsonl > $OUT/dp.txt 2>&1; echo "dp rc=$?"; tail -34 $OUT/dp.txt
date
SLUICE_TEARDOWN_TIMELINE=1 timeout 150 python3 tests/e2e/teardown.py --build $B/build --real-driver --sessions 64 --part teardown --part queued --part native > $OUT/td.txt 2>&1; echo "td rc=$?"; grep -vE "^<[0-9]>|timeline|\(s, sessions" $OUT/td.txt | tail -14
date
timeout 150 python3 tests/gpu/sharing_bench.py --bundle $B --frontend $B/build/frontend --tenants 1 --sessions 64 --mix heavy=5,light=2,copy=1 --seconds 20 --out $OUT/share.jsonl > $OUT/share.txt 2>&1; echo "share rc=$?"; tail -4 $OUT/share.txt; grep -c '"role"' $OUT/share.txt; grep -E "grace_kills|drain_s" $OUT/share.txt
date
timeout 230 python3 tests/e2e/run.py --build $B/build --real-driver --large-copy-mib 256 > $OUT/e2e.txt 2>&1; echo "e2e rc=$?"; grep -cE "^PASS" $OUT/e2e.txt; grep -E "^FAIL" $OUT/e2e.txt | head
date
