#!/bin/bash
# run 26, call I: UnifiedMemoryPerf (over the harness's 40 s in call H by 0.03 s) without a
# time limit of the harness's: native and through Sluice, the build of call H
source .bundle-s/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle-s; R=$PWD
nvidia-smi -L; date; S=$R/.gpu/ss/cuda-samples
( cd $S/Samples/6_Performance/UnifiedMemoryPerf && /usr/local/cuda/bin/nvcc -O2 -arch=sm_90 -I$S/Common helperFunctions.cpp matrixMultiplyPerf.cu commonKernels.cu -o /tmp/ump > $OUT/ump-build.log 2>&1; echo "build rc=$?" )
( time timeout 60 /tmp/ump ) > $OUT/ump-native.txt 2>&1; echo "native rc=$?"
( time timeout 150 python3 tests/gpu/through_sluice.py --bundle $B --frontend $B/build/frontend -- /tmp/ump ) > $OUT/ump-sluice.txt 2>&1; echo "sluice rc=$?"
tail -14 $OUT/ump-native.txt; tail -16 $OUT/ump-sluice.txt; date
