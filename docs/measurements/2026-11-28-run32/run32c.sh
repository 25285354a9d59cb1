#!/bin/bash
# run 32, call C: the PyTorch suite's compile step (Triton's cubins loaded as modules) and conv,
# with the backend's account of its loads; then which of PyTorch's own fatbins the guest's
# reader takes (an uncompressed sm_90 cubin of at most 64 kernels) and which go as before
# (.gpu/torchscan.py: tools/torchscan.py, README.md says how to put it there).
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_STATS=1; B=$PWD/.bundle
[ -f .bundle/cuda.tar.xz ] && tar xJf .bundle/cuda.tar.xz -C .bundle/build/tests && rm .bundle/cuda.tar.xz
date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
SLUICE_LOG_LEVEL=debug timeout 250 python3 tests/gpu/pytorch_suite.py --bundle $B --frontend $B/build/frontend --out $OUT/t --timeout 150 --steps conv,compile --log-level info > $OUT/pytorch.txt 2>&1; echo "pytorch rc=$?"; tail -4 $OUT/pytorch.txt
grep -h "without a reply" $OUT/t/backend.log | sed 's/.*: \(library\|module\)/\1/; s/ \[.*//' | awk '{print $1}' | sort | uniq -c
grep -h "kernels listed:" $OUT/t/backend.log | sed 's/.*: \(library\|module\)/\1/; s/ \[.*//' | awk '{print $1}' | sort | uniq -c
grep -h "without a reply" $OUT/t/backend.log | head -3 | sed 's/ \[.*//'
grep -h "session stats: synchronous calls most made" $OUT/t/*sluice*.log | head -4
rm -f $OUT/t/backend.log
date
T=$(python3 -c "import torch,os; print(os.path.dirname(torch.__file__))")/lib
python3 .gpu/torchscan.py $T/libtorch_cuda.so $T/libc10_cuda.so $(ls $T/libcublas*.so* $T/../../nvidia/*/lib/*.so* 2>/dev/null | head -12) 2>&1 | tail -16
date
