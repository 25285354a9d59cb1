#!/bin/bash
# run 29, call J: sealed bulk on the direct channel too: the e2e programs on the real driver,
# PyTorch's matmul, conv, train_cnn, train_gpt, graphs (train_* with 2 timing pairs); the latency
# rows with SLUICE_SEALED_BULK=1 and 0, twice each.
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle
date
timeout 200 python3 tests/e2e/run.py --build $B/build --real-driver --large-copy-mib 256 > $OUT/e2e.txt 2>&1; echo "e2e rc=$?"; grep -E "^FAIL" $OUT/e2e.txt | head; grep -c "^PASS" $OUT/e2e.txt
timeout 360 python3 tests/gpu/pytorch_suite.py --bundle $B --frontend $B/build/frontend --out $OUT/t --timeout 100 --steps matmul,conv,train_cnn,train_gpt,graphs --timing-pairs 2 > $OUT/pytorch.txt 2>&1; echo "pytorch rc=$?"; tail -25 $OUT/pytorch.txt
cp $OUT/t/results.jsonl $OUT/pytorch-results.jsonl 2>/dev/null; rm -rf $OUT/t $OUT/*.backend.log
date
# the latency rows with sealed bulk asked for and not (A/B, the same backend build)
for sb in 1 0 1 0; do
  SLUICE_SEALED_BULK=$sb timeout 90 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 1 --bench-args "--only latency" --out $OUT/lat$sb.jsonl >> $OUT/latency-ab.txt 2>&1; echo "lat sealed=$sb rc=$?" >> $OUT/latency-ab.txt
done
grep -E "floor|launch \+ cuStream|64 B|item|async empty launch |rc=" $OUT/latency-ab.txt
rm -f $OUT/*.backend.log
date
