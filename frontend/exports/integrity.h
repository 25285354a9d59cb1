/* The answer of INTEGRITY_CHECK[1] (export-tables.md section 1): constants for versions ending
 * in 0 and 1, otherwise HMAC-MD2 under a fixed key over a 48-byte process record followed by a
 * 28-byte record per device. Every input is explicit, so tests and the GPU-machine probe
 * (tests/unit/frontend/integrity_probe.c) can feed the real driver's values. */
#ifndef SLUICE_FRONTEND_INTEGRITY_H
#define SLUICE_FRONTEND_INTEGRITY_H

#include <stddef.h>
#include <stdint.h>

#include <cuda.h>

struct sl_fe_integrity_device {
    CUuuid uuid;        /* cuDeviceGetUuid */
    int32_t pci_domain; /* attribute 50, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID */
    int32_t pci_bus;    /* attribute 33, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID */
    int32_t pci_device; /* attribute 34, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID */
};

struct sl_fe_integrity_input {
    uint32_t driver_version;  /* what cuDriverGetVersion reports */
    uint32_t version;         /* the caller's argument (13000, 13001, 13002 from cudart 13.0) */
    uint32_t pid;             /* (uint32_t)getpid() */
    uint32_t thread_id;       /* (uint32_t)pthread_self() of the calling thread */
    uint64_t cudart_table;    /* address of the CUDART_INTERFACE table */
    uint64_t integrity_table; /* address of the INTEGRITY_CHECK table */
    uint64_t slot1;           /* the value of INTEGRITY_CHECK slot 1 (the function's address) */
    uint64_t unix_seconds;    /* the caller's argument */
    const struct sl_fe_integrity_device *devices;
    size_t device_count;
};

/* The serialised sizes that are hashed. */
#define SL_FE_INTEGRITY_RECORD_SIZE 48
#define SL_FE_INTEGRITY_DEVICE_SIZE 28

/* out[0], out[1]: the two 64-bit words cudart checks (digest bytes 0-7 and 8-15, little
 * endian). Returns -1 (out untouched) for NULL pointers or devices NULL with a count. */
int sl_fe_integrity_compute(const struct sl_fe_integrity_input *in, uint64_t out[2]);

/* Serialisation, exposed for the tests: little-endian fields in declaration order. */
void sl_fe_integrity_record(const struct sl_fe_integrity_input *in,
                            uint8_t rec[SL_FE_INTEGRITY_RECORD_SIZE]);
void sl_fe_integrity_device_record(const struct sl_fe_integrity_device *dev,
                                   uint8_t rec[SL_FE_INTEGRITY_DEVICE_SIZE]);

#endif
