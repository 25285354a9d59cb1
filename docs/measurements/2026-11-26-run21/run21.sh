#!/bin/bash
# run 21: the tenth session's merged build on the GPU (issues 18, 20, 25)
source .bundle/env.sh; export PYTHONUNBUFFERED=1; B=$PWD/.bundle
nvidia-smi -L; date
timeout 200 python3 tests/e2e/run.py --build $B/build --real-driver --large-copy-mib 256 > $OUT/e2e.txt 2>&1; echo "e2e rc=$?"
grep -c "^PASS" $OUT/e2e.txt; grep "^FAIL" $OUT/e2e.txt | head -20
for p in mem_free alloc_cache capture_host mapped_large; do a="$a --program $p"; done
timeout 60 python3 tests/e2e/run.py --build $B/build --native $a > $OUT/e2e-native.txt 2>&1; echo "native rc=$?"; grep "^FAIL" $OUT/e2e-native.txt | head; date
mkdir -p /tmp/s && tar -xJf .gpu/samples.tar.xz -C /tmp/s
SLUICE_LOG_LEVEL=warning timeout 90 python3 tests/gpu/run_samples.py --bin /tmp/s/bin --args /tmp/s/test_args.json --bundle $B --frontend $B/build/frontend --out $OUT/samples.jsonl --timeout 30 > $OUT/samples.txt 2>&1; echo "samples rc=$?"; grep -E "native=|passes" $OUT/samples.txt; date
SLUICE_LOG_LEVEL=warning timeout 120 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 2 --out $OUT/datapath.jsonl > $OUT/datapath.txt 2>&1; echo "datapath rc=$?"; tail -40 $OUT/datapath.txt; date
timeout 100 python3 tests/e2e/accounting.py --build $B/build --real-driver --part shared --results $OUT/shared.jsonl > $OUT/shared.txt 2>&1; echo "shared rc=$?"; tail -15 $OUT/shared.txt; date
