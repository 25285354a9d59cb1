#!/bin/bash
# run 27, call B (sixteenth session): diagnosis. (1) the first launch in a new module, each
# synchronous call traced; (2) 64 sessions opening at once, info logs; (3) teardown of 64 busy
# sessions on the real driver, info logs and the timeline.
source .bundle/env.sh; export PYTHONUNBUFFERED=1; B=$PWD/.bundle
date
timeout 150 python3 .gpu/trace_first.py; echo "trace rc=$?"; grep -n "first launch" $OUT/trace.txt | head
date
mkdir -p /tmp/td
SLUICE_LOG_LEVEL=info SLUICE_TEARDOWN_TIMELINE=1 timeout 100 python3 tests/e2e/teardown.py --build $B/build --real-driver --sessions 64 --part teardown --keep > /tmp/td/td.txt 2>&1; echo "td rc=$?"; grep -vE "^<[0-9]>" /tmp/td/td.txt | tail -12
w=$(grep -o "work folder kept: .*" /tmp/td/td.txt | cut -d' ' -f4); [ -n "$w" ] && cp -r $w /tmp/td/work
date
SLUICE_LOG_LEVEL=info timeout 150 python3 tests/gpu/sharing_bench.py --bundle $B --frontend $B/build/frontend --tenants 1 --sessions 64 --mix heavy=5,light=2,copy=1 --seconds 15 --modes sluice --out /tmp/td/share.jsonl > /tmp/td/share.txt 2>&1; echo "share rc=$?"; grep -E "heavy kernels|light p99|failed\": \[\]" /tmp/td/share.txt
cp /tmp/td/share.jsonl* /tmp/td/ 2>/dev/null
tar -C /tmp -cJf $OUT/td.tar.xz td; ls -la $OUT; date
