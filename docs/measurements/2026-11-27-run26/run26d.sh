#!/bin/bash
# run 26, call D: simpleStreams with slMappedSettle, the test programs, staging slots A/B, 8 lanes
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle; R=$PWD
nvidia-smi -L; date
S=$R/.gpu/ss/cuda-samples
( timeout 300 python3 tests/e2e/run.py --build $B/build --real-driver --large-copy-mib 256 > $OUT/e2e.txt 2>&1; echo "e2e rc=$?" > $OUT/e2e.rc ) &
( cd $S/Samples/0_Introduction/simpleStreams && /usr/local/cuda/bin/nvcc -O2 -arch=sm_90 -I$S/Common simpleStreams.cu -o /tmp/simpleStreams > $OUT/ss-build.log 2>&1; echo "build rc=$?" )
( time timeout 30 /tmp/simpleStreams ) > $OUT/ss-native.out 2>&1; echo "ss native rc=$?"
( time timeout 90 python3 tests/gpu/through_sluice.py --bundle $B --frontend $B/build/frontend --log-level info --backend-log $OUT/ss-backend.log -- /tmp/simpleStreams ) > $OUT/ss-sluice.out 2>&1; echo "ss sluice rc=$?"
tail -9 $OUT/ss-native.out; tail -9 $OUT/ss-sluice.out
diff <(grep -v -E "^(real|user|sys)|through_sluice" $OUT/ss-native.out | sed 's/[0-9.]\+/N/g') <(grep -v -E "^(real|user|sys)|through_sluice|^<" $OUT/ss-sluice.out | sed 's/[0-9.]\+/N/g') && echo "ss: same output but for numbers"
grep -E "time went" $OUT/ss-backend.log | cut -c1-600
wait; cat $OUT/e2e.rc; grep -c "^PASS" $OUT/e2e.txt; grep "^FAIL" $OUT/e2e.txt | head; date
timeout 200 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 2 --lanes 8 --out $OUT/datapath-lanes8.jsonl > $OUT/datapath-lanes8.txt 2>&1; echo "datapath lanes8 rc=$?"; grep -E "floor|256 MiB|matmul" $OUT/datapath-lanes8.txt; date
timeout 200 python3 tests/gpu/datapath.py --bundle $B --frontend $B/build/frontend --rounds 2 --lanes 4 --backend-args "--staging-slots 0" --out $OUT/datapath-noslots.jsonl > $OUT/datapath-noslots.txt 2>&1; echo "datapath no slots rc=$?"; grep -E "floor|256 MiB" $OUT/datapath-noslots.txt; date
