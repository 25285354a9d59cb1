/* The backend's entry into the generated handlers (see sluice/backend_dispatch.h). */
#define __CUDA_API_VERSION_INTERNAL 1
#include <stdlib.h>
#include <string.h>

#include "sluice/backend_dispatch.h"
#include "sluice/driver_api.h"

void sl_be_dispatch_init(struct sl_be_dispatch_entry *table)
{
    memcpy(table, sl_be_generated_table, sizeof sl_be_generated_table);
}

CUresult sl_be_dispatch(sl_be_session *s, const struct sl_driver_api *api,
                        const struct sl_be_dispatch_entry *table, const Sluice__Wire__Call *call,
                        Sluice__Wire__Reply *reply)
{
    CUresult rc;
    reply->seq = call->seq;
    reply->call_id = call->call_id;
    if (call->call_id == 0 || call->call_id > SL_CALL_ID_MAX ||
        table[call->call_id].call_id != call->call_id)
        rc = CUDA_ERROR_NOT_SUPPORTED;
    else if ((uint32_t)call->args_case != SL_ONEOF_BASE + call->call_id)
        rc = CUDA_ERROR_INVALID_VALUE;
    else if (!table[call->call_id].handler)
        rc = CUDA_ERROR_NOT_SUPPORTED;
    else
        rc = table[call->call_id].handler(s, api, call, reply);
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
