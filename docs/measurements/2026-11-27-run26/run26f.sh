#!/bin/bash
# run 26, call F: managed allocations beside a taken address (conjugateGradientUM x5), the test
# programs on the real driver and natively
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle; R=$PWD
nvidia-smi -L; date; S=$R/.gpu/ss/cuda-samples
( timeout 300 python3 tests/e2e/run.py --build $B/build --real-driver -v --large-copy-mib 256 > $OUT/e2e.txt 2>&1; echo "e2e rc=$?" > $OUT/e2e.rc ) &
( cd $S/Samples/4_CUDA_Libraries/conjugateGradientUM && /usr/local/cuda/bin/nvcc -O2 -arch=sm_90 -I$S/Common main.cpp -o /tmp/cgUM -lcublas -lcusparse > $OUT/cg-build.log 2>&1; echo "build rc=$?" )
/tmp/cgUM > $OUT/cg-native.txt 2>&1; echo "native rc=$?"
for i in 1 2 3 4 5; do timeout 60 python3 tests/gpu/through_sluice.py --bundle $B --frontend $B/build/frontend -- /tmp/cgUM > $OUT/cg-sluice$i.txt 2>&1; echo "sluice $i rc=$? $(grep -c 'cannot be mapped' $OUT/cg-sluice$i.txt) refusals"; done
diff $OUT/cg-native.txt <(grep -v through_sluice $OUT/cg-sluice1.txt) && echo "cg: identical output"
wait; cat $OUT/e2e.rc; grep -c "^PASS" $OUT/e2e.txt; grep "^FAIL" $OUT/e2e.txt | head
timeout 100 python3 tests/e2e/run.py --build $B/build --native -v --program managed_memory --program mapped_memory > $OUT/e2e-native.txt 2>&1; echo "native rc=$?"; grep -E "^(PASS|FAIL)|managed_memory:|mapped_memory: 20" $OUT/e2e-native.txt
grep -E "managed_memory:" $OUT/e2e.txt | head -2; date
