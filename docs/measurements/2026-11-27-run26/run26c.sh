#!/bin/bash
# run 26, call C: mapped-memory copies (simpleStreams), page-locked staging slots, lanes 4
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle; R=$PWD
nvidia-smi -L; date
S=$R/.gpu/ss/cuda-samples
( cd $S/Samples/0_Introduction/simpleStreams && /usr/local/cuda/bin/nvcc -O2 -arch=sm_90 -I$S/Common simpleStreams.cu -o /tmp/simpleStreams > $OUT/ss-build.log 2>&1; echo "build rc=$?" )
( time timeout 30 /tmp/simpleStreams ) > $OUT/ss-native.txt 2>&1; echo "ss native rc=$?"; tail -8 $OUT/ss-native.txt
( time timeout 90 python3 tests/gpu/through_sluice.py --bundle $B --frontend $B/build/frontend --backend-log $OUT/ss-backend.log -- /tmp/simpleStreams ) > $OUT/ss-sluice.txt 2>&1; echo "ss sluice rc=$?"; tail -8 $OUT/ss-sluice.txt; date
for p in mapped_memory mapped_large large_copy; do a="$a --program $p"; done
timeout 100 python3 tests/e2e/run.py --build $B/build --real-driver -v $a --large-copy-mib 256 > $OUT/e2e.txt 2>&1; echo "e2e rc=$?"; grep -E "^(PASS|FAIL)|large copies|mapped_memory:" $OUT/e2e.txt | head -20
timeout 60 python3 tests/e2e/run.py --build $B/build --native -v --program mapped_memory > $OUT/e2e-native.txt 2>&1; echo "native rc=$?"; grep -E "^(PASS|FAIL)|mapped_memory:" $OUT/e2e-native.txt
SLUICE_LANES=4 timeout 100 python3 tests/e2e/run.py --build $B/build --real-driver -v --program large_copy --program lanes_copy --large-copy-mib 256 > $OUT/e2e-lanes.txt 2>&1; echo "e2e lanes rc=$?"; grep -E "^(PASS|FAIL)|large copies" $OUT/e2e-lanes.txt | head; date
timeout 300 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 2 --lanes 4 --out $OUT/datapath-lanes4.jsonl > $OUT/datapath-lanes4.txt 2>&1; echo "datapath rc=$?"; cat $OUT/datapath-lanes4.txt | tail -32; date
grep -h "large copies" $OUT/*.backend.log $OUT/datapath-lanes4.jsonl.backend.log 2>/dev/null | head -5
