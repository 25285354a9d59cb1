/* The kernels of a module image and their parameter layouts, read in the guest from the cubin
 * the session's GPUs run (image_listing.c), so that a load need not wait for the backend's list
 * (slLoadImageAs, api/module.c). */
#ifndef SLUICE_FRONTEND_API_IMAGE_LISTING_H
#define SLUICE_FRONTEND_API_IMAGE_LISTING_H

#include <stddef.h>
#include <stdint.h>

struct sl_fe_image_listing {
    size_t n;       /* kernels, at most SL_WIRE_MAX_IMAGE_KERNELS */
    uint8_t *names; /* n names, each ended by its NUL */
    size_t names_len;
    uint32_t *counts;  /* each kernel's parameter count */
    uint64_t *offsets; /* the kernels' parameter offsets one after the other */
    uint64_t *sizes;   /* and sizes */
    size_t nparams;    /* the sum of counts */
};

/* Reads the kernels of image (len bytes of format fmt, slLoadImage's numbering, which is enum
 * sl_fe_image_format's: 1 or 2 a fatbin, 3 an ELF cubin; 4 PTX is never read) from an
 * uncompressed cubin for each of the nsm architectures in sms (major * 10 + minor): their
 * names (the entry symbols) and each one's parameter layout from its .nv.info section, in
 * ordinal order. 0 with *out filled (free it with sl_fe_image_listing_free); -1 when the image
 * lacks such a cubin, holds more kernels than SL_WIRE_MAX_IMAGE_KERNELS or anything this
 * reader does not know (the backend's driver then lists them: slLoadImage). Never reads
 * outside the len bytes. */
int sl_fe_image_list(const void *image, size_t len, uint32_t fmt, const unsigned *sms, size_t nsm,
                     struct sl_fe_image_listing *out);
void sl_fe_image_listing_free(struct sl_fe_image_listing *l);

#endif
