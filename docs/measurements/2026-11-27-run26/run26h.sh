#!/bin/bash
# run 26, call H: every cuda-sample on the build of the session's end (mapped-memory copies, staging
# slots, lent lane pieces, managed retry), programs through Sluice with the host driver's libraries hidden
source .bundle-s/env.sh; export PYTHONUNBUFFERED=1 SLUICE_LOG_LEVEL=warning; B=$PWD/.bundle-s; R=$PWD
nvidia-smi -L; date
mkdir -p /tmp/cs && tar -xJf .gpu/full-src.tar.xz -C /tmp/cs && cd /tmp/cs/cuda-samples || exit 1
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > $OUT/cmake.log 2>&1; echo "cmake rc=$?"
ninja -C build -k 0 -j16 > $OUT/samples-build.log 2>&1; echo "ninja rc=$?"; date
cd $R
CUDA_CACHE_DISABLE=1 timeout 480 python3 tests/gpu/run_samples.py --bin /tmp/cs/cuda-samples/build/Samples \
  --args /tmp/cs/cuda-samples/test_args.json --bundle $B --frontend $B/build/frontend \
  --out $OUT/samples.jsonl --timeout 40 --save /tmp/samples-out > $OUT/samples.log 2>&1; echo "samples rc=$?"
tail -1 $OUT/samples.log; grep -vE "identical|same-but-numbers" $OUT/samples.log | head -20; grep -E "^simpleStreams|^UnifiedMemoryPerf" $OUT/samples.log
cd /tmp/samples-out 2>/dev/null && tar -czf $OUT/samples-out.tgz . ; date
