#!/bin/bash
# run 34, call D: copies over 64 KiB through a page-locked staging slot (before: only pieces of
# 1 MiB or more). The data path's latency rows, with the bench's new 256 KiB and 1 MiB rows, with
# the code before the change (.vbundle: the code of 0abfcb4) as the variant column, same machine, same
# rounds; then the e2e programs on the real driver.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
tar xJf .bundle/cuda.tar.xz -C .bundle/build/tests && rm .bundle/cuda.tar.xz
date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 300 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 3 --bench-args "--only latency" --variant-bundle $PWD/.vbundle --out $OUT/dp.jsonl > $OUT/dp.txt 2>&1; echo "datapath rc=$?"; tail -18 $OUT/dp.txt
date
timeout 150 python3 tests/e2e/run.py --build $B/build --real-driver > $OUT/e2e.txt 2>&1; echo "e2e rc=$?"; grep -E "^FAIL" $OUT/e2e.txt | head; grep -c "^PASS" $OUT/e2e.txt
rm -f $OUT/*.backend.log
date
