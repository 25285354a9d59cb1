#!/bin/bash
# run 27, call E: teardown of 64 sessions that are all busy (10 s after their workers started:
# 64 contexts take over 2 s to make on the GPU machine), and the native reference.
source .bundle/env.sh; export PYTHONUNBUFFERED=1; B=$PWD/.bundle
date
for i in 1 2; do
SLUICE_TEARDOWN_TIMELINE=1 timeout 120 python3 tests/e2e/teardown.py --build $B/build --real-driver --sessions 64 --busy 10 --part teardown --part native --keep > /tmp/td$i.txt 2>&1; echo "td rc=$?"; grep -E "sessions open|natively|^FAIL|^PASS" /tmp/td$i.txt
w=$(grep -o "work folder kept: .*" /tmp/td$i.txt | cut -d' ' -f4); cp /tmp/td$i.txt $OUT/; cp $w/backend-teardown.log $OUT/backend-teardown$i.log 2>/dev/null
grep -ho "still waiting for the GPU (in [a-zA-Z_0-9 ']*)" $OUT/backend-teardown$i.log | sort | uniq -c
done
date
