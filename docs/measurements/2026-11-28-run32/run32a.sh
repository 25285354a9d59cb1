#!/bin/bash
# run 32, call A: the load without a reply (slLoadImageAs: the guest reads the image's kernels
# and layouts from its cubin and chooses the handles). The e2e programs on the real driver
# (every launch's parameter buffer checked against the driver's own layout in the worker), then
# the first-launch rows with it (SLUICE_LOAD_AS=1, the default) and without (0), alternated
# twice, 4 rounds each, the same build and machine.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
tar xJf .bundle/cuda.tar.xz -C .bundle/build/tests && rm .bundle/cuda.tar.xz
date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 python3 tests/e2e/run.py --build $B/build --real-driver > $OUT/e2e.txt 2>&1; echo "e2e rc=$?"; grep -E "^FAIL" $OUT/e2e.txt | head; grep -c "^PASS" $OUT/e2e.txt
date
for i in 1 2; do
  for a in 1 0; do
    SLUICE_LOAD_AS=$a timeout 120 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 4 --bench-args "--only first" --out $OUT/first-as$a-$i.jsonl > $OUT/first-as$a-$i.txt 2>&1; echo "load_as=$a pass $i rc=$?"; grep -E "floor|first" $OUT/first-as$a-$i.txt | tail -4
  done
  date
done
rm -f $OUT/*.backend.log
