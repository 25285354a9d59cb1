#!/bin/bash
# run 31, call A: a lone async call held for a synchronous call behind it (SLUICE_FLUSH_HOLD_US,
# default 5) and short bulk in its MESSAGE's TLS record. The latency and first-launch rows, this
# build against the previous one (the variant column, 80188cb) in the same rounds: hold 5 (the
# default), 0 and 15; then the e2e programs on the real driver.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle; V=$PWD/.bundle-base
tar xJf .bundle/cuda.tar.xz -C .bundle/build/tests && rm .bundle/cuda.tar.xz
date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for h in 5 0 15; do
  SLUICE_FLUSH_HOLD_US=$h timeout 150 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --variant-bundle $V --rounds 3 --bench-args "--only latency,first" --out $OUT/lat-h$h.jsonl > $OUT/lat-h$h.txt 2>&1; echo "hold $h rc=$?"; grep -E "floor|launch|64 B|4 B|KiB|first" $OUT/lat-h$h.txt | tail -12
  date
done
timeout 200 python3 tests/e2e/run.py --build $B/build --real-driver > $OUT/e2e.txt 2>&1; echo "e2e rc=$?"; grep -E "^FAIL" $OUT/e2e.txt | head; grep -c "^PASS" $OUT/e2e.txt
rm -f $OUT/*.backend.log
date
