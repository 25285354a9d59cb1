/* fuzz_image: libFuzzer target for the backend's module image validator
 * (backend/api/module.c, be_image_validate), which sees every image a guest loads (cuModuleLoad*,
 * cuLibraryLoad*, cuLinkAdd*) before the driver does. The first input byte is the image format
 * (1 fatbin behind a wrapper, 2 fatbin, 3 ELF, 4 PTX, others refused); the rest is the image,
 * copied into a buffer of exactly its size so that AddressSanitizer sees any read past it.
 * An accepted ELF image must have every section and segment inside it, as the validator
 * promises (checked again here). */
#include <elf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/module.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_elf(const uint8_t *p, size_t len)
{
    Elf64_Ehdr eh;
    if (len < sizeof eh)
        abort();
    memcpy(&eh, p, sizeof eh);
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        Elf64_Shdr sh;
        if (eh.e_shoff + (uint64_t)(i + 1) * sizeof sh > len)
            abort();
        memcpy(&sh, p + eh.e_shoff + (uint64_t)i * sizeof sh, sizeof sh);
        if (sh.sh_type != SHT_NOBITS && (sh.sh_offset > len || sh.sh_size > len - sh.sh_offset))
            abort();
    }
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        if (eh.e_phoff + (uint64_t)(i + 1) * sizeof ph > len)
            abort();
        memcpy(&ph, p + eh.e_phoff + (uint64_t)i * sizeof ph, sizeof ph);
        if (ph.p_offset > len || ph.p_filesz > len - ph.p_offset)
            abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint32_t format = data[0] % 6;
    size_t len = size - 1;
    uint8_t *img = malloc(len ? len : 1);
    if (!img)
        abort();
    memcpy(img, data + 1, len);
    CUresult rc = be_image_validate(len ? img : NULL, len, format);
    if (rc == CUDA_SUCCESS) {
        if (format < 1 || format > 4)
            abort();
        if (format == 3)
            check_elf(img, len);
        if (format == 4 && img[len - 1] != 0)
            abort();
    }
    free(img);
    return 0;
}
