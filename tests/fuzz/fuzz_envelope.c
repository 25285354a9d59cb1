/* fuzz_envelope: libFuzzer target for the envelope decoders and their validation.
 * Each input is tried as a ClientMessage and as a ServerMessage; whatever decodes must pass
 * validation again and re-encode. */
#include <stdint.h>
#include <stdlib.h>

#include "sluice/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sl_error e;
    uint8_t *buf = NULL;
    size_t len = 0;
    Sluice__Wire__ClientMessage *c = NULL;
    if (sl_wire_decode_client(data, size, NULL, &c, &e) == SL_OK) {
        if (sl_wire_encode_client(c, NULL, &buf, &len, &e) != SL_OK)
            abort(); /* a decoded message must re-encode */
        free(buf);
        sl_wire_free_client(c);
    }
    Sluice__Wire__ServerMessage *s = NULL;
    if (sl_wire_decode_server(data, size, NULL, &s, &e) == SL_OK) {
        if (sl_wire_encode_server(s, NULL, &buf, &len, &e) != SL_OK)
            abort();
        free(buf);
        sl_wire_free_server(s);
    }
    return 0;
}
