/* Nova's libvirt domain metadata: the <instance> element in namespace
 * http://openstack.org/xmlns/libvirt/nova/1.1 (Nova >= 23) or .../nova/1.0 (older), as
 * virDomainGetMetadata(VIR_DOMAIN_METADATA_ELEMENT) returns it. Parsed with libxml2 by local
 * name (any prefix), no network, no DTD, no entities. A pure function of the XML text. */
#ifndef AG_NOVAMETA_H
#define AG_NOVAMETA_H

#include <stddef.h>

#include "instances.h"
#include "sluice/error.h"

#define AG_NOVA_NS_11      "http://openstack.org/xmlns/libvirt/nova/1.1"
#define AG_NOVA_NS_10      "http://openstack.org/xmlns/libvirt/nova/1.0"
#define AG_NOVAMETA_MAX    (256 * 1024) /* larger metadata is refused */
#define AG_MAX_EXTRA_SPECS 64

typedef struct ag_extra_spec {
    char key[128];
    char value[256];
} ag_extra_spec;

typedef struct ag_novameta {
    int ns_version; /* 11 or 10 */
    char name[256]; /* the server's display name */
    char project_id[64], project_name[256], user_id[64], user_name[256];
    char flavor[256], flavor_id[64];
    int has_extra_specs; /* Nova >= 32 writes <extraSpecs> */
    ag_extra_spec specs[AG_MAX_EXTRA_SPECS];
    size_t n_specs;
    char ips[AG_MAX_IPS][64];
    int n_ips;
} ag_novameta;

/* SL_OK and *out filled; SL_ERR_INVALID (with a reason) for anything that is not well-formed
 * Nova metadata: wrong namespace or root, a DTD, no project uuid or no flavor name, too large.
 * Values that are too long are refused; IPs that are not IP literals are skipped.
 * ns_hint: virDomainGetMetadata returns the element *without* its namespace; pass the version
 * of the namespace it was asked for (11 or 10) to accept an un-namespaced <instance>; 0 means
 * the XML itself must carry one of Nova's namespaces. A root with another namespace is always
 * refused. */
sl_code ag_novameta_parse(const char *xml, size_t len, int ns_hint, ag_novameta *out, sl_error *e);

#endif
