/* The kernels of an image read from its cubin (image_listing.h). A fatbin holds entries (a
 * 16-byte header: magic 0xba55ed50, version, header size, size of the entries), each with a
 * header of its own: kind (1 PTX, 2 ELF), version, header size, payload size, and at byte 28
 * the architecture (90 for sm_90); a payload that is not an ELF is compressed (or unknown) and
 * not read. In the cubin (EM_CUDA, 64-bit, little-endian) a kernel is a function symbol marked
 * as an entry (st_other 0x10); its section ".nv.info.<name>" holds attributes: one byte of
 * format, one of id, then a 2-byte value (format 3) or a 2-byte length and that many bytes
 * (format 4). KPARAM_INFO (0x17, format 4): index (4 bytes), ordinal (2), offset (2), and in
 * the next 4 bytes the size in bits 18-31; CBANK_PARAM_SIZE (0x19, format 3): the parameters'
 * extent. nvcc 13 writes them so (measured on its output, docs/remoting.md); any other format,
 * a parameter encoded otherwise (the KPARAM_INFO_V2 of parameters beyond 4 KiB), ordinals with
 * gaps or an extent that disagrees are refused, and the load asks the backend as before. */
#include "api/image_listing.h"

#include <elf.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/wire.h"

#define FATBIN_MAGIC      0xba55ed50u
#define FATBIN_KIND_ELF   2
#define EM_CUDA_MACHINE   190
#define STO_CUDA_ENTRY    0x10
#define EIATTR_KPARAM     0x17
#define EIATTR_PARAM_SIZE 0x19
#define MAX_PARAMS        4096u
#define INFO_PREFIX       ".nv.info."
#define FORMAT_WRAPPER    1u /* slLoadImage's formats (api/module.h) */
#define FORMAT_FATBIN     2u
#define FORMAT_ELF        3u

/* len bytes at p, read only when [off, off + n) lies inside them. */
struct span {
    const uint8_t *p;
    size_t len;
};

static int inside(struct span s, uint64_t off, uint64_t n)
{
    return off <= s.len && n <= s.len - off;
}

