#!/bin/bash
# run 19: the session's merged build on the GPU (issues 18, 20, 25)
source .bundle/env.sh; export PYTHONUNBUFFERED=1; B=$PWD/.bundle
nvidia-smi -L
timeout 240 python3 tests/e2e/run.py --build $B/build --real-driver --large-copy-mib 256 > $OUT/e2e.txt 2>&1; echo "e2e rc=$?"
grep -c "^PASS" $OUT/e2e.txt; grep "^FAIL" $OUT/e2e.txt | head -20
for p in managed_memory memcpy_default launch_checks driver_semantics device_assert; do a="$a --program $p"; done
timeout 60 python3 tests/e2e/run.py --build $B/build --native $a > $OUT/e2e-native.txt 2>&1; echo "native rc=$?"; grep "^FAIL" $OUT/e2e-native.txt | head
mkdir -p /tmp/s && tar -xJf .gpu/samples.tar.xz -C /tmp/s
SLUICE_LOG_LEVEL=warning timeout 150 python3 tests/gpu/run_samples.py --bin /tmp/s/bin --args /tmp/s/test_args.json --bundle $B --frontend $B/build/frontend --out $OUT/samples.jsonl --timeout 40 > $OUT/samples.txt 2>&1; echo "samples rc=$?"
SLUICE_LOG_LEVEL=warning timeout 150 python3 tests/gpu/sharing_bench.py --bundle $B --frontend $B/build/frontend --tenants 1 --sessions 64 --seconds 20 --mix heavy=5,light=2,copy=1 --out $OUT/share.jsonl > $OUT/share.txt 2>&1; echo "share rc=$?"; tail -5 $OUT/share.txt
