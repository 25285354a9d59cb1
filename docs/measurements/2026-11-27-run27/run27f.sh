#!/bin/bash
# run 27, call F: teardown of 64 sessions once every one is busy (its records count kernels),
# then the same 64 programs natively after as long (the driver's own teardown).
source .bundle/env.sh; export PYTHONUNBUFFERED=1; B=$PWD/.bundle
date
for i in 1 2; do
SLUICE_TEARDOWN_TIMELINE=1 timeout 200 python3 tests/e2e/teardown.py --build $B/build --real-driver --sessions 64 --part teardown --part native --keep > /tmp/tf$i.txt 2>&1; echo "td rc=$?"; grep -E "sessions open|natively|^FAIL|^PASS" /tmp/tf$i.txt
w=$(grep -o "work folder kept: .*" /tmp/tf$i.txt | cut -d' ' -f4); cp /tmp/tf$i.txt $OUT/; cp $w/backend-teardown.log $OUT/backend-teardown$i.log 2>/dev/null
grep -ho "still waiting for the GPU (in [a-zA-Z_0-9 ']*)" $OUT/backend-teardown$i.log | sort | uniq -c
done
date
