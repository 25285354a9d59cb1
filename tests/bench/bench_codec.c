/* sluice-bench-codec: encoding and decoding one launch Call with protobuf-c's generic functions
 * and with the wire's oneof codec (proto/codec/oneof_codec.c), in one process. A program, not a
 * test (docs/protocol.md "Encoding Call and Reply"). */
#include <stdio.h>
#include <time.h>

#include "sluice/wire.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(void)
{
    Sluice__Cuda__CuLaunchKernelRequest rq = SLUICE__CUDA__CU_LAUNCH_KERNEL_REQUEST__INIT;
    rq.f = 0x0500000000001234u;
    rq.grid_dim_x = 1024;
    rq.grid_dim_y = rq.grid_dim_z = rq.block_dim_y = rq.block_dim_z = 1;
    rq.block_dim_x = 256;
    rq.h_stream = 0x0600000000000044u;
    rq.kernel_params = 48;
    Sluice__Wire__Call c = SLUICE__WIRE__CALL__INIT;
    c.call_id = SL_CALL_cuLaunchKernel;
    c.seq = 1;
    c.context = 16;
    c.bulk_length = 48;
    c.args_case = SLUICE__WIRE__CALL__ARGS_CU_LAUNCH_KERNEL;
    c.cu_launch_kernel = &rq;
    enum { N = 1000000 };
    uint8_t buf[256];
    size_t len = 0;
    double t0 = now_s();
    for (int i = 0; i < N; i++, c.seq++) {
        len = sluice__wire__call__get_packed_size(&c);
        sluice__wire__call__pack(&c, buf);
    }
    double t1 = now_s();
    for (int i = 0; i < N; i++, c.seq++) {
        len = sl_wire_call_packed_size(&c);
        sl_wire_call_pack(&c, buf);
    }
    double t2 = now_s();
    for (int i = 0; i < N; i++)
        sluice__wire__call__free_unpacked(sluice__wire__call__unpack(NULL, len, buf), NULL);
    double t3 = now_s();
    for (int i = 0; i < N; i++)
        sl_wire_call_free(sl_wire_call_unpack(len, buf));
    double t4 = now_s();
    printf("launch Call of %zu bytes, %d times\n", len, N);
    printf("encode (size + pack)   protobuf-c %7.1f ns   oneof codec %7.1f ns\n",
           (t1 - t0) * 1e9 / N, (t2 - t1) * 1e9 / N);
    printf("decode + free          protobuf-c %7.1f ns   oneof codec %7.1f ns\n",
           (t3 - t2) * 1e9 / N, (t4 - t3) * 1e9 / N);
    return 0;
}
