#!/bin/bash
# run 26, call B: every cuda-sample natively and through Sluice with the host driver's libraries
# hidden from programs run through Sluice (as in a guest), and the test programs on the real driver
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle; R=$PWD
nvidia-smi -L; date; git log --oneline -1 2>/dev/null
( timeout 400 python3 tests/e2e/run.py --build $B/build --real-driver --large-copy-mib 256 > $OUT/e2e.txt 2>&1; echo "e2e rc=$?" > $OUT/e2e.rc ) &
CUDA_CACHE_DISABLE=1 timeout 520 python3 tests/gpu/run_samples.py --bin /tmp/cs/cuda-samples/build/Samples \
  --args /tmp/cs/cuda-samples/test_args.json --bundle $B --frontend $B/build/frontend \
  --out $OUT/samples.jsonl --timeout 40 --save /tmp/samples-out > $OUT/samples.log 2>&1; echo "samples rc=$?"
tail -2 $OUT/samples.log; grep -vE "identical|same-but-numbers" $OUT/samples.log | head -30
cd /tmp/samples-out 2>/dev/null && tar -czf $OUT/samples-out.tgz . ; cd $R
wait; cat $OUT/e2e.rc; grep -c "^PASS" $OUT/e2e.txt; grep "^FAIL" $OUT/e2e.txt | head -20; date
