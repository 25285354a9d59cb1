/* The backend's entry into its dispatch table (see sluice/backend_dispatch.h). */
#define __CUDA_API_VERSION_INTERNAL 1
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/backend_dispatch.h"
#include "sluice/driver_api.h"

/* Why a call without a handler does not arrive, for the reply's detail. */
static void why_absent(const struct sl_call_info *ci, Sluice__Wire__Reply *reply)
{
    if (!ci)
        return;
    if (ci->refuse)
        sl_be_detail(reply, "%s is not offered: %s", ci->name, ci->refuse);
    else if (ci->via)
        sl_be_detail(reply, "%s is sent by the frontend as %s", ci->name, ci->via);
    else if (ci->flags & SL_CALL_LOCAL)
        sl_be_detail(reply, "%s is answered by the frontend", ci->name);
}

CUresult sl_be_dispatch(const struct sl_be_dispatch_entry *table, struct sl_be_call *c)
{
    const Sluice__Wire__Call *call = c->call;
    Sluice__Wire__Reply *reply = c->reply;
    CUresult rc;
    reply->seq = call->seq;
    reply->call_id = call->call_id;
    if (call->call_id == 0 || call->call_id > SL_CALL_ID_MAX ||
        table[call->call_id].call_id != call->call_id)
        rc = CUDA_ERROR_NOT_SUPPORTED;
    else if ((uint32_t)call->args_case != SL_ONEOF_BASE + call->call_id)
        rc = CUDA_ERROR_INVALID_VALUE;
    else if (!table[call->call_id].handler) {
        why_absent(sl_call_lookup(call->call_id), reply);
        rc = CUDA_ERROR_NOT_SUPPORTED;
    } else
        rc = table[call->call_id].handler(c);
    reply->result = (int32_t)rc;
    return rc;
}

void sl_be_reply_clear(Sluice__Wire__Reply *reply)
{
    if (reply->out_case != SLUICE__WIRE__REPLY__OUT__NOT_SET) {
        const ProtobufCFieldDescriptor *fd = protobuf_c_message_descriptor_get_field(
            &sluice__wire__reply__descriptor, (unsigned)reply->out_case);
        ProtobufCMessage **member = (ProtobufCMessage **)((char *)reply + fd->offset);
        if (*member)
            protobuf_c_message_free_unpacked(*member, NULL);
        *member = NULL;
        reply->out_case = SLUICE__WIRE__REPLY__OUT__NOT_SET;
    }
    if (reply->detail && reply->detail != protobuf_c_empty_string) {
        free(reply->detail);
        reply->detail = (char *)protobuf_c_empty_string;
    }
}

void sl_be_detail(Sluice__Wire__Reply *reply, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (reply->detail && reply->detail != protobuf_c_empty_string)
        free(reply->detail);
    reply->detail = strdup(buf);
    if (!reply->detail)
        reply->detail = (char *)protobuf_c_empty_string;
}
