#!/bin/bash
# run 25, call B: nvJPEG and nvJPEG_encoder with the host driver's own user-space libraries
# hidden from the program (a mount namespace with an empty folder over them), as in a guest
source .bundle/env.sh; export PYTHONUNBUFFERED=1; B=$PWD/.bundle; R=$PWD
date; N=/usr/local/nvidia/lib64
for s in nvJPEG nvJPEG_encoder; do ( cd $R/.gpu/nvj/$s && /usr/local/cuda/bin/nvcc -O2 -std=c++17 -I../Common $s.cpp -o /tmp/$s -lnvjpeg > $OUT/build-$s.log 2>&1; echo "build $s rc=$?" ); done
G="unshare -m sh -c 'mount -t tmpfs none $N && exec \"\$0\" \"\$@\"'"
cd $R/.gpu/nvj/nvJPEG
( time timeout 20 unshare -m sh -c "mount -t tmpfs none $N && exec /tmp/nvJPEG -i images/" ) > $OUT/native-hidden.out 2>&1; echo "native hidden rc=$?"; tail -5 $OUT/native-hidden.out
( time timeout 40 python3 $R/tests/gpu/through_sluice.py --bundle $B --frontend $B/build/frontend --backend-log $OUT/backend.log -- unshare -m sh -c "mount -t tmpfs none $N && exec /tmp/nvJPEG -i images/" ) > $OUT/sluice.out 2>&1; echo "sluice rc=$?"; tail -8 $OUT/sluice.out
cd $R/.gpu/nvj/nvJPEG_encoder; mkdir -p /tmp/enc1 /tmp/enc2
( time timeout 20 /tmp/nvJPEG_encoder -i images/ -o /tmp/enc1 ) > $OUT/enc-native.out 2>&1; echo "enc native rc=$?"; tail -4 $OUT/enc-native.out
( time timeout 40 python3 $R/tests/gpu/through_sluice.py --bundle $B --frontend $B/build/frontend --backend-log $OUT/enc-backend.log -- unshare -m sh -c "mount -t tmpfs none $N && exec /tmp/nvJPEG_encoder -i images/ -o /tmp/enc2" ) > $OUT/enc-sluice.out 2>&1; echo "enc sluice rc=$?"; tail -6 $OUT/enc-sluice.out
for f in /tmp/enc1/*; do cmp $f /tmp/enc2/$(basename $f) && echo "same $(basename $f)"; done
date
