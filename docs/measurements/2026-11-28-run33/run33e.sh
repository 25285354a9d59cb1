#!/bin/bash
# run 33, call E: after call D (PyTorch's suite ran out of its 200 s in train_gpt; the native
# concurrent_threads.shared failed once): concurrent_threads with its page-locked allocation
# made before the kernels (built by hand, .bundle/ct), natively twice and through Sluice; then
# train_gpt alone through this build and the previous one (.vbundle), its logs kept.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
tar xJf .bundle/cuda.tar.xz -C .bundle/build/tests && rm .bundle/cuda.tar.xz
cp .bundle/ct/concurrent_threads.* .bundle/build/tests/cuda/
date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for i in 1 2; do timeout 60 python3 tests/e2e/run.py --build $B/build --native -v --program concurrent_threads > $OUT/e2e-native-ct$i.txt 2>&1; echo "native concurrent_threads $i rc=$?"; grep -E "^PASS e2e|FAIL" $OUT/e2e-native-ct$i.txt | head -5; done
timeout 60 python3 tests/e2e/run.py --build $B/build --real-driver -v --program concurrent_threads > $OUT/e2e-ct.txt 2>&1; echo "sluice concurrent_threads rc=$?"; grep -E "^PASS e2e|FAIL" $OUT/e2e-ct.txt | head -5
date
timeout 280 python3 tests/gpu/pytorch_suite.py --bundle $B --frontend $B/build/frontend --out $OUT/t --timeout 90 --steps train_gpt --variant-bundle $PWD/.vbundle > $OUT/pytorch.txt 2>&1; echo "pytorch rc=$?"; tail -12 $OUT/pytorch.txt
ls $OUT/t; tail -5 $OUT/t/*.log | cut -c1-300
grep -E "thread's time|frames took|worker ended|killed|error" $OUT/t/backend.log | cut -c1-400 | tail -12
date
rm -f $OUT/*.backend.log
