#!/bin/bash
# run 33, call B: after call A, the concurrent_threads test rewritten to ask beside the busy
# copies only what the driver answers at once (natively a pageable copy behind a busy kernel
# held other threads' cuMemAlloc and launch + sync), and finished waits answered between the
# calls of a frame. The e2e programs on the real driver, concurrent_threads natively, the
# latency and copy rows against the previous build (.vbundle) twice, then PyTorch's CNN and GPT
# steps (2 timing pairs).
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
tar xJf .bundle/cuda.tar.xz -C .bundle/build/tests && rm .bundle/cuda.tar.xz
date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 python3 tests/e2e/run.py --build $B/build --real-driver > $OUT/e2e.txt 2>&1; echo "e2e rc=$?"; grep -E "^FAIL" $OUT/e2e.txt | head; grep -c "^PASS" $OUT/e2e.txt
timeout 60 python3 tests/e2e/run.py --build $B/build --native -v --program concurrent_threads > $OUT/e2e-native-ct.txt 2>&1; echo "native concurrent_threads rc=$?"; grep -E "PASS|FAIL" $OUT/e2e-native-ct.txt | head -5
date
for i in 1 2; do
  timeout 200 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 3 --variant-bundle $PWD/.vbundle --bench-args "--only latency,copies" --out $OUT/dp$i.jsonl > $OUT/dp$i.txt 2>&1; echo "datapath $i rc=$?"; grep -E "floor|launch|DtoH|HtoD|item" $OUT/dp$i.txt
done
date
timeout 240 python3 tests/gpu/pytorch_suite.py --bundle $B --frontend $B/build/frontend --out $OUT/t --timeout 80 --steps train_cnn,train_gpt --timing-pairs 2 > $OUT/pytorch.txt 2>&1; echo "pytorch rc=$?"; grep -A3 "over all runs" $OUT/pytorch.txt
rm -rf $OUT/t
date
rm -f $OUT/*.backend.log
