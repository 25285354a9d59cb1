/* Shape checks for every string that reaches nova-hook from the network. */
#ifndef NH_VALIDATE_H
#define NH_VALIDATE_H

#include <stddef.h>

/* Instance or project id: hex digits and dashes, 1..64 (Keystone project ids have no dashes,
 * Nova instance ids are RFC 4122 UUIDs). */
int nh_valid_id(const char *s);
/* Host name: letters, digits, '.', '-', '_', 1..253. */
int nh_valid_host(const char *s);
/* Printable ASCII (0x20..0x7e), min..max bytes. */
int nh_valid_printable(const char *s, size_t min, size_t max);
/* "tcp://HOST:PORT" or "tcp://[V6]:PORT", port 1..65535, at most 255 bytes. */
int nh_valid_endpoint(const char *s);

#endif
