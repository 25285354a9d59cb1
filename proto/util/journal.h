/* journald's native protocol, the small part sluice/log.h needs: is stderr the journal, and send
 * one entry of "KEY=value" fields to /run/systemd/journal/socket (systemd's "Native Journal
 * Protocol": a datagram of "KEY=value\n" lines). Private to proto/util. */
#ifndef SLUICE_UTIL_JOURNAL_H
#define SLUICE_UTIL_JOURNAL_H

#include <stddef.h>

/* 1 when $JOURNAL_STREAM names the device and inode of our stderr (systemd connected stderr to
 * the journal) and the native socket can be used; checked once. */
int sl_journal_wanted(void);

/* Sends one entry; each field is "KEY=value" with no line feed in it. 0 on success, -1 when it
 * could not be sent (the caller writes the line to stderr instead). */
int sl_journal_send(const char *const *fields, size_t n);

#endif
