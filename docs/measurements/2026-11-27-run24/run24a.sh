#!/bin/bash
# run 24, call A: build the cuda-samples left (IPC, nvJPEG, ptxjit) on the GPU machine into /tmp/cs
set -x
mkdir -p /tmp/cs && tar -xJf .gpu/full-src.tar.xz -C /tmp/cs && cd /tmp/cs/cuda-samples || exit 1
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > $OUT/cmake.log 2>&1; echo "cmake rc=$?"
ninja -C build -k 0 -j16 simpleIPC streamOrderedAllocationIPC memMapIPCDrv nvJPEG nvJPEG_encoder ptxjit > $OUT/build.log 2>&1; echo "ninja rc=$?"; tail -5 $OUT/build.log
find build/Samples -type f -executable \( -name simpleIPC -o -name streamOrderedAllocationIPC -o -name memMapIPCDrv -o -name 'nvJPEG*' -o -name ptxjit \) | tee $OUT/bins.txt
