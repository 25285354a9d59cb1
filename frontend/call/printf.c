/* The printf filter: the output of device printf that a reply carries goes to the program's
 * standard output (docs/remoting.md "Host callbacks and printf"). */
#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include "call/printf.h"

void sl_fe_printf_write(const ProtobufCBinaryData *d)
{
    if (!d->len)
        return;
    fflush(stdout);
    size_t off = 0;
    while (off < d->len) {
        ssize_t w = write(1, d->data + off, d->len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
}