static uint16_t u16_at(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint32_t u32_at(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* One cubin's headers, checked. */
struct cubin {
    struct span s;
    Elf64_Ehdr eh;
    Elf64_Shdr shstr, symtab, symstr;
};

static int section(const struct cubin *c, unsigned i, Elf64_Shdr *out)
{
    if (i >= c->eh.e_shnum)
        return -1;
    memcpy(out, c->s.p + c->eh.e_shoff + (uint64_t)i * sizeof *out, sizeof *out);
    return out->sh_type == SHT_NOBITS || inside(c->s, out->sh_offset, out->sh_size) ? 0 : -1;
}

/* The NUL-ended string at off of string table t, NULL when it runs outside. */
static const char *string_at(const struct cubin *c, const Elf64_Shdr *t, uint64_t off)
{
    if (off >= t->sh_size)
        return NULL;
    const char *s = (const char *)c->s.p + t->sh_offset + off;
    return memchr(s, '\0', t->sh_size - off) ? s : NULL;
}

static int cubin_open(struct cubin *c, const uint8_t *p, size_t len)
{
    c->s = (struct span){p, len};
    if (len < sizeof c->eh || memcmp(p, ELFMAG, SELFMAG) != 0)
        return -1;
    memcpy(&c->eh, p, sizeof c->eh);
    if (c->eh.e_ident[EI_CLASS] != ELFCLASS64 || c->eh.e_ident[EI_DATA] != ELFDATA2LSB ||
        c->eh.e_machine != EM_CUDA_MACHINE || c->eh.e_shentsize != sizeof(Elf64_Shdr) ||
        !inside(c->s, c->eh.e_shoff, (uint64_t)c->eh.e_shnum * sizeof(Elf64_Shdr)) ||
        section(c, c->eh.e_shstrndx, &c->shstr) != 0 || c->shstr.sh_type != SHT_STRTAB)
        return -1;
    for (unsigned i = 0; i < c->eh.e_shnum; i++) {
        Elf64_Shdr sh;
        if (section(c, i, &sh) != 0)
            return -1;
        if (sh.sh_type == SHT_SYMTAB) {
            c->symtab = sh;
            if (sh.sh_entsize != sizeof(Elf64_Sym) || section(c, sh.sh_link, &c->symstr) != 0 ||
                c->symstr.sh_type != SHT_STRTAB)
                return -1;
            return 0;
        }
    }
    return -1; /* no symbols: nothing to name */
}

/* The cubin's architecture from e_flags: bits 8-15 from ELF ABI version 8 on (CUDA 13), the
 * low byte before. */
static unsigned cubin_arch(const struct cubin *c)
{
    return c->eh.e_ident[EI_ABIVERSION] >= 8 ? (c->eh.e_flags >> 8) & 0xff : c->eh.e_flags & 0xff;
}

/* The section ".nv.info.<name>", -1 when there is none. */
static int info_section(const struct cubin *c, const char *name, Elf64_Shdr *out)
{
    size_t plen = sizeof INFO_PREFIX - 1;
    for (unsigned i = 0; i < c->eh.e_shnum; i++) {
        const char *n;
        if (section(c, i, out) != 0 || !(n = string_at(c, &c->shstr, out->sh_name)))
            return -1;
        if (strncmp(n, INFO_PREFIX, plen) == 0 && strcmp(n + plen, name) == 0)
            return out->sh_type == SHT_NOBITS ? -1 : 0;
    }
    return -1;
}

/* Walks the attributes of a .nv.info section (n bytes at a): the number of KPARAM_INFO entries
 * (*k) and the extent (CBANK_PARAM_SIZE; -1 when absent). With offs and sizes (cap entries,
 * sizes zeroed) it also puts each entry's offset and size at its ordinal. -1 for an attribute
 * format this reader does not know, an entry too short or of size 0, or (placing) an ordinal
 * outside cap or given twice: cap entries with distinct ordinals below cap leave no gap. */
static int walk_info(const uint8_t *a, uint64_t n, uint32_t cap, uint32_t *k, int64_t *extent,
                     uint64_t *offs, uint64_t *sizes)
{
    uint64_t at = 0;
    uint32_t seen = 0;
    *extent = -1;
    while (at < n) {
        if (n - at < 4)
            return -1;
        uint8_t fmt = a[at], id = a[at + 1];
        uint16_t v = u16_at(a + at + 2);
        if (fmt == 3) {
            if (id == EIATTR_PARAM_SIZE)
                *extent = v;
            at += 4;
            continue;
        }
        if (fmt != 4 || n - at - 4 < v)
            return -1;
        if (id == EIATTR_KPARAM) {
            if (v < 12 || seen == MAX_PARAMS)
                return -1;
            uint16_t ord = u16_at(a + at + 8), off = u16_at(a + at + 10);
            uint32_t size = u32_at(a + at + 12) >> 18;
            if (size == 0)
                return -1;
            if (offs) {
                if (ord >= cap || sizes[ord])
                    return -1;
                offs[ord] = off;
                sizes[ord] = size;
            }
            seen++;
        }
        at += 4 + (uint64_t)v;
    }
    *k = seen;
    return 0;
}

/* One kernel's parameters from its .nv.info section, in ordinal order, appended to out. */
static int kernel_params(const struct cubin *c, const Elf64_Shdr *info,
                         struct sl_fe_image_listing *out, uint32_t *count)
{
    const uint8_t *a = c->s.p + info->sh_offset;
    uint32_t k = 0;
    int64_t extent;
    if (walk_info(a, info->sh_size, 0, &k, &extent, NULL, NULL) != 0)
        return -1;
    uint64_t *o = realloc(out->offsets, (out->nparams + k + 1) * sizeof *o);
    if (o)
        out->offsets = o;
    uint64_t *z = realloc(out->sizes, (out->nparams + k + 1) * sizeof *z);
    if (z)
        out->sizes = z;
    if (!o || !z)
        return -1;
    uint64_t *offs = out->offsets + out->nparams, *sizes = out->sizes + out->nparams;
    memset(sizes, 0, k * sizeof *sizes);
    if (walk_info(a, info->sh_size, k, &k, &extent, offs, sizes) != 0)
        return -1;
    uint64_t end = 0;
    for (uint32_t i = 0; i < k; i++)
        if (offs[i] + sizes[i] > end)
            end = offs[i] + sizes[i];
    if (extent >= 0 ? end != (uint64_t)extent : k != 0)
        return -1; /* parameters this reader did not see */
    out->nparams += k;
    *count = k;
    return 0;
}

static int add_name(struct sl_fe_image_listing *out, const char *name)
{
    size_t nl = strlen(name) + 1;
    uint8_t *names = realloc(out->names, out->names_len + nl);
    if (!names)
        return -1;
    out->names = names;
    memcpy(out->names + out->names_len, name, nl);
    out->names_len += nl;
    return 0;
}

/* Every entry symbol of the cubin with its parameters. */
static int cubin_list(const struct cubin *c, struct sl_fe_image_listing *out)
{
    size_t nsym = c->symtab.sh_size / sizeof(Elf64_Sym);
    if (!(out->counts = malloc(SL_WIRE_MAX_IMAGE_KERNELS * sizeof *out->counts)))
        return -1;
    for (size_t i = 0; i < nsym; i++) {
        Elf64_Sym sym;
        memcpy(&sym, c->s.p + c->symtab.sh_offset + i * sizeof sym, sizeof sym);
        if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || !(sym.st_other & STO_CUDA_ENTRY))
            continue;
        const char *name = string_at(c, &c->symstr, sym.st_name);
        Elf64_Shdr info;
        if (!name || !*name || out->n == SL_WIRE_MAX_IMAGE_KERNELS ||
            strlen(name) >= SL_WIRE_MAX_STRING || info_section(c, name, &info) != 0 ||
            kernel_params(c, &info, out, &out->counts[out->n]) != 0 || add_name(out, name) != 0)
            return -1;
        out->n++;
    }
    return out->n ? 0 : -1;
}

/* The payload of the fatbin's uncompressed ELF entry for arch, NULL when there is none. */
static const uint8_t *fatbin_cubin(struct span f, unsigned arch, size_t *len)
{
    if (!inside(f, 0, 16) || u32_at(f.p) != FATBIN_MAGIC)
        return NULL;
    uint64_t at = u16_at(f.p + 6), files, end;
    memcpy(&files, f.p + 8, sizeof files);
    if (at < 16 || !inside(f, at, files))
        return NULL;
    end = at + files;
    while (end - at >= 32) {
        const uint8_t *e = f.p + at;
        uint32_t hs = u32_at(e + 4);
        uint64_t size;
        memcpy(&size, e + 8, sizeof size);
        if (hs < 32 || hs > end - at || size > end - at - hs)
            return NULL;
        const uint8_t *payload = e + hs;
        if (u16_at(e) == FATBIN_KIND_ELF && u32_at(e + 28) == arch && size >= SELFMAG &&
            memcmp(payload, ELFMAG, SELFMAG) == 0) {
            *len = (size_t)size;
            return payload;
        }
        at += hs + size;
    }
    return NULL;
}

int sl_fe_image_list(const void *image, size_t len, uint32_t fmt, const unsigned *sms, size_t nsm,
                     struct sl_fe_image_listing *out)
{
    memset(out, 0, sizeof *out);
    if (!image || !nsm || (fmt != FORMAT_FATBIN && fmt != FORMAT_WRAPPER && fmt != FORMAT_ELF))
        return -1;
    struct span whole = {image, len};
    struct cubin c;
    for (size_t i = 0; i < nsm; i++) {
        struct cubin each;
        const uint8_t *p = whole.p;
        size_t n = whole.len;
        if (fmt != FORMAT_ELF && !(p = fatbin_cubin(whole, sms[i], &n)))
            return -1;
        if (cubin_open(&each, p, n) != 0 || (fmt == FORMAT_ELF && cubin_arch(&each) != sms[i]))
            return -1;
        if (i == 0)
            c = each; /* the layouts are the kernels' own: read once */
    }
    if (cubin_list(&c, out) != 0) {
        sl_fe_image_listing_free(out);
        return -1;
    }
    return 0;
}

void sl_fe_image_listing_free(struct sl_fe_image_listing *l)
{
    free(l->names);
    free(l->counts);
    free(l->offsets);
    free(l->sizes);
    memset(l, 0, sizeof *l);
}
