/* Shape checks for network input. */
#include "validate.h"

#include <stdlib.h>
#include <string.h>

int nh_valid_id(const char *s)
{
    if (!s)
        return 0;
    size_t n = strlen(s);
    if (n == 0 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
              c == '-'))
            return 0;
    }
    return 1;
}

static int host_char(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
           c == '-' || c == '_';
}

int nh_valid_host(const char *s)
{
    if (!s)
        return 0;
    size_t n = strlen(s);
    if (n == 0 || n > 253)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!host_char(s[i]))
            return 0;
    return 1;
}

int nh_valid_printable(const char *s, size_t min, size_t max)
{
    if (!s)
        return min == 0;
    size_t n = strlen(s);
    if (n < min || n > max)
        return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
            return 0;
    return 1;
}

int nh_valid_endpoint(const char *s)
{
    if (!s || strlen(s) > 255 || strncmp(s, "tcp://", 6) != 0)
        return 0;
    const char *h = s + 6, *colon;
    if (*h == '[') {
        const char *end = strchr(h, ']');
        if (!end || end == h + 1 || end[1] != ':')
            return 0;
        for (const char *p = h + 1; p < end; p++)
            if (!(strchr("0123456789abcdefABCDEF:.", *p)))
                return 0;
        colon = end + 1;
    } else {
        colon = strrchr(h, ':');
        if (!colon || colon == h)
            return 0;
        for (const char *p = h; p < colon; p++)
            if (!host_char(*p))
                return 0;
    }
    const char *port = colon + 1;
    if (!*port || strlen(port) > 5 || strspn(port, "0123456789") != strlen(port))
        return 0;
    long v = strtol(port, NULL, 10);
    return v >= 1 && v <= 65535;
}
