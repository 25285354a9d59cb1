#!/bin/bash
# run 28, call I: the final code (73990d5): the e2e programs on the real driver, the
# data path (3 rounds, 4 lanes beside), and the PyTorch steps that set kernel attributes
# (matmul, conv, train_cnn, train_gpt, graphs) with their step times.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
date
timeout 170 python3 tests/e2e/run.py --build $B/build --real-driver --large-copy-mib 256 > $OUT/e2e.txt 2>&1; echo "e2e rc=$?"; grep -cE "^PASS" $OUT/e2e.txt; grep -E "^FAIL" $OUT/e2e.txt | head
timeout 200 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 3 --lanes 4 --out $OUT/dp.jsonl > $OUT/dp.txt 2>&1; echo "dp rc=$?"; tail -37 $OUT/dp.txt
timeout 330 python3 tests/gpu/pytorch_suite.py --bundle $B --frontend $B/build/frontend --out $OUT/t --timeout 100 --steps matmul,conv,train_cnn,train_gpt,graphs --timing-pairs 1 > $OUT/pytorch.txt 2>&1; echo "pytorch rc=$?"; tail -30 $OUT/pytorch.txt
cd $OUT && tar cJf t.tar.xz t 2>/dev/null; rm -rf t *.backend.log
date
