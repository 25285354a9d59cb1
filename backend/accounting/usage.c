/* Usage records (proto/schema/sluice_control.proto, UsageRecord): built by a session's worker
 * every interval and at the session's end (accounting.c), sent to the server, which queues them
 * for the agent (usage_queue.c, control.c) or, without --control, logs them (be_usage_log).
 * Each record gets a fresh UUID, so every store keeps it once however often it is sent. */
#include "accounting/usage.h"

#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>

#include "bounds.h"
#include "sluice/error.h"
#include "sluice/log.h"
#include "sluice_control.pb-c.h"

sl_code be_usage_uuid(char out[37], sl_error *e)
{
    uint8_t r[16];
    if (RAND_bytes(r, sizeof r) != 1)
        return sl_fail(e, SL_ERR_IO, "no random bytes for a record id");
    r[6] = (uint8_t)((r[6] & 0x0f) | 0x40); /* version 4 */
    r[8] = (uint8_t)((r[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", r[0],
             r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13],
             r[14], r[15]);
    return SL_OK;
}

void be_usage_gpu_uuid(const uint8_t u[16], char out[41])
{
    snprintf(out, 41, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
             u[14], u[15]);
}

sl_code be_usage_encode(const struct be_usage *u, uint8_t **buf, size_t *len, sl_error *e)
{
    char id[37];
    if (be_usage_uuid(id, e) != SL_OK)
        return e->code;
    Sluice__Control__UsageRecord r = SLUICE__CONTROL__USAGE_RECORD__INIT;
    r.record_id = id;
    r.instance_uuid = (char *)(u->instance ? u->instance : "");
    r.project_id = (char *)(u->project ? u->project : "");
    r.flavor = (char *)(u->flavor ? u->flavor : "");
    r.gpu_uuid = (char *)(u->gpu_uuid ? u->gpu_uuid : "");
    r.measurement = (char *)(u->measurement ? u->measurement : "");
    r.session_id = u->session_id;
    r.interval_start_ns = u->start_ns;
    r.interval_end_ns = u->end_ns;
    r.gpu_busy_ns = u->busy_ns;
    r.kernel_ns = u->kernel_ns;
    r.kernels = u->kernels;
    r.bytes_htod = u->bytes_htod;
    r.bytes_dtoh = u->bytes_dtoh;
    r.memory_high_water = u->memory_high_water;
    r.calls = u->calls;
    r.errors = u->errors;
    r.throttled_ns = u->throttled_ns;
    r.quota_refusals = u->quota_refusals;
    r.gpu_share = u->gpu_share;
    r.final = u->final != 0;
    r.busy_widened_ns = u->busy_widened_ns;
    size_t nb = u->nbusy < BE_USAGE_MAX_BUSY ? u->nbusy : BE_USAGE_MAX_BUSY;
    Sluice__Control__BusyInterval *iv = nb ? calloc(nb, sizeof *iv) : NULL;
    Sluice__Control__BusyInterval **ivp = nb ? calloc(nb, sizeof *ivp) : NULL;
    if (nb && (!iv || !ivp)) {
        free(iv);
        free(ivp);
        return sl_fail(e, SL_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < nb; i++) {
        sluice__control__busy_interval__init(&iv[i]);
        iv[i].start_ns = u->busy[i].a;
        iv[i].end_ns = u->busy[i].b;
        ivp[i] = &iv[i];
    }
    r.n_busy = nb;
    r.busy = ivp;
    size_t n = sluice__control__usage_record__get_packed_size(&r);
    uint8_t *b = malloc(n ? n : 1);
    if (b)
        sluice__control__usage_record__pack(&r, b);
    free(iv);
    free(ivp);
    if (!b)
        return sl_fail(e, SL_ERR_NOMEM, "out of memory");
    *buf = b;
    *len = n;
    return SL_OK;
}

void be_usage_log(const Sluice__Control__UsageRecord *r)
{
    sl_log(
        SL_LOG_INFO, BE_COMPONENT,
        "usage %s: session %llu instance %s project %s gpu %s%s: %.6f s busy, %.6f s in %llu "
        "kernels, %llu B to and %llu B from the device, memory high-water %llu B, %llu calls "
        "(%llu failed), %.6f s throttled, %u quota refusals, over %.3f s (%s), %zu busy intervals",
        r->record_id, (unsigned long long)r->session_id, r->instance_uuid, r->project_id,
        r->gpu_uuid && *r->gpu_uuid ? r->gpu_uuid : "-", r->final ? ", final" : "",
        (double)r->gpu_busy_ns / 1e9, (double)r->kernel_ns / 1e9, (unsigned long long)r->kernels,
        (unsigned long long)r->bytes_htod, (unsigned long long)r->bytes_dtoh,
        (unsigned long long)r->memory_high_water, (unsigned long long)r->calls,
        (unsigned long long)r->errors, (double)r->throttled_ns / 1e9, r->quota_refusals,
        (double)(r->interval_end_ns - r->interval_start_ns) / 1e9, r->measurement, r->n_busy);
}
