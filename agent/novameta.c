/* Nova metadata parser (libxml2, by local name). */
#include "novameta.h"

#include <arpa/inet.h>
#include <libxml/parser.h>
#include <libxml/tree.h>
#include <string.h>

static int is(const xmlNode *n, const char *local)
{
    return n && n->type == XML_ELEMENT_NODE && !strcmp((const char *)n->name, local);
}

static xmlNode *child(const xmlNode *n, const char *local)
{
    for (xmlNode *c = n ? n->children : NULL; c; c = c->next)
        if (is(c, local))
            return c;
    return NULL;
}

/* Copies an attribute or the text content into dst; 0 on success or absence, -1 if too long. */
static int copy_val(xmlChar *v, char *dst, size_t cap)
{
    if (!v)
        return 0;
    size_t n = strlen((const char *)v);
    int rc = n < cap ? 0 : -1;
    if (!rc)
        memcpy(dst, v, n + 1);
    xmlFree(v);
    return rc;
}

static int attr(const xmlNode *n, const char *name, char *dst, size_t cap)
{
    return n ? copy_val(xmlGetProp(n, (const xmlChar *)name), dst, cap) : 0;
}

static int text(const xmlNode *n, char *dst, size_t cap)
{
    return n ? copy_val(xmlNodeGetContent(n), dst, cap) : 0;
}

static int valid_ip(const char *s)
{
    unsigned char buf[16];
    return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

static void parse_ports(const xmlNode *ports, ag_novameta *m)
{
    for (xmlNode *p = ports ? ports->children : NULL; p; p = p->next) {
        if (!is(p, "port"))
            continue;
        for (xmlNode *ip = p->children; ip; ip = ip->next) {
            char addr[64] = "";
            if (!is(ip, "ip") || attr(ip, "address", addr, sizeof addr) || !valid_ip(addr))
                continue;
            int dup = 0;
            for (int i = 0; i < m->n_ips; i++)
                dup |= !strcmp(m->ips[i], addr);
            if (!dup && m->n_ips < AG_MAX_IPS)
                memcpy(m->ips[m->n_ips++], addr, sizeof addr);
        }
    }
}

static void parse_specs(const xmlNode *specs, ag_novameta *m)
{
    m->has_extra_specs = 1;
    for (xmlNode *s = specs->children; s; s = s->next) {
        if (!is(s, "extraSpec") || m->n_specs >= AG_MAX_EXTRA_SPECS)
            continue;
        ag_extra_spec *x = &m->specs[m->n_specs];
        memset(x, 0, sizeof *x);
        if (attr(s, "name", x->key, sizeof x->key) || !x->key[0] ||
            text(s, x->value, sizeof x->value))
            continue;
        m->n_specs++;
    }
}

static sl_code fill(const xmlNode *root, ag_novameta *m, sl_error *e)
{
    const xmlNode *flavor = child(root, "flavor");
    const xmlNode *owner = child(root, "owner");
    const xmlNode *user = child(owner, "user"), *project = child(owner, "project");
    if (text(child(root, "name"), m->name, sizeof m->name))
        return sl_fail(e, SL_ERR_INVALID, "nova:name too long");
    if (attr(flavor, "name", m->flavor, sizeof m->flavor) ||
        attr(flavor, "id", m->flavor_id, sizeof m->flavor_id))
        return sl_fail(e, SL_ERR_INVALID, "nova:flavor name or id too long");
    if (attr(project, "uuid", m->project_id, sizeof m->project_id) ||
        text(project, m->project_name, sizeof m->project_name))
        return sl_fail(e, SL_ERR_INVALID, "nova:project too long");
    if (attr(user, "uuid", m->user_id, sizeof m->user_id) ||
        text(user, m->user_name, sizeof m->user_name))
        return sl_fail(e, SL_ERR_INVALID, "nova:user too long");
    if (!m->project_id[0])
        return sl_fail(e, SL_ERR_INVALID, "no nova:owner/nova:project@uuid");
    if (!m->flavor[0])
        return sl_fail(e, SL_ERR_INVALID, "no nova:flavor@name");
    for (const char *c = m->project_id; *c; c++)
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f') || (*c >= 'A' && *c <= 'F') ||
              *c == '-'))
            return sl_fail(e, SL_ERR_INVALID, "project uuid is not hex");
    const xmlNode *specs = child(flavor, "extraSpecs");
    if (specs)
        parse_specs(specs, m);
    parse_ports(child(root, "ports"), m);
    return SL_OK;
}

static void silent(void *ctx, const char *msg, ...)
{
    (void)ctx;
    (void)msg;
}

sl_code ag_novameta_parse(const char *xml, size_t len, int ns_hint, ag_novameta *out, sl_error *e)
{
    memset(out, 0, sizeof *out);
    if (!xml || len == 0)
        return sl_fail(e, SL_ERR_INVALID, "empty metadata");
    if (len > AG_NOVAMETA_MAX)
        return sl_fail(e, SL_ERR_INVALID, "metadata larger than %d bytes", AG_NOVAMETA_MAX);
    /* No DTD at all: nothing Nova writes has one, and it is where entity bombs live. */
    if (memmem(xml, len, "<!DOCTYPE", 9) || memmem(xml, len, "<!ENTITY", 8))
        return sl_fail(e, SL_ERR_INVALID, "a DTD or entity declaration is not allowed");
    xmlSetGenericErrorFunc(NULL, silent);
    xmlDoc *doc = xmlReadMemory(xml, (int)len, "nova-metadata.xml", NULL,
                                XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
    if (!doc)
        return sl_fail(e, SL_ERR_INVALID, "not well-formed XML");
    sl_code rc;
    xmlNode *root = xmlDocGetRootElement(doc);
    if (doc->intSubset || doc->extSubset) {
        rc = sl_fail(e, SL_ERR_INVALID, "a DTD is not allowed");
    } else if (!is(root, "instance")) {
        rc = sl_fail(e, SL_ERR_INVALID, "root is not <instance>");
    } else if (!root->ns || !root->ns->href) {
        if (ns_hint == 10 || ns_hint == 11) {
            out->ns_version = ns_hint;
            rc = fill(root, out, e);
        } else {
            rc = sl_fail(e, SL_ERR_INVALID, "<instance> has no namespace");
        }
    } else if (!strcmp((const char *)root->ns->href, AG_NOVA_NS_11)) {
        out->ns_version = 11;
        rc = fill(root, out, e);
    } else if (!strcmp((const char *)root->ns->href, AG_NOVA_NS_10)) {
        out->ns_version = 10;
        rc = fill(root, out, e);
    } else {
        rc = sl_fail(e, SL_ERR_INVALID, "namespace %.80s is not Nova's",
                     (const char *)root->ns->href);
    }
    xmlFreeDoc(doc);
    if (rc != SL_OK) {
        int v = out->ns_version;
        memset(out, 0, sizeof *out);
        out->ns_version = v;
    }
    return rc;
}
