#!/bin/bash
# run 26, call A (fourteenth session): build every cuda-sample (categories 0-4, 6) on the GPU machine into /tmp/cs
mkdir -p /tmp/cs && tar -xJf .gpu/full-src.tar.xz -C /tmp/cs && cd /tmp/cs/cuda-samples || exit 1
date
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER=/usr/local/cuda/bin/nvcc > $OUT/cmake.log 2>&1; echo "cmake rc=$?"
ninja -C build -k 0 -j16 > $OUT/samples-build.log 2>&1; echo "ninja rc=$?"; tail -3 $OUT/samples-build.log
find build/Samples -type f -executable | wc -l; date
