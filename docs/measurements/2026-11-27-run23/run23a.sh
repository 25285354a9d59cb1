#!/bin/bash
# run 23, call A: the twelfth session's fixes (capture_host, graph free nodes, profiler and
# context answers before cuInit, small copies during another stream's capture, assert order)
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
nvidia-smi -L; date
( timeout 240 python3 tests/e2e/run.py --build $B/build --real-driver --large-copy-mib 256 > $OUT/e2e.txt 2>&1; echo "e2e rc=$?" > $OUT/e2e.rc ) &
for p in alloc_cache capture_host graph_mem driver_semantics; do a="$a --program $p"; done
timeout 90 python3 tests/e2e/run.py --build $B/build --native -v $a > $OUT/e2e-native.txt 2>&1; echo "native rc=$?"; grep "^FAIL" $OUT/e2e-native.txt | head
timeout 30 $B/build/tests/bench/sluice-driver-facts > $OUT/facts-native.jsonl 2>&1
timeout 60 python3 tests/gpu/through_sluice.py --bundle $B --frontend $B/build/frontend -- $B/build/tests/bench/sluice-driver-facts > $OUT/facts-sluice.jsonl 2>&1; echo "facts rc=$?"
diff <(sort $OUT/facts-native.jsonl) <(sort $OUT/facts-sluice.jsonl | grep -v through_sluice) > $OUT/facts.diff; echo "facts diff lines: $(grep -c '^[<>]' $OUT/facts.diff)"; head -20 $OUT/facts.diff; date
mkdir -p /tmp/s && tar -xJf .gpu/samples.tar.xz -C /tmp/s
timeout 230 python3 tests/gpu/run_samples.py --bin /tmp/s/bin --args /tmp/s/test_args.json --bundle $B --frontend $B/build/frontend --out $OUT/samples.jsonl --timeout 60 > $OUT/samples.txt 2>&1; echo "samples rc=$?"; grep -E "native=|passes" $OUT/samples.txt; date
wait; cat $OUT/e2e.rc; grep -c "^PASS" $OUT/e2e.txt; grep "^FAIL" $OUT/e2e.txt | head -20; date
