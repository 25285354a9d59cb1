/* The printf filter: the output of device printf that a reply carries goes to the program's
 * standard output, after what the program printed before it; what the device wrote to stderr
 * (failed device-side asserts) goes straight to its standard error, as the driver writes it:
 * without flushing the program's buffered standard output first (simpleAssert's output, run 22;
 * docs/remoting.md "Host callbacks and printf"). */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "call/printf.h"

static void write_all(int fd, const ProtobufCBinaryData *d)
{
    size_t off = 0;
    while (off < d->len) {
        ssize_t w = write(fd, d->data + off, d->len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
}

void sl_fe_printf_write(const ProtobufCBinaryData *out, const ProtobufCBinaryData *err)
{
    if (!out->len && !err->len)
        return;
    if (out->len) {
        fflush(stdout);
        write_all(1, out);
    }
    if (err->len) {
        fflush(stderr);
        write_all(2, err);
    }
}
