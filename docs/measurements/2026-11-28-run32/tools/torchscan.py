# ad hoc: how many of a library's fatbins hold an uncompressed sm_90 cubin with <= 64 kernels
import struct, sys, collections, glob, os
def scan(fn):
    data = open(fn, 'rb').read()
    st = collections.Counter(); i = 0
    while True:
        i = data.find(struct.pack('<I', 0xba55ed50), i)
        if i < 0: break
        try:
            magic, ver, hsz, fsz = struct.unpack_from('<IHHQ', data, i)
            if hsz != 16 or fsz > len(data): i += 4; continue
            p = i + hsz; end = p + fsz; has90 = None
            while p < end:
                kind, v2, hs, size = struct.unpack_from('<HHIQ', data, p)
                arch, = struct.unpack_from('<I', data, p + 28)
                if kind == 2 and arch == 90:
                    pl = data[p + hs:p + hs + size]
                    if pl[:4] != b'\x7fELF': has90 = 'compressed'
                    else:
                        shoff, = struct.unpack_from('<Q', pl, 0x28); shn, = struct.unpack_from('<H', pl, 0x3c)
                        n = 0
                        for k in range(shn):
                            typ, = struct.unpack_from('<I', pl, shoff + k * 64 + 4)
                            if typ == 2:
                                off, sz = struct.unpack_from('<QQ', pl, shoff + k * 64 + 24)
                                for s in range(sz // 24):
                                    info, other = pl[off + s * 24 + 4], pl[off + s * 24 + 5]
                                    if info & 0xf == 2 and other & 0x10: n += 1
                        has90 = 'elf<=64' if n <= 64 else 'elf>64'
                p += hs + size
            st[has90 or 'no sm_90 cubin'] += 1
            i = end
        except struct.error:
            i += 4
    return st
for fn in sys.argv[1:]:
    print(os.path.basename(fn), dict(scan(fn)))
