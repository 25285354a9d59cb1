/* What hand handlers share to answer (header only). */
#ifndef SLUICE_BE_API_REPLY_H
#define SLUICE_BE_API_REPLY_H

#include <stdlib.h>

/* Allocates a reply member message: BE_REPLY(reply, field, CASE, Type, init) sets
 * reply->out_case and reply->field; NULL when out of memory. */
#define BE_REPLY(reply, field, CASE, Type, init)                                                   \
    ({                                                                                             \
        Type *rp_ = malloc(sizeof *rp_);                                                           \
        if (rp_) {                                                                                 \
            init(rp_);                                                                             \
            (reply)->out_case = CASE;                                                              \
            (reply)->field = rp_;                                                                  \
        }                                                                                          \
        rp_;                                                                                       \
    })

#endif
