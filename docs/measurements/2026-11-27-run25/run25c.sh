#!/bin/bash
# run 25, call C: native with only libnvcuvid hidden vs Sluice (all driver libraries hidden):
# the encoder's JPEGs and the decoder's BMPs compared byte for byte
source .bundle/env.sh; export PYTHONUNBUFFERED=1; B=$PWD/.bundle; R=$PWD; N=/usr/local/nvidia/lib64
HIDE1="mount --bind /dev/null $N/libnvcuvid.so.1"
cd $R/.gpu/nvj/nvJPEG_encoder; rm -rf /tmp/e1 /tmp/e2; mkdir -p /tmp/e1 /tmp/e2
timeout 20 unshare -m sh -c "$HIDE1 && exec /tmp/nvJPEG_encoder -i images/ -o /tmp/e1" > $OUT/enc-native-nocuvid.out 2>&1; echo "enc native (no nvcuvid) rc=$?"
timeout 40 python3 $R/tests/gpu/through_sluice.py --bundle $B --frontend $B/build/frontend -- unshare -m sh -c "mount -t tmpfs none $N && exec /tmp/nvJPEG_encoder -i images/ -o /tmp/e2" > $OUT/enc-sluice2.out 2>&1; echo "enc sluice rc=$?"
for f in /tmp/e1/*; do cmp -s $f /tmp/e2/$(basename $f) && echo "same $(basename $f)" || echo "DIFFER $(basename $f)"; done
cd $R/.gpu/nvj/nvJPEG; rm -rf /tmp/d1 /tmp/d2 /tmp/d0; mkdir -p /tmp/d1 /tmp/d2 /tmp/d0
timeout 20 /tmp/nvJPEG -i images/ -o /tmp/d0 > $OUT/dec-native.out 2>&1; echo "dec native (hw) rc=$?"
timeout 20 unshare -m sh -c "$HIDE1 && exec /tmp/nvJPEG -i images/ -o /tmp/d1" > $OUT/dec-native-nocuvid.out 2>&1; echo "dec native (no nvcuvid) rc=$?"
timeout 40 python3 $R/tests/gpu/through_sluice.py --bundle $B --frontend $B/build/frontend -- unshare -m sh -c "mount -t tmpfs none $N && exec /tmp/nvJPEG -i images/ -o /tmp/d2" > $OUT/dec-sluice.out 2>&1; echo "dec sluice rc=$?"
for f in /tmp/d1/*; do cmp -s $f /tmp/d2/$(basename $f) && echo "same $(basename $f)" || echo "DIFFER $(basename $f)"; cmp -s $f /tmp/d0/$(basename $f) || echo "  (hw decode differs from the CUDA backend natively)"; done
tail -3 $OUT/dec-sluice.out
