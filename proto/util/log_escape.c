/* sl_log_escape: what a guest or a peer sent, made safe for one log line (sluice/log.h). */
#include <stdio.h>
#include <string.h>

#include "sluice/log.h"

/* Length of the valid, printable UTF-8 sequence at p (2..4), or 0. C1 controls and the line and
 * paragraph separators U+2028/U+2029 count as not printable. */
static size_t utf8_len(const unsigned char *p)
{
    unsigned char c = p[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xbf; /* the allowed range of the second byte */
    if (c >= 0xc2 && c <= 0xdf)
        n = 2;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    else
        return 0;
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    if (c == 0xc2 && p[1] <= 0x9f)
        return 0; /* C1 control */
    if (c == 0xe2 && p[1] == 0x80 && (p[2] == 0xa8 || p[2] == 0xa9))
        return 0; /* line / paragraph separator */
    return n;
}

char *sl_log_escape(const char *s, char *out, size_t cap)
{
    if (!cap)
        return out;
    size_t o = 0;
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        char tmp[8];
        size_t n = 0, adv = 1;
        size_t u = *p >= 0x80 ? utf8_len(p) : 0;
        if (u) {
            memcpy(tmp, p, u);
            n = adv = u;
        } else if (*p == '\\') {
            memcpy(tmp, "\\\\", n = 2);
        } else if (*p == '\n') {
            memcpy(tmp, "\\n", n = 2);
        } else if (*p == '\r') {
            memcpy(tmp, "\\r", n = 2);
        } else if (*p == '\t') {
            memcpy(tmp, "\\t", n = 2);
        } else if (*p < 0x20 || *p >= 0x7f) {
            snprintf(tmp, sizeof tmp, "\\x%02x", *p);
            n = 4;
        } else {
            tmp[0] = (char)*p;
            n = 1;
        }
        if (o + n >= cap)
            break;
        memcpy(out + o, tmp, n);
        o += n;
        p += adv;
    }
    out[o] = '\0';
    return out;
}
