#!/bin/bash
# run 27, call D (sixteenth session): teardown of 64 busy sessions with the backend's info log
# (why the workers' final records were lost in call C), the rebase wait, the 'doing' note.
source .bundle/env.sh; export PYTHONUNBUFFERED=1; B=$PWD/.bundle
date
SLUICE_TEARDOWN_TIMELINE=1 timeout 120 python3 tests/e2e/teardown.py --build $B/build --real-driver --sessions 64 --part teardown --part queued --keep > /tmp/td.txt 2>&1; echo "td rc=$?"; grep -E "sessions open|^FAIL|^PASS" /tmp/td.txt
w=$(grep -o "work folder kept: .*" /tmp/td.txt | cut -d' ' -f4); cp /tmp/td.txt $OUT/; cp $w/backend-teardown.log $w/backend-queued.log $OUT/ 2>/dev/null
grep -h "still waiting" $OUT/backend-teardown.log | sed 's/session [0-9]*/session N/; s/\[.*//' | sort | uniq -c | head
SLUICE_TEARDOWN_TIMELINE=1 timeout 100 python3 tests/e2e/teardown.py --build $B/build --real-driver --sessions 64 --part teardown > $OUT/td2.txt 2>&1; echo "td2 rc=$?"; grep -E "sessions open|^FAIL|^PASS" $OUT/td2.txt
date
