#!/bin/bash
# run 22, call A: correctness of the eleventh session's merged build (issues 18, 20, 25)
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
nvidia-smi -L; date
( timeout 240 python3 tests/e2e/run.py --build $B/build --real-driver --large-copy-mib 256 > $OUT/e2e.txt 2>&1; echo "e2e rc=$?" > $OUT/e2e.rc ) &
for p in failures alloc_cache mem_free capture_host ipc device_assert; do a="$a --program $p"; done
timeout 90 python3 tests/e2e/run.py --build $B/build --native -v $a > $OUT/e2e-native.txt 2>&1; echo "native rc=$?"; grep "^FAIL" $OUT/e2e-native.txt | head; date
timeout 60 python3 tests/e2e/run.py --build $B/build --real-driver --ipc-attacks > $OUT/ipc-attacks.txt 2>&1; echo "ipc attacks rc=$?"; tail -5 $OUT/ipc-attacks.txt
SLUICE_E2E_OUTPUT_TAIL=200000 SLUICE_LOG_LEVEL=debug timeout 60 python3 tests/e2e/run.py --build $B/build --real-driver -v --program capture_host --variant shared > $OUT/capture-debug.txt 2>&1; echo "capture rc=$?"; date
mkdir -p /tmp/s && tar -xJf .gpu/samples.tar.xz -C /tmp/s
timeout 100 python3 tests/gpu/run_samples.py --bin /tmp/s/bin --args /tmp/s/test_args.json --bundle $B --frontend $B/build/frontend --out $OUT/samples.jsonl --timeout 30 > $OUT/samples.txt 2>&1; echo "samples rc=$?"; grep -E "native=|passes" $OUT/samples.txt; date
wait; cat $OUT/e2e.rc; grep -c "^PASS" $OUT/e2e.txt; grep "^FAIL" $OUT/e2e.txt | head -20; date
