#!/bin/bash
# run 32, call B: stock PyTorch through the load without a reply, every step of the suite
# (PyTorch's own modules through cudart's lazy loading: those whose cubin the guest can read load
# without a reply; `compile` loads Triton's cubins as modules), one timing pair; then how many
# loads went each way (the backend's account of its calls); then the first-launch trace
# (tests/gpu/datapath_trace.py --parts first: both sides' debug lines joined by seq).
source .bundle/env.sh; export PYTHONUNBUFFERED=1 SLUICE_STATS=1; B=$PWD/.bundle
[ -f .bundle/cuda.tar.xz ] && tar xJf .bundle/cuda.tar.xz -C .bundle/build/tests && rm .bundle/cuda.tar.xz
date; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 330 python3 tests/gpu/pytorch_suite.py --bundle $B --frontend $B/build/frontend --out $OUT/t --timeout 100 --timing-pairs 1 > $OUT/pytorch.txt 2>&1; echo "pytorch rc=$?"; tail -22 $OUT/pytorch.txt
grep -ho "slLoadImage[A-Za-z]* [0-9]* x [0-9.]* us" $OUT/t/backend.log | head -30
grep -ho "most made: .*" $OUT/t/*.log | grep -o "slLoadImage [0-9]*\|cuLibraryGetKernel [0-9]*\|slParamLayout [0-9]*" | sort | uniq -c
grep -h "module images:" $OUT/t/backend.log 2>/dev/null | sed 's/.*module images/module images/; s/ \[.*//' | sort | uniq -c | head
grep -ho "loaded as [0-9a-f]* without a reply, [0-9]* kernels" $OUT/t/backend.log 2>/dev/null | wc -l
rm -f $OUT/t/backend.log
date
SLUICE_STATS=1 timeout 150 python3 tests/gpu/datapath_trace.py --bundle $B --frontend $B/build/frontend --parts first --quick --out $OUT/trace > /dev/null 2>&1; echo "trace rc=$?"; cat $OUT/trace/summary.txt | head -40
grep -h "without a reply\|loaded as" $OUT/trace/backend.log | sed 's/ \[.*//' | head -6
rm -f $OUT/trace/backend.log
date
