#!/bin/bash
# run 25 (thirteenth session): why nvJPEG hangs through Sluice: stacks of the hung program
source .bundle/env.sh; export PYTHONUNBUFFERED=1; B=$PWD/.bundle; R=$PWD
nvidia-smi -L; date
D=$R/.gpu/nvj/nvJPEG
( cd $D && /usr/local/cuda/bin/nvcc -O2 -std=c++17 -I../Common nvJPEG.cpp -o /tmp/nvJPEG -lnvjpeg > $OUT/build.log 2>&1; echo "build rc=$?" ); tail -3 $OUT/build.log
cd $D
( time timeout 20 /tmp/nvJPEG -i images/ ) > $OUT/native.out 2>&1; echo "native rc=$?"; tail -4 $OUT/native.out
timeout 60 python3 $R/tests/gpu/through_sluice.py --bundle $B --frontend $B/build/frontend --log-level debug --backend-log $OUT/backend.log -- /tmp/nvJPEG -i images/ > $OUT/sluice.out 2>&1 &
sleep 14
P=$(pgrep -f "^/tmp/nvJPEG" | head -1); echo "nvJPEG pid $P"
timeout 40 cuda-gdb -p $P -batch -ex "info threads" -ex "thread apply all bt 25" > $OUT/gdb-guest.txt 2>&1; echo "gdb rc=$?"
grep -E "^#|^Thread|^\*" $OUT/gdb-guest.txt | head -80
for W in $(pgrep -f "sluice-backend" | head -3); do echo "== backend pid $W"; timeout 20 cuda-gdb -p $W -batch -ex "thread apply all bt 12" 2>&1 | grep -E "^#|^Thread" | head -40; done > $OUT/gdb-backend.txt
pkill -f "^/tmp/nvJPEG"; wait; tail -c 4000 $OUT/sluice.out; date
